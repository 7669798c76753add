"""The OAuth resource server: bearer checks, strict token and key-set parsing, and the key cache."""
