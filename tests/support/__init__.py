"""Helpers for tests that use the real peers started by scripts/test-services.

tests/ is on sys.path (it has no __init__.py), so import these as `support.<module>`:
`support.services` (the `services` fixture and its values), `support.imap` (raw aioimaplib
sessions, fresh folders, APPEND, Dovecot login counting) and `support.smtp_sink` (the SMTP
sink's transaction log).
"""
