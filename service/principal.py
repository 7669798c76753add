"""Who is calling: the verified principal and its opaque owner binding."""

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


def local_principal(
    owner: str, scopes: tuple[str, ...], resource: str = STDIO_RESOURCE
) -> Principal:
    """Build the principal of a local transport from the configured owner and scopes."""
    return Principal(LOCAL_ISSUER, resource, owner, frozenset(scopes))
