"""The owner's browser endpoints over plain HTTP: sessions, the POST guard, bootstrap rules.

No browser is needed for these: an aiohttp client with its own cookie jar stands in for one,
against the real server (TLS on loopback) and the real store in the test Redis.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from http.cookies import SimpleCookie

import pytest

from schemas.secret import Secret
from service.auth.server.store.records import Credential
from support.first_party import (
    Answer,
    FirstPartyServer,
    HttpOwner,
    csrf_of,
    first_party,
    pkce_pair,
)
from support.services import Services

pytestmark = pytest.mark.services
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)
BEGIN = "/oauth/passkeys/register/begin"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


async def login_page(owner: HttpOwner) -> str:
    """Open the sign-in page (creating a session) and return its CSRF value."""
    page = await owner.get("/oauth/login")
    assert 200 == page.status
    return csrf_of(page.text)


async def enrol_directly(server: FirstPartyServer) -> None:
    """Put the store in the state a finished enrolment leaves (owner + marker)."""
    passkey = Credential(
        credential_id=b64(secrets.token_bytes(16)), public_key="AQID", sign_count=0
    )
    assert await server.store.owner.complete_bootstrap(Secret(server.bootstrap_token), passkey)


def cookie_attributes(answer: Answer) -> dict[str, object]:
    [header] = answer.headers.getall("Set-Cookie")
    morsel = SimpleCookie(header)["__Host-angelos"]
    return {
        "secure": bool(morsel["secure"]),
        "httponly": bool(morsel["httponly"]),
        "samesite": morsel["samesite"],
        "path": morsel["path"],
        "domain": morsel["domain"],
        "value prefix": morsel.value[:3],
    }


async def test_an_anonymous_browser_gets_the_sign_in_page_at_the_authorize_url(
    services: Services,
) -> None:
    async with first_party(services) as server, server.http() as owner:
        _, challenge = pkce_pair()

        answer = await owner.get(server.authorize_url(challenge=challenge))

        assert 200 == answer.status
        assert "Set up Angelos" in answer.text and 'id="bootstrap-token"' in answer.text
        assert {
            "secure": True,
            "httponly": True,
            "samesite": "Lax",
            "path": "/",
            "domain": "",
            "value prefix": "v1.",  # a sealed visitor cookie: nothing is stored for it
        } == cookie_attributes(answer)
        prefix = server.store.core.keys.prefix
        assert [] == [key async for key in server.store.core.client.scan_iter(f"{prefix}*")]


async def test_a_rendered_page_carries_the_page_policy_headers(services: Services) -> None:
    async with first_party(services) as server, server.http() as owner:
        answer = await owner.get("/oauth/login")

        assert (
            PAGE_CSP,
            "publickey-credentials-get=(self), publickey-credentials-create=(self)",
            "same-origin",
            "no-store",
            "DENY",
        ) == (
            answer.headers["Content-Security-Policy"],
            answer.headers["Permissions-Policy"],
            answer.headers["Referrer-Policy"],
            answer.headers["Cache-Control"],
            answer.headers["X-Frame-Options"],
        )


async def test_the_script_and_style_sheet_are_served_same_origin(services: Services) -> None:
    async with first_party(services) as server, server.http() as owner:
        script = await owner.get("/oauth/assets/app.js")
        style = await owner.get("/oauth/assets/app.css")
        other = await owner.get("/oauth/assets/other.js")

        assert (200, "text/javascript") == (
            script.status,
            script.headers["Content-Type"].split(";")[0],
        )
        assert (200, "text/css") == (style.status, style.headers["Content-Type"].split(";")[0])
        assert "navigator.credentials.create" in script.text
        assert 404 == other.status


@pytest.mark.parametrize(
    ("origin", "extra"),
    [
        (None, {}),
        ("https://evil.example.com", {}),
        ("null", {}),
        ("", {"Sec-Fetch-Site": "cross-site"}),
        ("", {"Sec-Fetch-Site": "same-site"}),
    ],
    ids=["missing", "foreign", "null", "cross-site", "same-site"],
)
async def test_a_post_from_elsewhere_is_forbidden(
    services: Services, origin: str | None, extra: dict[str, str]
) -> None:
    async with first_party(services) as server, server.http() as owner:
        csrf = await login_page(owner)

        answer = await owner.post_form("/oauth/logout", [("csrf", csrf)], origin=origin, **extra)

        assert 403 == answer.status
        assert 200 == (await owner.get("/oauth/login")).status  # the session is still there


async def test_a_post_with_two_origin_headers_is_forbidden(services: Services) -> None:
    async with first_party(services) as server, server.http() as owner:
        csrf = await login_page(owner)
        headers = [("Origin", server.issuer), ("Origin", server.issuer)]
        async with owner.session.post(
            f"{server.issuer}/oauth/logout",
            data=f"csrf={csrf}",
            headers=[("Content-Type", "application/x-www-form-urlencoded"), *headers],
            allow_redirects=False,
        ) as response:
            assert 403 == response.status


@pytest.mark.parametrize(
    "fields", [[], [("csrf", "x" * 43)], [("csrf", "")]], ids=["missing", "wrong", "empty"]
)
async def test_a_form_post_without_the_session_csrf_value_is_forbidden(
    services: Services, fields: list[tuple[str, str]]
) -> None:
    async with first_party(services) as server, server.http() as owner:
        await login_page(owner)

        answer = await owner.post_form("/oauth/logout", fields)

        assert 403 == answer.status


async def test_a_json_post_without_the_csrf_header_is_forbidden(services: Services) -> None:
    async with first_party(services) as server, server.http() as owner:
        await login_page(owner)

        missing = await owner.post_json(BEGIN, {"bootstrap_token": server.bootstrap_token}, None)
        wrong = await owner.post_json(BEGIN, {"bootstrap_token": server.bootstrap_token}, "A" * 43)

        assert (403, {"error": "bad_csrf"}) == (missing.status, missing.json())
        assert (403, {"error": "bad_csrf"}) == (wrong.status, wrong.json())


async def test_the_same_session_with_the_same_origin_and_csrf_logs_out(services: Services) -> None:
    async with first_party(services) as server, server.http() as owner:
        csrf = await login_page(owner)
        cookie = owner.cookie()

        answer = await owner.post_form(
            "/oauth/logout", [("csrf", csrf)], **{"Sec-Fetch-Site": "same-origin"}
        )

        assert (303, "/oauth/login") == (answer.status, answer.headers["Location"])
        assert None is owner.cookie()
        assert cookie is not None and None is await server.store.sessions.load(cookie)


async def test_a_json_endpoint_refuses_another_content_type(services: Services) -> None:
    async with first_party(services) as server, server.http() as owner:
        csrf = await login_page(owner)

        answer = await owner.request(
            "POST",
            BEGIN,
            data='{"bootstrap_token": "x"}',
            headers={"Content-Type": "text/plain", "X-CSRF-Token": csrf},
            origin="",
        )

        assert (415, {"error": "unsupported_media_type"}) == (answer.status, answer.json())


@pytest.mark.parametrize(
    "body",
    [
        '{"bootstrap_token": "a", "extra": 1}',
        '{"bootstrap_token": "a", "bootstrap_token": "b"}',
        '{"bootstrap_token": 5}',
        "[]",
        '{"bootstrap_token": "a"} x',
    ],
    ids=["unknown member", "repeated member", "wrong type", "not an object", "trailing data"],
)
async def test_a_json_endpoint_refuses_a_body_that_is_not_strictly_its_shape(
    services: Services, body: str
) -> None:
    async with first_party(services) as server, server.http() as owner:
        csrf = await login_page(owner)

        answer = await owner.request(
            "POST",
            BEGIN,
            data=body,
            headers={"Content-Type": "application/json", "X-CSRF-Token": csrf},
            origin="",
        )

        assert (400, {"error": "malformed_request"}) == (answer.status, answer.json())


async def test_a_body_over_64_kib_is_refused(services: Services) -> None:
    async with first_party(services) as server, server.http() as owner:
        csrf = await login_page(owner)

        answer = await owner.post_json(BEGIN, {"bootstrap_token": "a" * (64 * 1024)}, csrf)

        assert 413 == answer.status


async def test_enrolment_with_a_wrong_bootstrap_token_is_forbidden(services: Services) -> None:
    async with first_party(services) as server, server.http() as owner:
        csrf = await login_page(owner)
        wrong = b64(secrets.token_bytes(32))

        answer = await owner.post_json(BEGIN, {"bootstrap_token": wrong}, csrf)

        assert (403, {"error": "bootstrap_refused"}) == (answer.status, answer.json())


async def test_enrolment_with_a_token_of_fewer_than_32_bytes_is_forbidden_even_when_it_hashes_right(
    services: Services,
) -> None:
    short = b64(secrets.token_bytes(31))
    async with first_party(services, bootstrap_token=short) as server, server.http() as owner:
        csrf = await login_page(owner)

        answer = await owner.post_json(BEGIN, {"bootstrap_token": short}, csrf)

        assert (403, {"error": "bootstrap_refused"}) == (answer.status, answer.json())


async def test_enrolment_begins_with_the_right_token_and_the_relying_party_rules(
    services: Services,
) -> None:
    async with first_party(services) as server, server.http() as owner:
        csrf = await login_page(owner)

        answer = await owner.post_json(BEGIN, {"bootstrap_token": server.bootstrap_token}, csrf)

        assert 200 == answer.status
        options = answer.json()
        handle = hashlib.sha256(f"angelos:owner:{server.config.owner}".encode()).digest()
        assert {"id": "localhost", "name": "Angelos"} == options["rp"]
        assert (b64(handle), "Angelos mailbox owner") == (
            options["user"]["id"],
            options["user"]["displayName"],
        )
        assert {
            "residentKey": "preferred",
            "requireResidentKey": False,
            "userVerification": "required",
        } == options["authenticatorSelection"]
        assert ("none", 300000, 43) == (
            options["attestation"],
            options["timeout"],
            len(options["challenge"]),
        )


async def test_after_enrolment_an_anonymous_session_cannot_register_even_with_the_token(
    services: Services,
) -> None:
    async with first_party(services) as server, server.http() as owner:
        await enrol_directly(server)
        csrf = await login_page(owner)

        with_token = await owner.post_json(BEGIN, {"bootstrap_token": server.bootstrap_token}, csrf)
        without = await owner.post_json(BEGIN, {}, csrf)

        assert (401, {"error": "sign_in_required"}) == (with_token.status, with_token.json())
        assert (401, {"error": "sign_in_required"}) == (without.status, without.json())


async def test_after_enrolment_the_login_page_offers_sign_in(services: Services) -> None:
    async with first_party(services) as server, server.http() as owner:
        await enrol_directly(server)

        page = await owner.get("/oauth/login")

        assert 'id="sign-in-button"' in page.text and "bootstrap-token" not in page.text


async def test_passkey_begins_beyond_twenty_a_minute_are_rate_limited(services: Services) -> None:
    async with first_party(services) as server, server.http() as owner:
        csrf = await login_page(owner)
        statuses = [
            (await owner.post_json(BEGIN, {"bootstrap_token": "x"}, csrf)).status for _ in range(20)
        ]

        limited = await owner.post_json(BEGIN, {"bootstrap_token": "x"}, csrf)

        assert [403] * 20 == statuses
        assert (429, "60") == (limited.status, limited.headers["Retry-After"])


async def test_consent_and_grants_send_an_anonymous_session_to_sign_in(services: Services) -> None:
    async with first_party(services) as server, server.http() as owner:
        csrf = await login_page(owner)

        consent = await owner.get("/oauth/consent?request=" + "A" * 43)
        grants = await owner.get("/oauth/grants")
        decided = await owner.post_form(
            "/oauth/consent", [("csrf", csrf), ("request", "A" * 43), ("decision", "approve")]
        )

        assert (303, "/oauth/login") == (consent.status, consent.headers["Location"])
        assert (303, "/oauth/login") == (grants.status, grants.headers["Location"])
        assert 403 == decided.status


async def test_without_a_store_pages_and_passkey_endpoints_answer_503(services: Services) -> None:
    async with first_party(services) as server, server.http() as owner:
        csrf = await login_page(owner)
        server.store_up = False

        page = await owner.get("/oauth/login")
        begin = await owner.post_json(BEGIN, {"bootstrap_token": server.bootstrap_token}, csrf)

        assert (503, "text/html") == (page.status, page.headers["Content-Type"].split(";")[0])
        assert (503, {"error": "unavailable"}) == (begin.status, begin.json())


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("POST", "/oauth/login", "GET"),
        ("PUT", "/oauth/consent", "GET, POST"),
        ("GET", "/oauth/logout", "POST"),
        ("GET", "/oauth/passkeys/login/begin", "POST"),
        ("DELETE", "/oauth/assets/app.js", "GET"),
    ],
)
async def test_another_method_gets_405_with_allow(
    services: Services, method: str, path: str, allow: str
) -> None:
    async with first_party(services) as server, server.http() as owner:
        answer = await owner.request(method, path)

        assert (405, allow, {"error": "invalid_request"}) == (
            answer.status,
            answer.headers["Allow"],
            answer.json(),
        )
