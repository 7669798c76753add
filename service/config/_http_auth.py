"""The MCP_* group (the HTTP resource-server settings) and the stdio principal."""

from __future__ import annotations

from collections.abc import Mapping

from schemas.scopes import Scope
from service.config._first_party import first_party_enabled
from service.config._model import Gates, HttpAuthConfig, LocalPrincipal
from service.config._urls import HttpsUrl, parse_public_https_url
from service.config._values import has_control, utf8_size, value_of
from service.config.table.variables import VARIABLES, read

_LEGACY_FIRST_PARTY_HOST = "api.angelos.ashray.xyz"
_MAX_SUBJECTS = 32
_MAX_SUBJECT_BYTES = 512
_GROUP = tuple(v.name for v in VARIABLES if v.name.startswith("MCP_"))
_PRIVATE_HINT = (
    " (MCP_OAUTH_ALLOW_PRIVATE_HOSTS=1 lifts this, for tests and self-hosted issuers only)"
)


def load_http_auth(
    env: Mapping[str, str], gates: Gates
) -> tuple[HttpAuthConfig | None, tuple[str, ...]]:
    """Validate the resource-server group; entirely absent, it is not configured (unless needed).

    First-party mode needs the group, and there a root issuer on the resource's host is expected.
    """
    problems: list[str] = []
    first_party = first_party_enabled(env)
    if not first_party and all(value_of(env, name) is None for name in _GROUP):
        return None, ()  # first-party mode needs the group, so its absence is reported there

    private: bool = read(env, "MCP_OAUTH_ALLOW_PRIVATE_HOSTS", problems)
    resource_raw, resource = _url(env, "MCP_RESOURCE_URL", private, problems)
    issuer_raw, issuer = _url(env, "MCP_OAUTH_ISSUER", private, problems)
    jwks_raw, jwks = _url(env, "MCP_OAUTH_JWKS_URL", private, problems)
    if resource is not None and resource.path != "/mcp":
        problems.append("MCP_RESOURCE_URL: path must be exactly /mcp")
    if issuer is not None and jwks is not None and _authority(issuer) != _authority(jwks):
        problems.append("MCP_OAUTH_JWKS_URL: must be on the same host and port as MCP_OAUTH_ISSUER")
    if issuer is not None and not first_party:
        _identity_guards(issuer, resource, problems)
    subjects = _subjects(env, problems)
    scopes = _initial_scopes(env, gates, problems)
    ca_file = read(env, "MCP_OAUTH_CA_FILE", problems)

    if problems or subjects is None or scopes is None:
        return None, tuple(problems)
    return (
        HttpAuthConfig(
            resource_url=resource_raw,
            issuer=issuer_raw,
            jwks_url=jwks_raw,
            allowed_subjects=subjects,
            initial_scopes=scopes,
            ca_file=ca_file,
            allow_private_hosts=private,
        ),
        (),
    )


def _url(
    env: Mapping[str, str], name: str, private: bool, problems: list[str]
) -> tuple[str, HttpsUrl | None]:
    raw = value_of(env, name) or ""
    parsed, rule = parse_public_https_url(raw, allow_private_hosts=private)
    if parsed is None:
        lifted, _ = parse_public_https_url(raw, allow_private_hosts=True)
        hint = _PRIVATE_HINT if not private and lifted is not None else ""
        problems.append(f"{name}: {rule}{hint}")
    return raw, parsed


def _authority(url: HttpsUrl) -> tuple[str, int]:
    return url.host, url.port


def _identity_guards(issuer: HttpsUrl, resource: HttpsUrl | None, problems: list[str]) -> None:
    root = issuer.path in ("", "/")
    if root and issuer.host == _LEGACY_FIRST_PARTY_HOST:
        problems.append("MCP_OAUTH_ISSUER: the legacy first-party origin is not an external issuer")
    elif root and resource is not None and _authority(issuer) == _authority(resource):
        problems.append(
            "MCP_OAUTH_ISSUER: a root issuer on the MCP_RESOURCE_URL host and port needs"
            " first-party mode (ANGELOS_OAUTH_ENABLED=1)"
        )


def _subjects(env: Mapping[str, str], problems: list[str]) -> tuple[str, ...] | None:
    raw = value_of(env, "MCP_ALLOWED_SUBJECTS")
    if raw is None:
        problems.append("MCP_ALLOWED_SUBJECTS: required")
        return None
    if has_control(raw):
        problems.append("MCP_ALLOWED_SUBJECTS: must not contain control characters")
        return None
    subjects = tuple(item for item in (part.strip() for part in raw.split(",")) if item)
    if not 1 <= len(subjects) <= _MAX_SUBJECTS:
        problems.append(f"MCP_ALLOWED_SUBJECTS: must list 1 to {_MAX_SUBJECTS} subjects")
        return None
    if any(utf8_size(subject) > _MAX_SUBJECT_BYTES for subject in subjects):
        problems.append(
            f"MCP_ALLOWED_SUBJECTS: each subject must be at most {_MAX_SUBJECT_BYTES} bytes"
        )
        return None
    return subjects


def _initial_scopes(
    env: Mapping[str, str], gates: Gates, problems: list[str]
) -> tuple[Scope, ...] | None:
    scopes: tuple[Scope, ...] | None = read(env, "MCP_OAUTH_INITIAL_SCOPES", problems)
    if scopes is None:
        return None
    # A first challenge never asks for a scope whose gate is off: consent would be useless.
    enabled: dict[Scope, bool] = {
        "mail.read": True,
        "mail.write": gates.writes,
        "mail.send": gates.send,
    }
    return tuple(scope for scope in scopes if enabled[scope])


def load_local(env: Mapping[str, str]) -> tuple[LocalPrincipal | None, tuple[str, ...]]:
    """Validate ANGELOS_LOCAL_OWNER and ANGELOS_LOCAL_SCOPES, the stdio principal."""
    problems: list[str] = []
    owner: str | None = read(env, "ANGELOS_LOCAL_OWNER", problems)
    scopes: tuple[Scope, ...] | None = read(env, "ANGELOS_LOCAL_SCOPES", problems)
    if problems or owner is None or scopes is None:
        return None, tuple(problems)
    return LocalPrincipal(owner=owner, scopes=scopes), ()
