"""Dynamic client registration (RFC 7591), opt-in: the metadata a client may register.

Only public clients of the code flow register: a JSON object of at most 16 KiB, read as strict
JSON (no repeated names, even in other letter case), with
- `redirect_uris`: 1-8 distinct callbacks under the native rules (https exact, loopback on any
  port, private-use scheme), the same rules and matching as configured native clients;
- `client_name`: 1-128 bytes without control characters (the consent page shows it, marked as
  what the client says about itself);
- `token_endpoint_auth_method`: `none` or absent; no `client_secret` of any kind;
- `grant_types` (absent: authorization_code) within authorization_code and refresh_token and
  holding authorization_code; `response_types` (absent: code) only `code`.
Other members are ignored (RFC 7591 §2). A refusal names its rule in `error_description`; the
client ID is the server's: `reg-` and 32 random bytes.
"""

from __future__ import annotations

import secrets
from typing import Any, Final, Literal

import msgspec

from schemas.strict_json import StrictJsonError, parse_object
from service.config import (
    FirstPartyConfig,
    callback_key,
    callback_problem,
    has_control,
    kind_of,
    utf8_size,
)

CLIENT_ID_PREFIX: Final = "reg-"
MAX_BODY_BYTES: Final = 16384
MAX_REDIRECT_URIS: Final = 8
MAX_NAME_BYTES: Final = 128
GRANT_TYPES: Final = ("authorization_code", "refresh_token")
SECRET_MEMBERS: Final = ("client_secret", "client_secret_expires_at")
RegistrationError = Literal["invalid_redirect_uri", "invalid_client_metadata"]


class RegistrationRefused(Exception):
    """The metadata breaks a rule: the RFC 7591 error and the rule, in words."""

    def __init__(self, error: RegistrationError, rule: str, description: str) -> None:
        super().__init__(rule)
        self.error = error
        self.rule = rule  # a short name for the log
        self.description = description  # for the client: which rule, never an echoed value


class SelfRegistered(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A registered client as stored and as authorization reads it (a RegisteredClient)."""

    v: Literal[1]
    client_id: str
    client_name: str
    redirect_uris: tuple[str, ...]
    grant_types: tuple[str, ...]
    issued_unix: int

    @property
    def native(self) -> bool:
        """Loopback and private-use callbacks are allowed, as for native configured clients."""
        return True

    def answer(self) -> dict[str, Any]:
        """The RFC 7591 §3.2.1 client information response (no secret: a public client)."""
        return {
            "client_id": self.client_id,
            "client_id_issued_at": self.issued_unix,
            "client_name": self.client_name,
            "redirect_uris": list(self.redirect_uris),
            "grant_types": list(self.grant_types),
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }


def new_client_id() -> str:
    """A fresh registered client ID: `reg-` and 32 random bytes, base64url."""
    return CLIENT_ID_PREFIX + secrets.token_urlsafe(32)


def is_registered_id(client_id: str) -> bool:
    """A client ID of the registered shape (whether or not such a registration exists)."""
    tail = client_id[len(CLIENT_ID_PREFIX) :]
    return (
        client_id.startswith(CLIENT_ID_PREFIX)
        and len(tail) == 43
        and all(ch.isascii() and (ch.isalnum() or ch in "-_") for ch in tail)
    )


def registered_client_id(config: FirstPartyConfig, client_id: str) -> bool:
    """A client ID a registration may stand behind: the switch on, the registered shape, not a
    configured client. Its tokens are honoured without reading the registration again (the
    grant holds the identity); turning the switch off ends them."""
    return (
        config.registration_enabled
        and is_registered_id(client_id)
        and all(client.client_id != client_id for client in config.clients)
    )


def check_registration(body: bytes, content_type: str, client_id: str, now: int) -> SelfRegistered:
    """Check a registration request; return the client to store, or raise RegistrationRefused."""
    if content_type.split(";", 1)[0].strip().lower() != "application/json":
        raise _metadata("media_type", "the body must be application/json")
    if len(body) > MAX_BODY_BYTES:
        raise _metadata("body_too_large", f"the body must be at most {MAX_BODY_BYTES} bytes")
    try:
        document = parse_object(body, casefold_names=True)
    except StrictJsonError:
        raise _metadata(
            "strict_json", "the body must be one JSON object, no member repeated"
        ) from None
    uris = _redirect_uris(document)
    name = document.get("client_name")
    if not isinstance(name, str) or not _name_ok(name):
        raise _metadata(
            "client_name",
            f"client_name is required: 1-{MAX_NAME_BYTES} bytes without control characters",
        )
    if any(member in document for member in SECRET_MEMBERS):
        raise _metadata("client_secret", "only public clients register: no client_secret")
    if document.get("token_endpoint_auth_method", "none") != "none":
        raise _metadata(
            "auth_method", 'token_endpoint_auth_method must be "none" (a public client, PKCE)'
        )
    grants = document.get("grant_types", ["authorization_code"])
    if (
        not _strings(grants)
        or "authorization_code" not in grants
        or not set(grants) <= set(GRANT_TYPES)
        or len(set(grants)) != len(grants)
    ):
        raise _metadata(
            "grant_types",
            "grant_types must hold authorization_code and at most also refresh_token",
        )
    responses = document.get("response_types", ["code"])
    if not _strings(responses) or set(responses) != {"code"}:
        raise _metadata("response_types", 'response_types must be ["code"]')
    ordered = tuple(grant for grant in GRANT_TYPES if grant in grants)
    return SelfRegistered(1, client_id, name.strip(), uris, ordered, now)


def _redirect_uris(document: dict[str, Any]) -> tuple[str, ...]:
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not _strings(uris) or not 1 <= len(uris) <= MAX_REDIRECT_URIS:
        raise RegistrationRefused(
            "invalid_redirect_uri",
            "redirect_uris",
            f"redirect_uris must be a list of 1-{MAX_REDIRECT_URIS} strings",
        )
    if len({callback_key(uri) for uri in uris}) != len(uris):
        raise RegistrationRefused(
            "invalid_redirect_uri",
            "redirect_uris_repeated",
            "redirect_uris must be distinct (loopback callbacks compare without their port)",
        )
    for index, uri in enumerate(uris):
        problem = callback_problem(uri, native=True)
        if problem is not None:
            raise RegistrationRefused(
                "invalid_redirect_uri", "redirect_uri_rule", f"redirect_uris[{index}] {problem}"
            )
    return tuple(uris)


def uri_kinds(client: SelfRegistered) -> str:
    """The kinds of a client's callbacks, for the log (never the URIs)."""
    return " ".join(sorted({kind_of(uri) for uri in client.redirect_uris}))


def _metadata(rule: str, description: str) -> RegistrationRefused:
    return RegistrationRefused("invalid_client_metadata", rule, description)


def _name_ok(name: str) -> bool:
    stripped = name.strip()
    return 1 <= utf8_size(stripped) <= MAX_NAME_BYTES and not has_control(stripped)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)
