"""The ANGELOS_OAUTH_* group: the first-party authorization server and its identity relations.

The MCP_* variables keep their own rules (reported by that group); this module adds what
first-party mode requires of them, and never reports a value, only the rule it broke.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec

from schemas.secret import Secret
from schemas.strict_json import StrictJsonError, parse_array, parse_object
from service.config._model import Client, FirstPartyConfig, HttpAuthConfig, MailConfig, StoreConfig
from service.config._redirect_uris import callback_key, callback_problem
from service.config._urls import HttpsUrl, parse_public_https_url
from service.config._values import has_control, utf8_size, value_of
from service.config.signing_keys import (
    MAX_VERIFICATION_KEYS,
    KeyRefused,
    VerificationKey,
    load_signing_key,
    load_verification_key,
)
from service.config.table.variables import read

CHATGPT_CLIENT_ID = "https://chatgpt.com/oauth/client.json"
MAX_JSON_BYTES = 32768
MAX_JSON_DEPTH = 32
MAX_CLIENTS = 16
MAX_CLIENT_ID_BYTES = 512
MAX_CLIENT_NAME_BYTES = 128
MAX_REDIRECT_URIS = 8
MAX_KID_BYTES = 128
MAX_SUBJECT_BYTES = 512
_CLIENTS = "ANGELOS_OAUTH_CLIENTS_JSON"
_KEYS = "ANGELOS_OAUTH_VERIFICATION_KEYS_JSON"


def first_party_enabled(env: Mapping[str, str]) -> bool:
    """Tell whether ANGELOS_OAUTH_ENABLED asks for first-party mode (the exact value 1)."""
    enabled: bool = read(env, "ANGELOS_OAUTH_ENABLED", [])
    return enabled


def load_first_party(
    env: Mapping[str, str],
    http_auth: HttpAuthConfig | None,
    mail: MailConfig | None,
    store: StoreConfig | None,
) -> tuple[FirstPartyConfig | None, tuple[str, ...]]:
    """Validate first-party mode; None without problems when it is off.

    http_auth, mail and store are what their own groups loaded: when one is None its group has
    already said why, and first-party mode stays off without repeating it.
    """
    if not first_party_enabled(env):
        return None, ()
    problems: list[str] = []
    private = env.get("MCP_OAUTH_ALLOW_PRIVATE_HOSTS") == "1"
    issuer = _issuer(env, private, problems)
    owner = _owner(env, problems)
    mail_from = value_of(env, "MAIL_FROM")
    if mail_from is None:
        problems.append("MAIL_FROM: first-party mode needs it set explicitly (consent shows it)")
    if value_of(env, "ANGELOS_REDIS_URL") == "off":
        problems.append("ANGELOS_REDIS_URL: first-party mode needs a store; off is not allowed")
    kid = _signing_kid(env, problems)
    key = _signing_key(env, problems)
    retiring = _verification_keys(env, kid, problems)
    cimd: bool = read(env, "ANGELOS_OAUTH_CLIENT_METADATA_ENABLED", problems)
    read(env, "ANGELOS_OAUTH_CHATGPT_CIMD_ENABLED", problems)  # renamed: any value is a problem
    registration: bool = read(env, "ANGELOS_OAUTH_REGISTRATION_ENABLED", problems)
    clients = _clients(env, cimd or registration, problems)
    bootstrap_hash = _bootstrap_hash(env, problems)
    proxies: tuple[Any, ...] = read(env, "ANGELOS_TRUSTED_PROXIES", problems)

    if (
        problems
        or http_auth is None
        or mail is None
        or store is None
        or issuer is None
        or owner is None
        or mail_from is None
        or kid is None
        or key is None
        or retiring is None
        or clients is None
    ):
        return None, tuple(problems)
    return (
        FirstPartyConfig(
            issuer=issuer,
            resource=http_auth.resource_url,
            jwks_url=http_auth.jwks_url,
            owner=owner,
            signing_key=key,
            signing_kid=kid,
            verification_keys=retiring,
            clients=clients,
            cimd_enabled=cimd,
            bootstrap_hash=bootstrap_hash,
            mail_from=mail.from_addr,
            allow_private_hosts=private,
            trusted_proxies=proxies,
            ca_file=http_auth.ca_file,
            registration_enabled=registration,
        ),
        (),
    )


def first_party_shown(
    env: Mapping[str, str], loaded: FirstPartyConfig | None
) -> tuple[tuple[str, Any], ...]:
    """For check-config once first-party mode failed: each ANGELOS_OAUTH_* value that resolves
    by its own rules, so one broken variable does not hide the others (secrets as set/unset)."""
    if loaded is not None or not first_party_enabled(env):
        return ()
    scratch: list[str] = []  # the problems were reported by load_first_party already
    kid = _signing_kid(env, scratch)
    cimd: bool = read(env, "ANGELOS_OAUTH_CLIENT_METADATA_ENABLED", scratch)
    registration: bool = read(env, "ANGELOS_OAUTH_REGISTRATION_ENABLED", scratch)
    retiring = _verification_keys(env, kid, scratch)
    clients = _clients(env, cimd or registration, scratch)
    proxies: tuple[Any, ...] | None = read(env, "ANGELOS_TRUSTED_PROXIES", scratch)
    bootstrap = value_of(env, "ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH")
    shown: dict[str, Any] = {
        "ANGELOS_OAUTH_SIGNING_KEY_PEM": None if _signing_key(env, scratch) is None else "set",
        "ANGELOS_OAUTH_SIGNING_KEY_ID": kid,
        "ANGELOS_OAUTH_VERIFICATION_KEYS_JSON": None
        if retiring is None
        else [key.kid for key in retiring],
        "ANGELOS_OAUTH_CLIENTS_JSON": None
        if clients is None
        else [client.client_id for client in clients],
        "ANGELOS_OAUTH_CLIENT_METADATA_ENABLED": "on" if cimd else "off",
        "ANGELOS_OAUTH_REGISTRATION_ENABLED": "on" if registration else "off",
        "ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH": "unset" if bootstrap is None else "set",
        "ANGELOS_TRUSTED_PROXIES": None
        if proxies is None
        else [str(network) for network in proxies],
    }
    return tuple((name, value) for name, value in shown.items() if value is not None)


def first_party_origin(env: Mapping[str, str]) -> str | None:
    """The issuer when first-party mode is on and it is a bare https origin, else None."""
    if not first_party_enabled(env):
        return None
    return _issuer(env, env.get("MCP_OAUTH_ALLOW_PRIVATE_HOSTS") == "1", [])


def _issuer(env: Mapping[str, str], private: bool, problems: list[str]) -> str | None:
    """Check the issuer is a bare origin and the resource and JWKS URLs hang off it exactly."""
    raw = value_of(env, "MCP_OAUTH_ISSUER") or ""
    parsed, _ = parse_public_https_url(raw, allow_private_hosts=private)
    if parsed is None:
        return None  # the MCP_ group names the broken rule
    problem = _origin_problem(raw, parsed, private)
    if problem:
        problems.append(f"MCP_OAUTH_ISSUER: first-party mode needs {problem}")
        return None
    for name, suffix in (("MCP_RESOURCE_URL", "/mcp"), ("MCP_OAUTH_JWKS_URL", "/oauth/jwks.json")):
        value = value_of(env, name)
        present, _ = parse_public_https_url(value or "", allow_private_hosts=private)
        if present is not None and value != raw + suffix:
            problems.append(f"{name}: first-party mode needs exactly MCP_OAUTH_ISSUER + {suffix}")
    return raw


def _origin_problem(raw: str, parsed: HttpsUrl, private: bool) -> str | None:
    if parsed.path:
        return "a bare origin: no path, not even a trailing slash"
    if raw != raw.lower():
        return "the scheme and host in lower case"
    host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
    if raw != "https://" + host + ("" if parsed.port == 443 else f":{parsed.port}"):
        port = "a port other than 443 as :<port>" if private else "no port"
        return f"exactly https://<host>, with {port}"
    return None


def _owner(env: Mapping[str, str], problems: list[str]) -> str | None:
    raw = value_of(env, "MCP_ALLOWED_SUBJECTS")
    if raw is None:
        return None  # the MCP_ group says it is required
    if "," in raw or raw != raw.strip() or has_control(raw) or utf8_size(raw) > MAX_SUBJECT_BYTES:
        problems.append(
            "MCP_ALLOWED_SUBJECTS: first-party mode needs exactly one owner subject: no comma,"
            f" no surrounding whitespace, at most {MAX_SUBJECT_BYTES} bytes"
        )
        return None
    return raw


def _kid_problem(kid: str) -> str | None:
    if not 1 <= utf8_size(kid) <= MAX_KID_BYTES or has_control(kid):
        return f"must be 1-{MAX_KID_BYTES} bytes without control characters"
    return None


def _signing_kid(env: Mapping[str, str], problems: list[str]) -> str | None:
    kid = (value_of(env, "ANGELOS_OAUTH_SIGNING_KEY_ID") or "").strip()
    if not kid:
        problems.append(
            "ANGELOS_OAUTH_SIGNING_KEY_ID: required in first-party mode (a new one with each key)"
        )
        return None
    problem = _kid_problem(kid)
    if problem:
        problems.append(f"ANGELOS_OAUTH_SIGNING_KEY_ID: {problem}")
        return None
    return kid


def _signing_key(env: Mapping[str, str], problems: list[str]) -> ec.EllipticCurvePrivateKey | None:
    pem = value_of(env, "ANGELOS_OAUTH_SIGNING_KEY_PEM")
    if pem is None:
        problems.append(
            "ANGELOS_OAUTH_SIGNING_KEY_PEM: required in first-party mode; make one with"
            " `angelos oauth signing-key` and keep it in the secret manager"
        )
        return None
    rule = ""
    try:
        return load_signing_key(pem)
    except KeyRefused as refused:
        rule = str(refused)
    problems.append(f"ANGELOS_OAUTH_SIGNING_KEY_PEM: {rule}")
    return None


def _verification_keys(
    env: Mapping[str, str], active_kid: str | None, problems: list[str]
) -> tuple[VerificationKey, ...] | None:
    raw = value_of(env, _KEYS)
    if raw is None:
        return ()
    document = _json_document(raw, problems, _KEYS, array=False)
    if not isinstance(document, dict):
        if document is not None:
            problems.append(f"{_KEYS}: must be a JSON object of kid to PUBLIC KEY PEM")
        return None
    if len(document) > MAX_VERIFICATION_KEYS:
        problems.append(f"{_KEYS}: must hold at most {MAX_VERIFICATION_KEYS} keys")
        return None
    before = len(problems)
    keys = []
    for number, (kid, pem) in enumerate(document.items(), start=1):
        where = f"{_KEYS}: key {number}"
        kid_problem = _kid_problem(kid) or (None if kid == kid.strip() else "must not be padded")
        if kid_problem:
            problems.append(f"{where}: kid {kid_problem}")
        elif kid == active_kid:
            problems.append(f"{where}: kid must differ from ANGELOS_OAUTH_SIGNING_KEY_ID")
        if not isinstance(pem, str) or not pem:
            problems.append(f"{where}: must be a PUBLIC KEY PEM string")
            continue
        try:
            keys.append(VerificationKey(kid, load_verification_key(pem)))
        except KeyRefused as refused:
            problems.append(f"{where}: {refused}")
    if len(problems) != before:
        return None
    return tuple(sorted(keys, key=lambda entry: entry.kid))


def _json_document(raw: str, problems: list[str], name: str, *, array: bool) -> Any:
    """Parse a strict JSON setting, or add the problem and return None."""
    data = raw.encode("utf-8", "surrogatepass")
    if len(data) > MAX_JSON_BYTES:
        problems.append(f"{name}: must be at most {MAX_JSON_BYTES} bytes")
        return None
    rule = ""
    try:
        if array:
            return parse_array(data, max_depth=MAX_JSON_DEPTH, casefold_names=True)
        return parse_object(data, max_depth=MAX_JSON_DEPTH)
    except StrictJsonError as error:
        rule = error.rule
    if rule in ("not-array", "not-object"):
        problems.append(f"{name}: must be a JSON {'array' if array else 'object'}")
    else:
        problems.append(f"{name}: is not strict JSON ({rule})")
    return None


def _clients(
    env: Mapping[str, str], others: bool, problems: list[str]
) -> tuple[Client, ...] | None:
    """The configured clients; none is allowed only when `others` (metadata documents or
    registration) can connect."""
    raw = value_of(env, _CLIENTS)
    document = [] if raw is None else _json_document(raw, problems, _CLIENTS, array=True)
    if document is None:
        return None
    if not document and not others:
        problems.append(
            f"{_CLIENTS}: at least one client is needed unless"
            " ANGELOS_OAUTH_CLIENT_METADATA_ENABLED=1 or ANGELOS_OAUTH_REGISTRATION_ENABLED=1"
        )
        return None
    if len(document) > MAX_CLIENTS:
        problems.append(f"{_CLIENTS}: must list at most {MAX_CLIENTS} clients")
        return None
    before = len(problems)
    clients: list[Client] = []
    first_seen: dict[str, int] = {}
    for number, entry in enumerate(document, start=1):
        client = _client(entry, f"{_CLIENTS}: client {number}", problems)
        if client is None:
            continue
        if client.client_id in first_seen:
            problems.append(
                f"{_CLIENTS}: client {number}: client_id repeats client"
                f" {first_seen[client.client_id]}"
            )
            continue
        first_seen[client.client_id] = number
        clients.append(client)
    if len(problems) != before:
        return None
    return tuple(clients)


def _client(entry: object, where: str, problems: list[str]) -> Client | None:
    if not isinstance(entry, dict):
        problems.append(f"{where}: must be an object")
        return None
    before = len(problems)
    raw_id, raw_name = entry.get("client_id"), entry.get("client_name")
    client_id = raw_id.strip() if isinstance(raw_id, str) else None
    if (
        client_id is None
        or not 1 <= utf8_size(client_id) <= MAX_CLIENT_ID_BYTES
        or has_control(client_id)
    ):
        problems.append(
            f"{where}: client_id must be a string of 1-{MAX_CLIENT_ID_BYTES} bytes without"
            " control characters"
        )
    elif client_id == CHATGPT_CLIENT_ID:
        problems.append(
            f"{where}: client_id must not be the ChatGPT client; set"
            " ANGELOS_OAUTH_CLIENT_METADATA_ENABLED=1 for it instead"
        )
    name = raw_name.strip() if isinstance(raw_name, str) else None
    if name is None or not 1 <= utf8_size(name) <= MAX_CLIENT_NAME_BYTES or has_control(name):
        problems.append(
            f"{where}: client_name must be a string of 1-{MAX_CLIENT_NAME_BYTES} bytes without"
            " control characters"
        )
    native = entry.get("native", False)
    if not isinstance(native, bool):
        problems.append(f"{where}: native must be true or false")
        native = False
    uris = redirect_uri_list(entry.get("redirect_uris"), where, problems, native=native)
    if len(problems) != before or client_id is None or name is None or uris is None:
        return None
    return Client(client_id=client_id, client_name=name, redirect_uris=uris, native=native)


def redirect_uri_list(
    value: object, where: str, problems: list[str], *, native: bool
) -> tuple[str, ...] | None:
    """1-8 distinct acceptable redirect URIs (loopback ones differing only in port are one)."""
    if (
        not isinstance(value, list)
        or not 1 <= len(value) <= MAX_REDIRECT_URIS
        or not all(isinstance(uri, str) for uri in value)
    ):
        problems.append(
            f"{where}: redirect_uris must be a list of 1-{MAX_REDIRECT_URIS} URI strings"
        )
        return None
    before = len(problems)
    first_seen: dict[str, int] = {}
    for number, uri in enumerate(value, start=1):
        key = callback_key(uri)
        if key in first_seen:
            problems.append(f"{where}: redirect URI {number} repeats URI {first_seen[key]}")
            continue
        first_seen[key] = number
        problem = callback_problem(uri, native=native)
        if problem:
            problems.append(f"{where}: redirect URI {number} {problem}")
    return None if len(problems) != before else tuple(value)


def _bootstrap_hash(env: Mapping[str, str], problems: list[str]) -> Secret | None:
    raw = read(env, "ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH", problems)
    return None if raw is None else Secret(raw)
