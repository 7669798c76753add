"""OAuth 2.0 resource-server pieces: strict token and key-set parsing, key cache, bearer checks."""
