"""The first-party OAuth authorization server: signing keys now, endpoints to come."""
