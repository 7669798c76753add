"""Properties of load_config over arbitrary environments: it never raises and never leaks."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from service.config import Config, check_config_lines, describe, load_config
from service.config.table.variables import VARIABLES

# Values that no generated text will contain by chance; finding one in an output is a leak.
MARKER = "zQ9xLEAKx9Qz"
PROBLEM_LINE = re.compile(r"[A-Z][A-Z0-9_]*: [^\r\n]+")
NAMES = [variable.name for variable in VARIABLES]
INTERESTING = [
    "",
    "1",
    "0",
    "-1",
    "off",
    "test",
    "spacemail",
    "gmail",
    "icloud",
    "yahoo",
    "microsoft",
    "custom",
    "password",
    "app_password",
    "google_oauth2",
    "owner@example.com",
    "localhost",
    "127.0.0.1",
    "[::1]",
    "465",
    "587",
    "tls",
    "starttls",
    "30s",
    "2m",
    "1m30s",
    ".5s",
    "1" + "0" * 5000 + "s",
    "9" * 5000,
    "mail.read",
    "mail.read mail.write mail.send",
    "consumers",
    "provider_managed",
    "after_claim:stop",
    "redis://127.0.0.1:6379/0",
    "rediss://cache.example.com:6380",
    "redis://[::1",
    "https://mail.example.com/mcp",
    "https://login.example.com/",
    "https://login.example.com/jwks",
    "/tmp",
    "relative/dir",
    "a\udc80b",
    "\x00",
    "x\r\ny",
    "ab" * 32,
]
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=40)
VALUES = st.one_of(ANY_TEXT, st.sampled_from(INTERESTING))
BASES = st.sampled_from(
    [
        {},
        {"MAIL_USERNAME": "owner@example.com"},
        {"MAIL_PROVIDER": "custom", "MAIL_USERNAME": "owner", "IMAP_HOST": "localhost"},
        {
            "MAIL_PROVIDER": "gmail",
            "MAIL_AUTH_MODE": "app_password",
            "MAIL_USERNAME": "o@gmail.com",
        },
        {"MAIL_PROVIDER": "microsoft", "MAIL_USERNAME": "o@outlook.com"},
        {
            "MAIL_USERNAME": "owner@example.com",
            "MCP_RESOURCE_URL": "https://mail.example.com/mcp",
            "MCP_OAUTH_ISSUER": "https://login.example.com/",
            "MCP_OAUTH_JWKS_URL": "https://login.example.com/jwks",
            "MCP_ALLOWED_SUBJECTS": "owner-123",
        },
    ]
)


@st.composite
def environments(draw: st.DrawFn) -> dict[str, str]:
    """A plausible base, arbitrary values for known variables, and unrelated noise."""
    env = dict(draw(BASES))
    env.update(draw(st.dictionaries(st.sampled_from(NAMES), VALUES, max_size=8)))
    env.update(draw(st.dictionaries(ANY_TEXT, ANY_TEXT, max_size=3)))
    return env


@st.composite
def secrets(draw: st.DrawFn) -> dict[str, str]:
    """Credential values that carry the marker, in both accepted and rejected shapes."""
    tail = draw(ANY_TEXT)
    token = draw(st.text("abcdefghijklmnopqrstuvwxyz0123456789-._~", max_size=20))
    hex_key = draw(st.text("0123456789abcdef", min_size=64, max_size=64))
    chosen = {
        "MAIL_PASSWORD": MARKER + tail,
        "GOOGLE_CLIENT_SECRET": MARKER + token,
        "GOOGLE_REFRESH_TOKEN": MARKER + token,
        "MICROSOFT_CLIENT_SECRET": MARKER + token,
        "MICROSOFT_REFRESH_TOKEN": MARKER + token,
        "ANGELOS_REDIS_URL": f"redis://user:{MARKER}{token}@127.0.0.1:6379/0",
        "ANGELOS_LEDGER_HMAC_KEY": hex_key,
        "MICROSOFT_TOKEN_ENCRYPTION_KEY": hex_key,
    }
    names = draw(st.sets(st.sampled_from(sorted(chosen)), min_size=1))
    return {name: chosen[name] for name in ["MAIL_PASSWORD", *sorted(names)]}


def outputs(config: Config) -> list[str]:
    """Every text a configuration can show: problems, repr, describe and the report."""
    return [*config.problems, repr(config), repr(describe(config)), *check_config_lines(config)]


@settings(
    max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(env=environments(), secret_values=secrets())
def test_load_config_never_raises_and_never_shows_a_secret(
    env: dict[str, str], secret_values: dict[str, str]
) -> None:
    """Whatever the environment, loading returns a Config whose outputs hold no credential."""
    # A credential that is also the value of a variable shown in clear proves nothing: hypothesis
    # reuses drawn strings, and once drew one 64-hex key for both a secret and a public name.
    shown_in_clear = [text for name, text in env.items() if name not in secret_values]
    assume(not any(value in text for value in secret_values.values() for text in shown_in_clear))
    config = load_config({**env, **secret_values})
    shown = outputs(config)
    for name, value in secret_values.items():
        needle = MARKER if MARKER in value else value
        assert not any(needle in text for text in shown), name


@settings(max_examples=400, deadline=None, database=None)
@given(env=environments())
def test_every_problem_is_one_line_naming_a_variable(env: dict[str, str]) -> None:
    """Each problem is a single "VARIABLE: rule" line; invalid groups are None."""
    config = load_config(env)
    for problem in config.problems:
        assert PROBLEM_LINE.fullmatch(problem), problem
    assert set(config.http_auth_problems) <= set(config.problems)
    if not config.problems:
        assert config.mail is not None
        assert config.store is not None
        assert config.local is not None


@settings(max_examples=200, deadline=None, database=None)
@given(env=st.dictionaries(ANY_TEXT, ANY_TEXT, max_size=10))
def test_arbitrary_mappings_never_raise(env: dict[str, str]) -> None:
    """Unknown keys and arbitrary text (including lone surrogates) are handled."""
    config = load_config(env)
    assert isinstance(config.problems, tuple)
