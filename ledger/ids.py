"""Random identifiers of the ledger: event ids, claim tokens, dispatcher ids."""

from __future__ import annotations

import os


def new_id() -> str:
    """Return 32 lowercase hex from the CSPRNG."""
    return os.urandom(16).hex()
