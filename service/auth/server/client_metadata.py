"""Client ID Metadata Documents: a client whose `client_id` is the https URL of its document.

The document is checked strictly (media type, strict JSON, at most 32 KiB): `client_id` equal to
the URL it was fetched from, a `client_name`, 1-8 redirect URIs under the native rules (https
exact, loopback any port, private-use scheme), `token_endpoint_auth_method` none, no secret,
grant and response types (when present) that allow the code flow. ChatGPT's document
(`https://chatgpt.com/oauth/client.json`) is one case of the rule, with its pin kept on top:
the name ChatGPT, exactly its one callback, refresh tokens, all members present. The pin
keeps a changed or poisoned document from adding callbacks to a client the owner already
trusts by name.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from schemas.strict_json import StrictJsonError, parse_object
from service.config import (
    CHATGPT_CLIENT_ID,
    FirstPartyConfig,
    callback_key,
    callback_problem,
    has_control,
    parse_public_https_url,
    utf8_size,
)

CHATGPT_CALLBACK: Final = "https://chatgpt.com/connector_platform_oauth_redirect"
CHATGPT_NAME: Final = "ChatGPT"
MAX_DOCUMENT_BYTES: Final = 32768
MAX_URL_BYTES: Final = 512
MAX_NAME_BYTES: Final = 128
MAX_REDIRECT_URIS: Final = 8
PINNED_REQUIRED: Final = (
    "client_id",
    "client_name",
    "redirect_uris",
    "grant_types",
    "response_types",
)


class MetadataClient(msgspec.Struct, frozen=True):
    """A client as its metadata document (and, for ChatGPT, the pin) allows it."""

    client_id: str
    client_name: str
    redirect_uris: tuple[str, ...]
    native: bool = True  # loopback and private-use scheme callbacks are allowed

    @property
    def host(self) -> str:
        """The host (and port, when one is written) the client ID's document lives on."""
        return document_host(self.client_id)


def document_host(client_id: str) -> str:
    """The authority of an https client ID, lower-cased."""
    return client_id.split("/", 3)[2].lower()


CHATGPT: Final = MetadataClient(CHATGPT_CLIENT_ID, CHATGPT_NAME, (CHATGPT_CALLBACK,), native=False)


class MetadataRefused(Exception):
    """The document breaks a rule; the message names the rule only."""


def metadata_url_problem(client_id: str, *, allow_private_hosts: bool) -> str | None:
    """Why client_id cannot be a metadata document URL, or None: https under the public URL
    rule (private hosts only with the operator's switch), a path, at most 512 bytes."""
    if utf8_size(client_id) > MAX_URL_BYTES:
        return "too long"
    parsed, rule = parse_public_https_url(client_id, allow_private_hosts=allow_private_hosts)
    if parsed is None:
        return rule
    if parsed.path in ("", "/"):
        return "needs a path"
    return None


def metadata_client_id(config: FirstPartyConfig, client_id: str) -> bool:
    """A client ID bound by its metadata document at authorization: the switch on, not a
    configured client, and an acceptable document URL. Tokens and grants of such a client are
    honoured without fetching again; turning the switch off ends them."""
    return (
        config.cimd_enabled
        and all(client.client_id != client_id for client in config.clients)
        and metadata_url_problem(client_id, allow_private_hosts=config.allow_private_hosts) is None
    )


def looks_like_metadata_url(client_id: str) -> bool:
    """A client_id written as an https URL (whether or not it is an acceptable one)."""
    return client_id[:8].lower() == "https://"


def check_document(body: bytes, media_type: str, url: str = CHATGPT_CLIENT_ID) -> MetadataClient:
    """Check a document fetched from url, or raise MetadataRefused naming the rule."""
    if media_type != "application/json":
        raise MetadataRefused("media-type")
    try:
        document = parse_object(body, casefold_names=True)
    except StrictJsonError as error:
        rule = error.rule
    else:
        client = _client(document, url)
        return _pinned(document, client) if url == CHATGPT_CLIENT_ID else client
    raise MetadataRefused(rule)


def _client(document: dict[str, Any], url: str) -> MetadataClient:
    if any(name not in document for name in ("client_id", "client_name", "redirect_uris")):
        raise MetadataRefused("missing-member")
    name = document["client_name"]
    if document["client_id"] != url or not isinstance(name, str) or not _name_ok(name):
        raise MetadataRefused("identity")
    if "client_secret" in document or "client_secret_expires_at" in document:
        raise MetadataRefused("client-secret")
    _auth_method(document)
    grants = document.get("grant_types", ["authorization_code"])
    if not _strings(grants) or "authorization_code" not in grants:
        raise MetadataRefused("grant-types")
    responses = document.get("response_types", ["code"])
    if not _strings(responses) or "code" not in responses:
        raise MetadataRefused("response-types")
    uris = document["redirect_uris"]
    if not _strings(uris) or not 1 <= len(uris) <= MAX_REDIRECT_URIS:
        raise MetadataRefused("redirect-uris")
    if len({callback_key(uri) for uri in uris}) != len(uris):
        raise MetadataRefused("redirect-uris-repeated")
    if any(callback_problem(uri, native=True) for uri in uris):
        raise MetadataRefused("redirect-uri-rule")
    return MetadataClient(url, name.strip(), tuple(uris))


def _auth_method(document: dict[str, Any]) -> None:
    """A public client: `none`, read from the plural list ChatGPT uses when it is present."""
    methods = document.get("token_endpoint_auth_methods_supported")
    if methods is None:
        single = document.get("token_endpoint_auth_method")
        methods = [single] if single is not None else None
    if not isinstance(methods, list) or not _strings(methods) or "none" not in methods:
        raise MetadataRefused("auth-method")


def _pinned(document: dict[str, Any], client: MetadataClient) -> MetadataClient:
    if any(name not in document for name in PINNED_REQUIRED):
        raise MetadataRefused("missing-member")
    if client.client_name != CHATGPT_NAME:
        raise MetadataRefused("identity")
    if not {"authorization_code", "refresh_token"} <= set(document["grant_types"]):
        raise MetadataRefused("grant-types")
    if set(client.redirect_uris) != {CHATGPT_CALLBACK}:
        raise MetadataRefused("redirect-uris")
    return CHATGPT


def _name_ok(name: str) -> bool:
    stripped = name.strip()
    return 1 <= utf8_size(stripped) <= MAX_NAME_BYTES and not has_control(stripped)


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)
