"""Redirect URIs of native apps (RFC 8252): which may be registered, and the one matching rule
that authorization and token exchange share."""

from __future__ import annotations

import pytest

from service.config._redirect_uris import callback_key, callback_problem, redirect_uri_matches

LOOPBACKS = (
    "http://127.0.0.1/oauth/callback",
    "http://127.0.0.1:6276/oauth/callback",
    "http://[::1]/callback",
    "http://[::1]:33418/",
    "http://localhost/callback",
    "http://localhost:8765/callback?client=fastmcp",
)
PRIVATE = (
    "cursor://anysphere.cursor-retrieval/oauth/callback",
    "vscode://vscode.github-authentication/did-authenticate",
    "com.example.mailapp:/oauth2redirect",
    "com.example.mailapp://callback",
)


@pytest.mark.parametrize("uri", LOOPBACKS + PRIVATE)
def test_a_native_client_may_register_loopback_and_private_use_callbacks(uri: str) -> None:
    assert None is callback_problem(uri, native=True)


@pytest.mark.parametrize("uri", LOOPBACKS + PRIVATE)
def test_a_client_not_native_keeps_the_https_rule(uri: str) -> None:
    assert "must be an https:// URL" == callback_problem(uri, native=False)


@pytest.mark.parametrize(
    ("uri", "rule"),
    [
        ("http://evil.example/cb", "on 127.0.0.1, [::1] or localhost"),
        ("http://127.0.0.2/cb", "on 127.0.0.1, [::1] or localhost"),
        ("http://127.0.0.1.evil.example/cb", "on 127.0.0.1, [::1] or localhost"),
        ("http://127.0.0.1@evil.example/cb", "on 127.0.0.1, [::1] or localhost"),
        ("http://127.0.0.1:80@evil.example/cb", "port must be absent"),
        ("http://127.0.0.1:0080/cb", "port must be absent"),
        ("http://127.0.0.1:70000/cb", "port must be absent"),
        ("http://127.0.0.1:6276", "+ /path"),
        ("http://127.0.0.1/a/../cb", "segments"),
        ("http://127.0.0.1/cb#frag", "fragment"),
        ("http://127.0.0.1/c%62", "percent"),
        ("http://127.0.0.1/cb?state=x", "query must not hold"),
        ("javascript:alert(1)", "must not use the javascript: scheme"),
        ("data:text/html,x", "must not use the data: scheme"),
        ("file:///etc/passwd", "must not use the file: scheme"),
        ("myapp://callback", "must contain a period"),
        ("Com.Example.App:/cb", "lower-case scheme"),
        ("com.example.app:", "must have a path"),
        ("com.example.app://user@host/cb", "no userinfo"),
        ("com.example.app://host:1/cb", "no userinfo"),
        ("com.example.app://a;b/cb", "no userinfo"),
        ("cursor://x/cb?code=1", "query must not hold"),
    ],
)
def test_native_callbacks_off_the_rules_are_refused(uri: str, rule: str) -> None:
    problem = callback_problem(uri, native=True)
    assert problem is not None and rule in problem


@pytest.mark.parametrize(
    ("registered", "presented"),
    [
        ("http://127.0.0.1/oauth/callback", "http://127.0.0.1:51234/oauth/callback"),
        ("http://127.0.0.1:6276/oauth/callback", "http://127.0.0.1:6277/oauth/callback"),
        ("http://127.0.0.1/oauth/callback", "http://127.0.0.1/oauth/callback"),
        ("http://[::1]/cb", "http://[::1]:65535/cb"),
        ("http://localhost/callback?x=1", "http://localhost:9/callback?x=1"),
        ("cursor://anysphere.cursor-retrieval/oauth/callback", PRIVATE[0]),
        ("https://claude.ai/api/mcp/auth_callback", "https://claude.ai/api/mcp/auth_callback"),
    ],
)
def test_a_loopback_callback_matches_any_port_and_others_only_themselves(
    registered: str, presented: str
) -> None:
    assert redirect_uri_matches((registered,), presented)


@pytest.mark.parametrize(
    ("registered", "presented"),
    [
        ("http://127.0.0.1/oauth/callback", "http://127.0.0.1:5000/oauth/callbacks"),
        ("http://127.0.0.1/oauth/callback", "http://127.0.0.1:5000/oauth/callback/"),
        ("http://127.0.0.1/oauth/callback", "http://127.0.0.1:5000/OAUTH/callback"),
        ("http://127.0.0.1/oauth/callback", "http://127.0.0.1:5000/oauth/callback?x=1"),
        ("http://127.0.0.1/oauth/callback", "http://127.0.0.1:5000/oauth/callback#x"),
        ("http://127.0.0.1/oauth/callback", "http://127.0.0.1:5000/oauth/%63allback"),
        ("http://127.0.0.1/oauth/callback", "http://localhost:5000/oauth/callback"),
        ("http://127.0.0.1/oauth/callback", "http://[::1]:5000/oauth/callback"),
        ("http://127.0.0.1/oauth/callback", "http://127.0.0.1:5000@evil.example/oauth/callback"),
        ("http://127.0.0.1/oauth/callback", "http://127.0.0.1:05000/oauth/callback"),
        ("http://127.0.0.1/oauth/callback", "http://127.0.0.1:65536/oauth/callback"),
        ("http://127.0.0.1/oauth/callback", "https://127.0.0.1:5000/oauth/callback"),
        ("http://127.0.0.1/oauth/callback", "http://127.0.0.1.evil.example/oauth/callback"),
        ("cursor://anysphere.cursor-retrieval/oauth/callback", "cursor://evil/oauth/callback"),
        ("https://claude.ai/api/mcp/auth_callback", "https://claude.ai:8443/api/mcp/auth_callback"),
        ("https://claude.ai/api/mcp/auth_callback", "http://claude.ai/api/mcp/auth_callback"),
    ],
)
def test_everything_else_is_no_match(registered: str, presented: str) -> None:
    assert not redirect_uri_matches((registered,), presented)


def test_loopback_callbacks_differing_only_in_port_are_one_callback() -> None:
    assert callback_key("http://127.0.0.1:1/cb") == callback_key("http://127.0.0.1/cb")
    assert callback_key("http://localhost/cb") != callback_key("http://127.0.0.1/cb")
