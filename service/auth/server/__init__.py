"""The first-party OAuth authorization server (opt-in with ANGELOS_OAUTH_ENABLED=1)."""
