"""Who is calling: the verified principal, its opaque owner binding and, in first-party mode,
the opaque binding of the grant its token came from."""

from __future__ import annotations

import hashlib
import struct

from msgspec import Struct

LOCAL_ISSUER = "urn:angelos:local"
STDIO_RESOURCE = "urn:angelos:stdio"


class Principal(Struct, frozen=True):
    """A verified caller: issuer, resource and subject decide ownership; scopes decide rights."""

    issuer: str
    resource: str
    subject: str
    scopes: frozenset[str]
    # First-party mode only: grant_binding() of the token's grant ID, never the ID itself.
    grant: str | None = None

    @property
    def owner(self) -> str:
        """Return the 64-hex owner binding over (issuer, resource, subject)."""
        return owner_binding(self.issuer, self.resource, self.subject)

    def has(self, scope: str) -> bool:
        """Tell whether the principal holds a scope."""
        return scope in self.scopes


def owner_binding(issuer: str, resource: str, subject: str) -> str:
    """Hash the identity triple, each part length-prefixed, under a versioned label."""
    digest = hashlib.sha256(b"angelos/principal-binding/v1\x00")
    for part in (issuer, resource, subject):
        data = part.encode("utf-8")
        digest.update(struct.pack(">Q", len(data)))
        digest.update(data)
    return digest.hexdigest()


def grant_binding(grant_id: str) -> str:
    """Hash a first-party grant ID under its own label: not the ID, nor the grants page handle."""
    data = grant_id.encode("utf-8")
    digest = hashlib.sha256(b"angelos/grant-binding/v1\x00")
    digest.update(struct.pack(">Q", len(data)))
    digest.update(data)
    return digest.hexdigest()


def local_principal(
    owner: str, scopes: tuple[str, ...], resource: str = STDIO_RESOURCE
) -> Principal:
    """Build the principal of a local transport from the configured owner and scopes."""
    return Principal(LOCAL_ISSUER, resource, owner, frozenset(scopes))
