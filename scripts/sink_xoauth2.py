"""The XOAUTH2 rig's side of the SMTP sink: which bearer tokens it accepts, and where it files
the Sent copies a Gmail-shaped server keeps of what it accepts (used by smtp_sink.py)."""

from __future__ import annotations

import imaplib
import ssl
import sys
from dataclasses import dataclass, field

from joserfc import jwt
from joserfc.jwk import ECKey

# RFC 4954 §4: an AUTH command line may be 12288 bytes; long bearer tokens (JWTs) need that.
AUTH_LINE_LIMIT = 12288


@dataclass(frozen=True)
class SentFolder:
    """Where the sink files its Sent copies: an IMAP mailbox it logs in to with PLAIN."""

    host: str
    port: int
    user: str
    password: str = field(repr=False)
    ca_file: str
    folder: str

    def append(self, content: bytes) -> bool:
        """APPEND the exact bytes with \\Seen (blocking: run it in a thread); tell if it worked."""
        context = ssl.create_default_context(cafile=self.ca_file)
        quoted = '"' + self.folder.replace("\\", "\\\\").replace('"', '\\"') + '"'
        try:
            with imaplib.IMAP4_SSL(self.host, self.port, ssl_context=context, timeout=30) as imap:
                imap.login(self.user, self.password)
                status, _ = imap.append(quoted, "(\\Seen)", None, content)
                return status == "OK"
        except (imaplib.IMAP4.error, OSError) as e:
            print(f"filing the Sent copy failed: {type(e).__name__}", file=sys.stderr, flush=True)
            return False


@dataclass(frozen=True)
class BearerRules:
    """What a valid XOAUTH2 bearer token is here: an ES256 JWT from the rig's issuer."""

    user: str
    key: ECKey = field(repr=False)
    kid: str
    issuer: str

    def user_if_valid(self, blob: bytes) -> str | None:
        """The XOAUTH2 user when `blob` names it with a token valid for it, else None."""
        parts = blob.split(b"\x01")
        if len(parts) != 4 or parts[2:] != [b"", b""]:
            return None
        if not parts[0].startswith(b"user=") or not parts[1].startswith(b"auth=Bearer "):
            return None
        user = parts[0][5:].decode("utf-8", "replace")
        token = parts[1][12:].decode("ascii", "replace")
        if user != self.user or len(token) > AUTH_LINE_LIMIT:
            return None
        try:
            decoded = jwt.decode(token, self.key, algorithms=["ES256"])
            if decoded.header.get("kid") != self.kid:
                return None
            jwt.JWTClaimsRegistry(
                iss={"essential": True, "value": self.issuer},
                sub={"essential": True, "value": user},
                exp={"essential": True},
            ).validate(decoded.claims)
        except Exception:  # anything joserfc cannot accept is a refusal
            return None
        return user
