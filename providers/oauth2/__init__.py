"""OAuth 2.0 access tokens for XOAUTH2 mail logins (Gmail, Outlook): refresh, cache, sources."""
