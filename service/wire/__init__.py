"""What the rooms of the service share: strict JSON, base64url, the guarded GET, sealing."""
