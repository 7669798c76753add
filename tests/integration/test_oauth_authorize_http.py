"""/oauth/authorize over HTTP: the raw query decoded once, `state` optional and echoed exactly,
and a refusal that cannot go back to the client shown to the owner as a page naming the check.

The requests are sent with their query exactly as written here (yarl told not to requote), to
the real server on loopback TLS with the store in the test Redis.
"""

from __future__ import annotations

from urllib.parse import parse_qs, quote, urlencode, urlsplit

import pytest
import structlog
from yarl import URL

from support.first_party import (
    CALLBACK,
    CLIENT_ID,
    Answer,
    FirstPartyServer,
    first_party,
    pkce_pair,
)
from support.services import Services

pytestmark = pytest.mark.services
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)


def good(server: FirstPartyServer) -> dict[str, str]:
    _, challenge = pkce_pair()
    return {
        "response_type": "code",
        "client_id": CLIENT_ID,
        "redirect_uri": CALLBACK,
        "scope": "mail.read",
        "state": "state-1",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": server.config.resource,
    }


async def authorize(server: FirstPartyServer, query: str) -> Answer:
    """GET /oauth/authorize with exactly this raw query, as a browser without a cookie."""
    url = URL(f"{server.issuer}/oauth/authorize?{query}", encoded=True)
    async with (
        server.http() as owner,
        owner.session.get(url, allow_redirects=False) as response,
    ):
        return Answer(response.status, response.headers, await response.text())


@pytest.mark.parametrize(
    ("change", "rule", "error"),
    [
        ({"client_id": "<b>unknown</b>"}, "unknown_client", "invalid_client"),
        ({"client_id": ""}, "client_id_missing", "invalid_client"),
        (
            {"redirect_uri": "https://attacker.example/<cb>"},
            "redirect_uri_not_registered",
            "invalid_client",
        ),
        (
            {"redirect_uri": quote(CALLBACK, safe="")},
            "redirect_uri_not_registered",
            "invalid_client",
        ),
        ({"redirect_uri": ""}, "redirect_uri_missing", "invalid_client"),
        ({"nonce": "%FF"}, "query_not_utf8", "invalid_request"),
    ],
    ids=["client", "no-client", "callback", "double-encoded", "no-callback", "not-utf8"],
)
async def test_an_unredirectable_refusal_is_a_page_naming_the_check_and_a_log_line(
    services: Services, change: dict[str, str], rule: str, error: str
) -> None:
    async with first_party(services) as server:
        fields = {**good(server), **change}
        query = urlencode(fields).replace("%25FF", "%FF")  # the one raw byte that is not UTF-8
        with structlog.testing.capture_logs() as logs:
            answer = await authorize(server, query)
    assert (400, None) == (answer.status, answer.headers.get("Location"))
    assert answer.headers["Content-Type"].startswith("text/html")
    assert PAGE_CSP == answer.headers["Content-Security-Policy"]
    assert f'<code id="rule">{rule}</code>' in answer.text
    assert "<b>" not in answer.text and "<cb>" not in answer.text and "attacker" not in answer.text
    refused = [entry for entry in logs if entry["event"] == "authorize_refused"]
    expected = {"event": "authorize_refused", "rule": rule, "error": error, "log_level": "warning"}
    assert [expected] == refused  # the check's name, none of the query's values
    assert all(CALLBACK not in str(entry) and "attacker" not in str(entry) for entry in logs)


async def test_a_repeated_parameter_is_a_page_naming_the_check(services: Services) -> None:
    async with first_party(services) as server:
        with structlog.testing.capture_logs() as logs:
            answer = await authorize(server, urlencode(good(server)) + "&state=again")
    assert 400 == answer.status and '<code id="rule">repeated_parameter</code>' in answer.text
    assert [("repeated_parameter", "invalid_request")] == [
        (entry["rule"], entry["error"]) for entry in logs if entry["event"] == "authorize_refused"
    ]


async def test_a_state_comes_back_byte_for_byte_in_a_redirected_error(services: Services) -> None:
    async with first_party(services) as server:
        fields = {**good(server), "state": "x%41", "response_type": "token"}
        query = urlencode(fields)
        assert "state=x%2541" in query  # sent encoded once: its value is the five characters
        answer = await authorize(server, query)
    location = urlsplit(answer.headers["Location"])
    assert (303, CALLBACK) == (
        answer.status,
        f"{location.scheme}://{location.netloc}{location.path}",
    )
    assert ["x%41"] == parse_qs(location.query)["state"]


async def test_a_redirected_refusal_is_logged_at_info_with_its_rule(services: Services) -> None:
    async with first_party(services) as server:
        fields = {**good(server), "response_type": "token"}
        with structlog.testing.capture_logs() as logs:
            answer = await authorize(server, urlencode(fields))
    assert 303 == answer.status
    refused = [entry for entry in logs if entry["event"] == "authorize_refused"]
    assert 1 == len(refused)
    assert (True, "info", "unsupported_response_type") == (
        refused[0]["redirected"],
        refused[0]["log_level"],
        refused[0]["error"],
    )
    assert all(CALLBACK not in str(entry) for entry in logs)  # never the callback or the state


async def test_a_request_without_state_is_served_and_its_errors_carry_no_state(
    services: Services,
) -> None:
    async with first_party(services) as server:
        fields = {k: v for k, v in good(server).items() if k != "state"}
        served = await authorize(server, urlencode(fields))
        refused = await authorize(server, urlencode({**fields, "response_type": "token"}))
    assert 200 == served.status and 'id="bootstrap-token"' in served.text
    location = urlsplit(refused.headers["Location"])
    assert {"error": ["unsupported_response_type"], "iss": [server.issuer]} == parse_qs(
        location.query
    )
