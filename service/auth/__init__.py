"""Who may call: the resource server (resource/), the authorization server (server/),
the access-token profile both read (profile.py), and their wiring into HTTP (wiring.py).
"""
