"""Refresh-token grants against a real token endpoint over TLS: the request, the cache, refusals.

Every refresh is a real HTTPS POST to a token endpoint on loopback, reached through the pinned
host names (the test seam reroutes them) and verified against the test CA. The cache's clock is
the test's, so "an hour later" costs nothing.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from itertools import count

import pytest
import pytest_asyncio

from providers.netsafety import clear_reroutes_for_tests, reroute_for_tests
from providers.oauth2.cache import RefreshingTokens
from providers.oauth2.profiles import (
    GOOGLE_TOKEN_HOST,
    OUTLOOK_IMAP_SCOPE,
    OUTLOOK_SMTP_SCOPE,
    RefreshGrant,
    google_grant,
    microsoft_grant,
)
from providers.oauth2.refresh import GrantRefused
from providers.oauth2.source import AccessToken, TokenSource
from schemas.errors import ServiceUnavailable
from schemas.secret import Secret
from support.clock import Clock
from support.services import Services
from support.token_endpoint import Behaviour, TokenEndpoint, token_endpoint

pytestmark = pytest.mark.services

CLIENT_ID = "1234-test.apps.googleusercontent.com"
CLIENT_SECRET = "GOCSPX-client-secret-value"
REFRESH_TOKEN = "1//refresh-token-value"
MICROSOFT_SCOPE = f"{OUTLOOK_IMAP_SCOPE} {OUTLOOK_SMTP_SCOPE}"
TIMEOUT_S = 5.0
HANG_GUARD_S = 30.0  # only stops a hung test; no assertion is about time


@pytest_asyncio.fixture
async def endpoint(services: Services) -> AsyncIterator[TokenEndpoint]:
    async with token_endpoint(services.dir / "tls", services.ca_file) as server:
        yield server


def google() -> RefreshGrant:
    return google_grant(CLIENT_ID, Secret(CLIENT_SECRET), Secret(REFRESH_TOKEN))


def microsoft(secret: str | None = CLIENT_SECRET) -> RefreshGrant:
    return microsoft_grant(
        "contoso.onmicrosoft.com",
        CLIENT_ID,
        None if secret is None else Secret(secret),
        Secret(REFRESH_TOKEN),
    )


def tokens(grant: RefreshGrant, clock: Clock, timeout_s: float = TIMEOUT_S) -> RefreshingTokens:
    return RefreshingTokens(grant, timeout_s, clock=clock)


async def refused(source: TokenSource) -> ServiceUnavailable:
    with pytest.raises(ServiceUnavailable) as caught:
        async with asyncio.timeout(HANG_GUARD_S):
            await source.token()
    return caught.value


class TestTheRequest:
    async def test_google_gets_the_spec_form_as_json_accepting_without_compression_or_keep_alive(
        self, endpoint: TokenEndpoint, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.DEBUG)
        source: TokenSource = tokens(google(), Clock())
        token = await source.token()
        (seen,) = endpoint.requests
        assert ("POST", "/token") == (seen.method, seen.path)
        assert {
            "grant_type": ["refresh_token"],
            "client_id": [CLIENT_ID],
            "client_secret": [CLIENT_SECRET],
            "refresh_token": [REFRESH_TOKEN],
        } == seen.form
        assert "application/json" == seen.headers["Accept"]
        assert "identity" == seen.headers["Accept-Encoding"]
        assert "application/x-www-form-urlencoded" == seen.headers["Content-Type"]
        assert "close" == seen.headers["Connection"].lower()
        assert "oauth2.googleapis.com" == seen.headers["Host"]
        assert AccessToken(Secret(endpoint.minted[0]), 1, fresh=True) == token
        for value in (CLIENT_SECRET, REFRESH_TOKEN, endpoint.minted[0]):
            assert value not in caplog.text

    async def test_microsoft_names_its_scopes_and_a_public_client_sends_no_secret(
        self, endpoint: TokenEndpoint
    ) -> None:
        endpoint.scope = MICROSOFT_SCOPE
        await tokens(microsoft(secret=None), Clock()).token()
        (seen,) = endpoint.requests
        assert "/contoso.onmicrosoft.com/oauth2/v2.0/token" == seen.path
        assert {
            "grant_type": ["refresh_token"],
            "client_id": [CLIENT_ID],
            "refresh_token": [REFRESH_TOKEN],
            "scope": [f"{MICROSOFT_SCOPE} offline_access"],
        } == seen.form
        assert "login.microsoftonline.com" == seen.headers["Host"]


class TestSingleFlight:
    async def test_twenty_concurrent_callers_share_one_refresh(
        self, endpoint: TokenEndpoint
    ) -> None:
        source = tokens(google(), Clock())
        async with asyncio.timeout(HANG_GUARD_S):
            got = await asyncio.gather(*(source.token() for _ in range(20)))
        assert 1 == endpoint.count
        assert [AccessToken(Secret(endpoint.minted[0]), 1, fresh=True)] * 20 == got

    async def test_a_usable_token_is_handed_out_from_the_cache(
        self, endpoint: TokenEndpoint
    ) -> None:
        source = tokens(google(), Clock())
        first = await source.token()
        again = await source.token()
        assert (1, AccessToken(first.value, 1, fresh=False)) == (endpoint.count, again)

    async def test_a_cancelled_waiter_leaves_the_refresh_running_for_the_others(
        self, endpoint: TokenEndpoint
    ) -> None:
        endpoint.held = True
        source = tokens(google(), Clock())
        async with asyncio.timeout(HANG_GUARD_S):
            waiters = [asyncio.create_task(source.token()) for _ in range(3)]
            await endpoint.arrived.wait()
            waiters[0].cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiters[0]
            endpoint.release()
            rest = await asyncio.gather(*waiters[1:])
        assert 1 == endpoint.count
        assert [AccessToken(Secret(endpoint.minted[0]), 1, fresh=True)] * 2 == rest


class TestRefusals:
    async def test_a_revoked_refresh_token_fails_closed_naming_the_fix_and_changes_nothing(
        self, endpoint: TokenEndpoint, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.DEBUG)
        endpoint.behaviour = Behaviour.REVOKED
        source = tokens(google(), Clock())
        failure = await refused(source)
        assert isinstance(failure, GrantRefused)
        assert "angelos google-auth" in failure.message
        assert "GOOGLE_REFRESH_TOKEN" in failure.message
        for value in (CLIENT_SECRET, REFRESH_TOKEN, "expired or revoked"):
            assert value not in failure.message
            assert value not in caplog.text
        endpoint.behaviour = Behaviour.NORMAL  # the owner fixed it at Google's end
        token = await source.token()
        assert (2, 1) == (endpoint.count, token.generation)  # the failure was not cached
        assert [[REFRESH_TOKEN]] * 2 == [seen.form["refresh_token"] for seen in endpoint.requests]

    async def test_a_revoked_microsoft_grant_names_the_outlook_fix(
        self, endpoint: TokenEndpoint
    ) -> None:
        endpoint.behaviour = Behaviour.REVOKED
        failure = await refused(tokens(microsoft(), Clock()))
        assert isinstance(failure, GrantRefused)
        assert "angelos outlook-auth" in failure.message
        assert "MICROSOFT_REFRESH_TOKEN" in failure.message

    async def test_an_error_member_in_a_200_answer_is_a_refused_grant(
        self, endpoint: TokenEndpoint
    ) -> None:
        endpoint.behaviour = Behaviour.ERROR_MEMBER
        failure = await refused(tokens(google(), Clock()))
        assert isinstance(failure, GrantRefused)
        assert endpoint.minted[0] not in failure.message

    async def test_a_slow_endpoint_fails_within_the_timeout_and_releases_every_waiter(
        self, endpoint: TokenEndpoint
    ) -> None:
        endpoint.held = True  # never answers until the test ends
        source = tokens(google(), Clock(), timeout_s=0.5)
        async with asyncio.timeout(HANG_GUARD_S):
            outcomes = await asyncio.gather(
                *(source.token() for _ in range(5)), return_exceptions=True
            )
        assert 1 == endpoint.count
        assert all(isinstance(outcome, ServiceUnavailable) for outcome in outcomes)
        assert {"the Google token endpoint could not be reached (timed out)"} == {
            str(outcome) for outcome in outcomes
        }

    @pytest.mark.parametrize("behaviour", [Behaviour.OVERSIZED, Behaviour.OVERSIZED_DECLARED])
    async def test_an_oversized_body_is_refused(
        self, endpoint: TokenEndpoint, behaviour: Behaviour
    ) -> None:
        endpoint.behaviour = behaviour
        failure = await refused(tokens(google(), Clock()))
        assert "the Google token endpoint's answer was refused (too-large)" == failure.message

    @pytest.mark.parametrize(
        ("behaviour", "rule"),
        [
            (Behaviour.DUPLICATE_MEMBER, "duplicate-member"),
            (Behaviour.TRAILING_DATA, "trailing-data"),
            (Behaviour.WRONG_TOKEN_TYPE, "token_type"),
            (Behaviour.BAD_ACCESS_TOKEN, "access_token"),
            (Behaviour.FRACTIONAL_LIFETIME, "expires_in"),
            (Behaviour.INSUFFICIENT_SCOPE, "scope"),
            (Behaviour.COMPRESSED, "compressed"),
            (Behaviour.HEADERS_OVER_16_KIB, "headers-too-large"),
            (Behaviour.HEADER_OVER_16_KIB, "malformed-http"),
        ],
    )
    async def test_a_malformed_answer_is_refused_by_rule_and_nothing_is_cached(
        self, endpoint: TokenEndpoint, behaviour: Behaviour, rule: str
    ) -> None:
        endpoint.behaviour = behaviour
        source = tokens(google(), Clock())
        failure = await refused(source)
        assert f"the Google token endpoint's answer was refused ({rule})" == failure.message
        assert not isinstance(failure, GrantRefused)
        endpoint.behaviour = Behaviour.NORMAL
        assert 1 == (await source.token()).generation
        assert 2 == endpoint.count

    async def test_a_server_error_is_reported_by_status(self, endpoint: TokenEndpoint) -> None:
        endpoint.behaviour = Behaviour.SERVER_ERROR
        failure = await refused(tokens(google(), Clock()))
        assert "the Google token endpoint answered HTTP 503" == failure.message

    @pytest.mark.parametrize("behaviour", [Behaviour.REDIRECT, Behaviour.REDIRECT_307])
    async def test_a_redirect_is_not_followed(
        self, endpoint: TokenEndpoint, behaviour: Behaviour
    ) -> None:
        endpoint.behaviour = behaviour
        failure = await refused(tokens(google(), Clock()))
        assert "redirect" in failure.message
        assert (1, []) == (endpoint.count, endpoint.strays)

    async def test_an_endpoint_that_refuses_connections_could_not_be_reached(
        self, services: Services
    ) -> None:
        with socket.socket() as closed:  # bound, never listening: connections are refused
            closed.bind(("127.0.0.1", 0))
            route = {(GOOGLE_TOKEN_HOST, 443): ("127.0.0.1", closed.getsockname()[1])}
            reroute_for_tests(route, str(services.ca_file))
            try:
                failure = await refused(tokens(google(), Clock()))
            finally:
                clear_reroutes_for_tests()
        assert (
            "the Google token endpoint could not be reached (the connection failed)"
            == failure.message
        )


class TestLifetime:
    async def test_the_next_call_after_the_usable_time_refreshes(
        self, endpoint: TokenEndpoint
    ) -> None:
        endpoint.expires_in = 100  # usable for 100 - min(30, 10) = 90 s
        clock = Clock()
        source = tokens(google(), clock)
        first = await source.token()
        clock.now += 89.9
        assert AccessToken(first.value, 1, fresh=False) == await source.token()
        clock.now += 0.1
        second = await source.token()
        assert (2, AccessToken(Secret(endpoint.minted[1]), 2, fresh=True)) == (
            endpoint.count,
            second,
        )

    async def test_invalidating_an_old_generation_keeps_the_newer_token(
        self, endpoint: TokenEndpoint
    ) -> None:
        source = tokens(google(), Clock())
        first = await source.token()
        source.invalidate(first.generation)  # a server refused it
        second = await source.token()
        assert (2, True) == (second.generation, second.fresh)
        source.invalidate(first.generation)  # a slower connection reports the old one late
        assert AccessToken(second.value, 2, fresh=False) == await source.token()
        assert 2 == endpoint.count

    async def test_microsoft_rotation_is_kept_in_memory_for_the_next_refresh(
        self, endpoint: TokenEndpoint
    ) -> None:
        endpoint.scope = MICROSOFT_SCOPE
        numbers = count(1)
        endpoint.returned_refresh_token = lambda: f"rotated-{next(numbers)}"
        source = tokens(microsoft(), Clock())
        for _ in range(3):
            source.invalidate((await source.token()).generation)
        sent = [seen.form["refresh_token"] for seen in endpoint.requests]
        assert [[REFRESH_TOKEN], ["rotated-1"], ["rotated-2"]] == sent

    async def test_google_ignores_a_returned_refresh_token(self, endpoint: TokenEndpoint) -> None:
        endpoint.returned_refresh_token = lambda: "not-to-be-used"
        source = tokens(google(), Clock())
        source.invalidate((await source.token()).generation)
        await source.token()
        sent = [seen.form["refresh_token"] for seen in endpoint.requests]
        assert [[REFRESH_TOKEN]] * 2 == sent

    async def test_a_failed_rotation_keeps_the_newest_token_it_had(
        self, endpoint: TokenEndpoint
    ) -> None:
        endpoint.scope = MICROSOFT_SCOPE
        endpoint.returned_refresh_token = lambda: "rotated-1"
        source = tokens(microsoft(), Clock())
        source.invalidate((await source.token()).generation)
        endpoint.behaviour = Behaviour.SERVER_ERROR
        await refused(source)
        endpoint.behaviour = Behaviour.NORMAL
        await source.token()
        sent = [seen.form["refresh_token"] for seen in endpoint.requests]
        assert [[REFRESH_TOKEN], ["rotated-1"], ["rotated-1"]] == sent
