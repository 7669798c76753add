"""The variable table's entries for the HTTP transport and OAuth (resource server, first party)."""

from __future__ import annotations

import re
from typing import Final

from schemas.scopes import BASE_SCOPE
from service.config.table.entry import Variable
from service.config.table.rules import (
    Custom,
    Int,
    Matches,
    Networks,
    ReadableFile,
    Scopes,
    Switch,
)

_HTTPS = (
    "`https` URL, no userinfo, query, fragment or `%`; a public DNS host with a dot, no IP, port"
    " absent or 443 (unless `MCP_OAUTH_ALLOW_PRIVATE_HOSTS=1`)"
)
_REQUIRED_FIRST_PARTY = "unset (required in first-party mode)"

HTTP_VARIABLES: Final = (
    Variable(
        "PORT",
        "http",
        Int(1, 65535),
        "the HTTP port when `--port` is not given",
        unset=8080,
    ),
    Variable(
        "MCP_RESOURCE_URL",
        "http",
        Custom(_HTTPS, checked_by="_http_auth._url"),
        "this server's URL as clients reach it: tokens must name it in `aud`, and clients find"
        " the metadata at its origin + `/.well-known/oauth-protected-resource`",
        also="; path exactly `/mcp`",
    ),
    Variable(
        "MCP_OAUTH_ISSUER",
        "http",
        Custom(_HTTPS, checked_by="_http_auth._url"),
        "the issuer whose tokens are accepted, compared exactly with each token's `iss`: an"
        " external authorization server, or with `ANGELOS_OAUTH_ENABLED=1` this server itself,"
        " its public origin exactly `https://<host>` (the issuer it serves and signs as)",
    ),
    Variable(
        "MCP_OAUTH_JWKS_URL",
        "http",
        Custom(_HTTPS, checked_by="_http_auth._url"),
        "where the issuer's signing keys are fetched",
        also="; same host and port as `MCP_OAUTH_ISSUER`",
    ),
    Variable(
        "MCP_ALLOWED_SUBJECTS",
        "http",
        Custom(
            "1-32 comma-separated subjects, each at most 512 bytes, no control characters",
            checked_by="_http_auth._subjects",
        ),
        "the token subjects allowed to use this server",
        shown="unset (required with the other `MCP_` variables)",
    ),
    Variable(
        "MCP_OAUTH_INITIAL_SCOPES",
        "http",
        Scopes(),
        "scopes asked for in the first challenge (those whose gate is off are dropped)",
        unset=(BASE_SCOPE,),
    ),
    Variable(
        "MCP_OAUTH_CA_FILE",
        "http",
        ReadableFile(),
        "a PEM bundle of extra trusted CAs for fetching the signing keys (an issuer with a"
        " private CA) and, in first-party mode, client metadata documents",
        shown="unset (system CAs)",
    ),
    Variable(
        "MCP_OAUTH_ALLOW_PRIVATE_HOSTS",
        "http",
        Switch(),
        "lets the three `MCP_` URLs name loopback, private or single-label hosts, IP addresses"
        " (IPv6 in brackets) and any port; for tests and self-hosted issuers only",
        unset=False,
        also="; anything else is off",
    ),
)

OAUTH_VARIABLES: Final = (
    Variable(
        "ANGELOS_OAUTH_ENABLED",
        "oauth",
        Switch(),
        "serves the first-party authorization server; any problem in this group leaves `/mcp`"
        " unavailable, never falling back to an external issuer",
        unset=False,
    ),
    Variable(
        "ANGELOS_OAUTH_SIGNING_KEY_PEM",
        "oauth",
        Custom(
            "one unencrypted `PRIVATE KEY` (PKCS#8) or `EC PRIVATE KEY` PEM block on P-256, real"
            " line breaks, at most 16384 bytes",
            checked_by="_first_party._signing_key",
        ),
        "signs access tokens (ES256); never generated at startup: make one with"
        " `angelos oauth signing-key` and keep it in the secret manager",
        shown=_REQUIRED_FIRST_PARTY,
        secret=True,
        in_env_file=False,
    ),
    Variable(
        "ANGELOS_OAUTH_SIGNING_KEY_ID",
        "oauth",
        Custom(
            "1-128 bytes after trimming, no control characters",
            checked_by="_first_party._signing_kid",
        ),
        "the `kid` of the signing key; a new one with every new key, never reused",
        shown=_REQUIRED_FIRST_PARTY,
    ),
    Variable(
        "ANGELOS_OAUTH_VERIFICATION_KEYS_JSON",
        "oauth",
        Custom(
            "a JSON object of at most 4 `kid`: `PUBLIC KEY` PEM (P-256) members, at most 32768"
            " bytes; no `kid` equal to `ANGELOS_OAUTH_SIGNING_KEY_ID`",
            checked_by="_first_party._verification_keys",
        ),
        "retiring public keys still published for key rotation: publish the next key here"
        " first, switch, then keep the old one here until its tokens (5 minutes) expired",
        shown="none",
    ),
    Variable(
        "ANGELOS_OAUTH_CLIENTS_JSON",
        "oauth",
        Custom(
            "a strict JSON array (at most 32768 bytes, no names repeated even in other letter"
            ' case) of 1-16 `{"client_id", "client_name", "redirect_uris", "native"}`; required'
            " unless the client-metadata or the registration switch is on. `client_id` 1-512"
            " bytes, unique, not the"
            " ChatGPT URL; `client_name` 1-128 bytes; 1-8 unique redirect URIs: `https` on a"
            " public DNS name, port absent or 443, no fragment, userinfo, `%`, dot segments or"
            " bare `?`, and no `code`, `error`, `error_description`, `state` or `iss` in the"
            ' query. With `"native": true` also `http://127.0.0.1/<path>`, `http://[::1]/<path>`'
            " or `http://localhost/<path>` (a port or none; any port matches, the path and query"
            " exactly) and private-use scheme URIs (`com.example.app:/cb`; a scheme with a period,"
            " or `cursor`, `vscode`, `vscode-insiders`, `windsurf`)",
            checked_by="_first_party._clients",
        ),
        "the public clients (PKCE S256, no secret) that may ask the owner for access, e.g."
        ' `[{"client_id":"angelos-claude","client_name":"Claude","redirect_uris":'
        '["https://claude.ai/api/mcp/auth_callback"]}]`; removing one revokes its access',
        shown="none",
    ),
    Variable(
        "ANGELOS_OAUTH_CLIENT_METADATA_ENABLED",
        "oauth",
        Switch(),
        "accepts clients whose `client_id` is the https URL of their client metadata document"
        " (fetched at authorization, checked strictly, kept at most 5 minutes); ChatGPT's"
        " (`https://chatgpt.com/oauth/client.json`) is held to its one known callback; turning"
        " it off ends such clients' access",
        unset=False,
    ),
    Variable(
        "ANGELOS_OAUTH_REGISTRATION_ENABLED",
        "oauth",
        Switch(),
        "opens dynamic client registration (RFC 7591) at `/oauth/register` for clients that"
        " still need it (MCP Inspector, fastmcp): public clients only (no secret), 1-8 redirect"
        " URIs under the native rules (https, loopback on any port, private-use scheme), at most"
        " 10 registrations a minute per source address and 60 in all; a registration expires"
        " after 10 minutes unless the owner consents, then lives as long as its newest grant;"
        " consent and grants pages mark such clients self-registered; turning it off ends their"
        " access",
        unset=False,
    ),
    Variable(
        "ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH",
        "oauth",
        Matches(
            re.compile(r"[0-9a-f]{64}", re.ASCII),
            "64 lower-case hex characters",
            "must be 64 lower-case hex characters, the line `angelos oauth bootstrap-token` prints",
        ),
        "allows enrolling the owner's first passkey with the token whose SHA-256 this is (from"
        " `angelos oauth bootstrap-token`); remove it after enrollment",
    ),
    Variable(
        "ANGELOS_TRUSTED_PROXIES",
        "oauth",
        Networks(32),
        "the reverse proxies whose `X-Forwarded-For` is believed: anonymous sign-in budgets"
        " are kept per source address, read right to left past these proxies (unset: the"
        " socket peer, so behind a proxy every visitor shares the proxy's budget); name only"
        " proxies that overwrite or append to the header",
        unset=(),
    ),
)
