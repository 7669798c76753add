"""The variable table's entries for the HTTP transport and OAuth (resource server, first party)."""

from __future__ import annotations

from typing import Final

from service.config._variable import HTTPS_RULE, SCOPES_RULE, Variable

HTTP_VARIABLES: Final = (
    Variable(
        "PORT",
        "http",
        "`8080`",
        "1-65535",
        "the HTTP port when `--port` is not given",
    ),
    Variable(
        "MCP_RESOURCE_URL",
        "http",
        "unset",
        HTTPS_RULE + "; path exactly `/mcp`",
        "this server's URL as clients reach it: tokens must name it in `aud`, and clients find"
        " the metadata at its origin + `/.well-known/oauth-protected-resource`",
    ),
    Variable(
        "MCP_OAUTH_ISSUER",
        "http",
        "unset",
        HTTPS_RULE,
        "the external authorization server whose tokens are accepted; compared exactly with"
        " each token's `iss`",
    ),
    Variable(
        "MCP_OAUTH_JWKS_URL",
        "http",
        "unset",
        HTTPS_RULE + "; same host and port as `MCP_OAUTH_ISSUER`",
        "where the issuer's signing keys are fetched",
    ),
    Variable(
        "MCP_ALLOWED_SUBJECTS",
        "http",
        "unset (required with the other `MCP_` variables)",
        "1-32 comma-separated subjects, each at most 512 bytes, no control characters",
        "the token subjects allowed to use this server",
    ),
    Variable(
        "MCP_OAUTH_INITIAL_SCOPES",
        "http",
        "`mail.read`",
        SCOPES_RULE,
        "scopes asked for in the first challenge (those whose gate is off are dropped)",
    ),
    Variable(
        "MCP_OAUTH_CA_FILE",
        "http",
        "unset (system CAs)",
        "an existing readable file",
        "a PEM bundle of extra trusted CAs for fetching the signing keys (an issuer with a"
        " private CA)",
    ),
    Variable(
        "MCP_OAUTH_ALLOW_PRIVATE_HOSTS",
        "http",
        "off",
        "`1` is on; anything else is off",
        "lets the three `MCP_` URLs name loopback, private or single-label hosts, IP addresses"
        " (IPv6 in brackets) and any port; for tests and self-hosted issuers only",
    ),
)

OAUTH_VARIABLES: Final = (
    Variable(
        "ANGELOS_OAUTH_ENABLED",
        "oauth",
        "off",
        "`1` is on (coming: refused by this release until the endpoints land)",
        "serves the first-party authorization server; any problem in this group leaves `/mcp`"
        " unavailable, never falling back to an external issuer",
    ),
    Variable(
        "ANGELOS_OAUTH_SIGNING_KEY_PEM",
        "oauth",
        "unset (required in first-party mode)",
        "one unencrypted `PRIVATE KEY` (PKCS#8) or `EC PRIVATE KEY` PEM block on P-256, real line"
        " breaks, at most 16384 bytes",
        "signs access tokens (ES256); never generated at startup: make one with"
        " `angelos oauth signing-key` and keep it in the secret manager",
        secret=True,
        in_env_file=False,
    ),
    Variable(
        "ANGELOS_OAUTH_SIGNING_KEY_ID",
        "oauth",
        "unset (required in first-party mode)",
        "1-128 bytes after trimming, no control characters",
        "the `kid` of the signing key; a new one with every new key, never reused",
    ),
    Variable(
        "ANGELOS_OAUTH_VERIFICATION_KEYS_JSON",
        "oauth",
        "none",
        "a JSON object of at most 4 `kid`: `PUBLIC KEY` PEM (P-256) members, at most 32768"
        " bytes; no `kid` equal to `ANGELOS_OAUTH_SIGNING_KEY_ID`",
        "retiring public keys still published for key rotation: publish the next key here"
        " first, switch, then keep the old one here until its tokens (5 minutes) expired",
    ),
    Variable(
        "ANGELOS_OAUTH_CLIENTS_JSON",
        "oauth",
        "none",
        "a strict JSON array (at most 32768 bytes, no names repeated even in other letter case)"
        ' of 1-16 `{"client_id", "client_name", "redirect_uris"}`; required unless the'
        " ChatGPT switch is on. `client_id` 1-512 bytes, unique, not the ChatGPT URL;"
        " `client_name` 1-128 bytes; 1-8 unique `https` redirect URIs on a public DNS name,"
        " port absent or 443, no fragment, userinfo, `%`, dot segments or bare `?`, and no"
        " `code`, `error`, `error_description`, `state` or `iss` in the query",
        "the public clients (PKCE S256, no secret) that may ask the owner for access, e.g."
        ' `[{"client_id":"angelos-claude","client_name":"Claude","redirect_uris":'
        '["https://claude.ai/api/mcp/auth_callback"]}]`; removing one revokes its access',
    ),
    Variable(
        "ANGELOS_OAUTH_CHATGPT_CIMD_ENABLED",
        "oauth",
        "off",
        "`1` is on",
        "accepts ChatGPT by its pinned client-metadata document"
        " (`https://chatgpt.com/oauth/client.json`)",
    ),
    Variable(
        "ANGELOS_OAUTH_BOOTSTRAP_TOKEN_HASH",
        "oauth",
        "unset",
        "64 lower-case hex characters",
        "allows enrolling the owner's first passkey with the token whose SHA-256 this is (from"
        " `angelos oauth bootstrap-token`); remove it after enrollment",
    ),
)
