"""Who may call: the resource server (resource/, with the access-token profile the issuer
also builds from), the authorization server (server/), and their wiring into HTTP (wiring.py).
"""
