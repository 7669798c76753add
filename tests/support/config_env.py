"""Environments and assertions shared by the unit tests of the MCP_* configuration."""

from __future__ import annotations

from service.config import Config, load_config

MAILBOX = {"MAIL_USERNAME": "owner@example.com", "MAIL_PASSWORD": "pw", "HOME": "/home/owner"}
EXTERNAL = {
    **MAILBOX,
    "MCP_RESOURCE_URL": "https://mail.example.com/mcp",
    "MCP_OAUTH_ISSUER": "https://login.example.com/",
    "MCP_OAUTH_JWKS_URL": "https://login.example.com/.well-known/jwks.json",
    "MCP_ALLOWED_SUBJECTS": "owner-123",
}


def load(base: dict[str, str], **changes: str | None) -> Config:
    """Load base with some variables changed (a None value removes the variable)."""
    env = dict(base)
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return load_config(env)


def variables(problems: tuple[str, ...]) -> list[str]:
    """Return the variable named by each problem line."""
    return [problem.split(":", 1)[0] for problem in problems]


def assert_rejected(config: Config, variable: str) -> None:
    """The resource server is unusable and a problem names the variable in both problem lists."""
    assert config.http_auth is None
    assert variable in variables(config.http_auth_problems), config.http_auth_problems
    assert set(config.http_auth_problems) <= set(config.problems)
