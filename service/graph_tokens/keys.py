"""Where a Graph grant's refresh token is stored: one record key per grant and mailbox identity.

The key names the tenant, the client, the Graph account, the sender and the initial refresh
token (by its hash), so changing any of them, a new consent included, starts a new generation
instead of reading another grant's token. The braces are a Redis Cluster hash tag: the record
and its marker always live on one node, as one Lua script needs them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Final

from schemas.secret import Secret

PREFIX: Final = "angelos:microsoft:refresh:v1:"
MARKER_SUFFIX: Final = ":initialized"
MARKER_VALUE: Final = "v1"


def record_key(
    tenant: str, client_id: str, account_id: str, mail_from: str, initial_refresh_token: Secret
) -> str:
    """`angelos:microsoft:refresh:v1:{<hex SHA-256 of the identity's JSON array>}`.

    The array is [tenant, client id, account id, MAIL_FROM, hex SHA-256 of the initial refresh
    token], written as compact JSON (no spaces, non-ASCII as UTF-8) and hashed as UTF-8.
    """
    seed = hashlib.sha256(_utf8(initial_refresh_token.reveal())).hexdigest()
    identity = json.dumps(
        [tenant, client_id, account_id, mail_from, seed], ensure_ascii=False, separators=(",", ":")
    )
    return f"{PREFIX}{{{hashlib.sha256(_utf8(identity)).hexdigest()}}}"


def marker_key(record: str) -> str:
    """The marker beside a record: the record key + `:initialized`."""
    return record + MARKER_SUFFIX


def _utf8(text: str) -> bytes:
    # Environment strings may carry lone surrogates; they must hash, not raise.
    return text.encode("utf-8", "surrogatepass")
