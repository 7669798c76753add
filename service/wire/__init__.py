"""Helpers all rooms of the service share: strict JSON, base64url, the guarded HTTPS GET."""
