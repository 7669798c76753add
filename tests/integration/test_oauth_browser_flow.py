"""The owner's browser flow in headless Chromium with a virtual passkey authenticator.

Enrolment with the bootstrap token, sign-in with user verification, consent, the grants page
and logout, against the real server and store. The client's callback
(https://client.example.com/callback) is never dialled: the page's DevTools session intercepts
requests to that origin (Fetch domain, request stage) and answers them from the browser
itself, recording each URL, so the test reads the code, iss and state the 303 carried.

Set ANGELOS_SCREENSHOT_DIR to keep the consent and grants screenshots there (docs/images was
made that way).
"""

from __future__ import annotations

import base64
import json
import os
import struct
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import structlog

from support.browser import Page, browser
from support.first_party import (
    CALLBACK,
    CLIENT_ID,
    CLIENT_NAME,
    FirstPartyServer,
    first_party,
    pkce_pair,
)
from support.services import Services

pytestmark = pytest.mark.services
STATUS = "(document.getElementById('status')?.textContent ?? '')"
UV_FLAG = 0x04  # authenticator data flags, bit 2: user verified

# A tampered page: the server's options are followed except that user verification is only
# "discouraged", so an authenticator whose user is not verified still answers; what comes back
# is posted as the real page would post it.
UNVERIFIED_SIGN_IN = """(async () => {
  const csrf = document.querySelector('meta[name="angelos-csrf"]').content;
  const post = async (path, body) => {
    const r = await fetch(path, {method: "POST", body: JSON.stringify(body),
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf}});
    return [r.status, await r.json()];
  };
  const [, options] = await post("/oauth/passkeys/login/begin", {});
  options.userVerification = "discouraged";
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options);
  const credential = await navigator.credentials.get({publicKey});
  const flags = new Uint8Array(credential.response.authenticatorData)[32];
  const json = credential.toJSON();
  const [status, body] = await post("/oauth/passkeys/login/finish", {credential: {
    id: json.id, rawId: json.rawId, type: json.type,
    response: {clientDataJSON: json.response.clientDataJSON,
      authenticatorData: json.response.authenticatorData,
      signature: json.response.signature, userHandle: json.response.userHandle ?? null}}});
  return {flags, status, body};
})()"""

UNVERIFIED_ENROLMENT = """(async () => {
  const csrf = document.querySelector('meta[name="angelos-csrf"]').content;
  const token = %s;
  const post = async (path, body) => {
    const r = await fetch(path, {method: "POST", body: JSON.stringify(body),
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf}});
    return [r.status, await r.json()];
  };
  const [, options] = await post("/oauth/passkeys/register/begin", {bootstrap_token: token});
  // A discoverable credential would make the authenticator verify the user anyway.
  options.authenticatorSelection = {residentKey: "discouraged", userVerification: "discouraged"};
  const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(options);
  const credential = await navigator.credentials.create({publicKey});
  const json = credential.toJSON();
  const data = new Uint8Array(credential.response.getAuthenticatorData());
  const [status, body] = await post("/oauth/passkeys/register/finish", {bootstrap_token: token,
    credential: {id: json.id, rawId: json.rawId, type: json.type,
      response: {clientDataJSON: json.response.clientDataJSON,
        attestationObject: json.response.attestationObject,
        transports: json.response.transports ?? []}}});
  return {flags: data[32], status, body};
})()"""


async def settle(page: Page, ready_js: str) -> None:
    """Wait until `ready_js` holds on the page, failing early with the page's status line."""
    found = await page.wait_for(
        f"({ready_js}) ? 'ready' : ({STATUS}).startsWith('failed') && {STATUS}"
    )
    assert "ready" == found


async def enrol_and_sign_in(server: FirstPartyServer, page: Page, challenge: str) -> None:
    """From the authorize URL: enrol the first passkey, sign in with it, reach consent."""
    await page.goto(server.authorize_url(challenge=challenge))
    await page.fill("#bootstrap-token", server.bootstrap_token)
    async with page.navigation():  # the page reloads the authorize URL once enrolled
        await page.click("#enrol-button")
    await settle(page, "document.getElementById('sign-in-button')")
    async with page.navigation():  # signed in, it goes on to the pending consent
        await page.click("#sign-in-button")
    await settle(page, "document.getElementById('approve')")


async def decide(page: Page, button: str) -> dict[str, list[str]]:
    """Press Allow or Deny and return the query the browser was sent to the callback with."""
    # Only the callback itself: the page it shows may also ask for /favicon.ico, which then
    # fails at name resolution like every other foreign name.
    seen = await page.answer_locally(f"{CALLBACK}?*", "<p>client callback</p>")
    async with page.navigation():
        await page.click(button)
    [url] = seen
    parts = urlsplit(url)
    assert CALLBACK == f"{parts.scheme}://{parts.netloc}{parts.path}"
    assert url == await page.current_url()
    return parse_qs(parts.query)


def claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return decoded


async def keep_screenshot(page: Page, name: str, tmp_path: Path) -> None:
    """Take a screenshot (kept in ANGELOS_SCREENSHOT_DIR when set) and check it is a PNG."""
    folder = Path(os.environ.get("ANGELOS_SCREENSHOT_DIR") or tmp_path)
    shot = folder / name
    await page.screenshot(shot)
    data = shot.read_bytes()
    assert (b"\x89PNG\r\n\x1a\n", 1024) == (data[:8], struct.unpack(">I", data[16:20])[0])


async def test_an_approved_request_sends_a_code_that_redeems_for_a_token(
    services: Services, tmp_path: Path
) -> None:
    tls = services.dir / "tls"
    async with first_party(services) as server, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        verifier, challenge = pkce_pair()
        await enrol_and_sign_in(server, page, challenge)
        shown = await page.evaluate("document.querySelector('main').innerText")
        assert (
            CLIENT_NAME in shown and services.mail_from in shown and "client.example.com" in shown
        )
        await keep_screenshot(page, "consent.png", tmp_path)

        query = await decide(page, "#approve")

        assert ([server.issuer], ["state-1"]) == (query["iss"], query["state"])
        answer = await server.exchange_code(query["code"][0], verifier)
        assert 200 == answer.status, answer.text
        token = answer.json()
        assert ("Bearer", "mail.read mail.send") == (token["token_type"], token["scope"])
        assert (server.config.owner, CLIENT_ID) == (
            claims(token["access_token"])["sub"],
            claims(token["access_token"])["client_id"],
        )


async def test_state_is_optional_and_comes_back_exactly_as_sent(services: Services) -> None:
    tls = services.dir / "tls"
    async with first_party(services) as server, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        verifier, challenge = pkce_pair()
        await enrol_and_sign_in(server, page, challenge)  # with state-1; that consent is left
        without = server.authorize_url(challenge=challenge).replace("&state=state-1", "")
        sent = "x%41 &=é"  # percent-decoded twice, the server used to answer "xA &=é"
        answers = []
        for url in (without, server.authorize_url(state=sent, challenge=challenge)):
            await page.goto(url)  # signed in: straight on to consent
            await settle(page, "document.getElementById('approve')")
            answers.append(await decide(page, "#approve"))
        assert ({"code", "iss"}, [sent]) == (set(answers[0]), answers[1]["state"])
        assert 200 == (await server.exchange_code(answers[0]["code"][0], verifier)).status


# Consent form posts from the consent page itself (so Origin and the cookie are the browser's).
POST_CONSENT = """(async (fields) => {
  const csrf = document.querySelector('input[name="csrf"]').value;
  const request = document.querySelector('input[name="request"]').value;
  const body = new URLSearchParams([["csrf", csrf], ["request", request], ...fields]);
  const r = await fetch("/oauth/consent", {method: "POST", body, redirect: "manual"});
  return r.type === "opaqueredirect" ? "redirect" : r.status;
})(%s)"""


async def test_consent_posts_must_be_well_formed_and_cannot_issue_twice(
    services: Services,
) -> None:
    tls = services.dir / "tls"
    async with first_party(services) as server, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        _, challenge = pkce_pair()
        await enrol_and_sign_in(server, page, challenge)
        approve, read = ["decision", "approve"], ["scope", "mail.read"]
        cases = {
            "unrequested scope": [approve, read, ["scope", "mail.write"]],
            "no mail.read": [approve, ["scope", "mail.send"]],
            "repeated scope": [approve, read, read],
            "two decisions": [approve, approve, read],
            "unknown decision": [["decision", "maybe"], read],
            "unknown field": [approve, read, ["extra", "1"]],
        }
        refused = {
            name: await page.evaluate(POST_CONSENT % json.dumps(fields))
            for name, fields in cases.items()
        }

        first = await page.evaluate(POST_CONSENT % json.dumps([approve, read]))
        second = await page.evaluate(POST_CONSENT % json.dumps([approve, read]))

        assert {name: 400 for name in cases} == refused
        assert ("redirect", 400) == (first, second)
        assert 1 == len(await server.store.grants.list_active())


async def test_sign_in_replaces_the_anonymous_session_with_a_signed_in_one(
    services: Services,
) -> None:
    tls = services.dir / "tls"
    async with first_party(services) as server, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        _, challenge = pkce_pair()
        await page.goto(server.authorize_url(challenge=challenge))
        [before] = [c.value for c in await page.cookies() if c.name == "__Host-angelos"]

        await enrol_and_sign_in(server, page, challenge)

        [after] = [c.value for c in await page.cookies() if c.name == "__Host-angelos"]
        assert None is await server.store.sessions.load(before)
        signed = await server.store.sessions.load(after)
        assert signed is not None and signed.record.authenticated


async def test_an_unchecked_scope_is_left_out_of_the_grant(services: Services) -> None:
    tls = services.dir / "tls"
    async with first_party(services) as server, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        verifier, challenge = pkce_pair()
        await enrol_and_sign_in(server, page, challenge)
        await page.click("input[value='mail.send']")

        query = await decide(page, "#approve")

        answer = await server.exchange_code(query["code"][0], verifier)
        assert (200, "mail.read") == (answer.status, answer.json()["scope"])
        [entry] = await server.store.grants.list_active()
        assert ("mail.read",) == entry.grant.scopes


async def test_a_denied_request_sends_access_denied_and_grants_nothing(services: Services) -> None:
    tls = services.dir / "tls"
    async with first_party(services) as server, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        _, challenge = pkce_pair()
        await enrol_and_sign_in(server, page, challenge)

        query = await decide(page, "#deny")

        assert {"error": ["access_denied"], "iss": [server.issuer], "state": ["state-1"]} == query
        assert [] == await server.store.grants.list_active()


async def test_the_grants_page_lists_a_grant_and_revoking_it_ends_it(
    services: Services, tmp_path: Path
) -> None:
    tls = services.dir / "tls"
    async with first_party(services) as server, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        verifier, challenge = pkce_pair()
        await enrol_and_sign_in(server, page, challenge)
        query = await decide(page, "#approve")
        token = (await server.exchange_code(query["code"][0], verifier)).json()
        gid = claims(token["access_token"])["gid"]
        owner, scopes = server.config.owner, ("mail.read", "mail.send")
        await page.goto(f"{server.issuer}/oauth/grants")
        listed = await page.evaluate(
            "[...document.querySelectorAll('#grants tbody tr')].map(r => r.cells[0].textContent)"
        )
        passkeys = await page.evaluate("document.getElementById('passkeys').textContent")
        assert ([CLIENT_NAME], "1 passkey enrolled.") == (listed, passkeys)
        await keep_screenshot(page, "grants.png", tmp_path)
        assert await server.store.grants.grant_active(gid, CLIENT_ID, owner, scopes)

        async with page.navigation():
            await page.click("button.revoke")

        assert await page.evaluate("!!document.getElementById('no-grants')")
        assert [] == await server.store.grants.list_active()
        assert not await server.store.grants.grant_active(gid, CLIENT_ID, owner, scopes)


async def test_logout_ends_the_session_but_keeps_the_grants(services: Services) -> None:
    tls = services.dir / "tls"
    async with first_party(services) as server, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        _, challenge = pkce_pair()
        await enrol_and_sign_in(server, page, challenge)
        await decide(page, "#approve")
        await page.goto(f"{server.issuer}/oauth/grants")
        [before] = [c.value for c in await page.cookies() if c.name == "__Host-angelos"]

        async with page.navigation():
            await page.click("#logout button")

        # The sign-in page it lands on starts a fresh anonymous session of its own.
        assert f"{server.issuer}/oauth/login" == await page.current_url()
        [after] = [c.value for c in await page.cookies() if c.name == "__Host-angelos"]
        assert before != after
        assert None is await server.store.sessions.load(before)
        assert 1 == len(await server.store.grants.list_active())
        await page.goto(f"{server.issuer}/oauth/grants")
        assert f"{server.issuer}/oauth/login" == await page.current_url()


async def test_the_server_refuses_a_sign_in_whose_user_was_not_verified(
    services: Services,
) -> None:
    tls = services.dir / "tls"
    async with first_party(services) as server, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        _, challenge = pkce_pair()
        await page.goto(server.authorize_url(challenge=challenge))
        await page.fill("#bootstrap-token", server.bootstrap_token)
        async with page.navigation():
            await page.click("#enrol-button")
        await settle(page, "document.getElementById('sign-in-button')")
        await page.set_user_verified(False)

        outcome = await page.evaluate(UNVERIFIED_SIGN_IN)

        assert 0 == outcome["flags"] & UV_FLAG  # the assertion really lacks the UV flag
        assert (400, {"error": "passkey_refused"}) == (outcome["status"], outcome["body"])
        await page.goto(f"{server.issuer}/oauth/grants")
        assert f"{server.issuer}/oauth/login" == await page.current_url()


async def test_the_server_refuses_an_enrolment_whose_user_was_not_verified(
    services: Services,
) -> None:
    tls = services.dir / "tls"
    async with first_party(services) as server, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        # An authenticator without user verification: asked for none, it makes a credential.
        await page.add_virtual_authenticator(user_verified=False, can_verify=False)
        _, challenge = pkce_pair()
        await page.goto(server.authorize_url(challenge=challenge))

        outcome = await page.evaluate(UNVERIFIED_ENROLMENT % json.dumps(server.bootstrap_token))

        assert 0 == outcome["flags"] & UV_FLAG
        assert (400, {"error": "passkey_refused"}) == (outcome["status"], outcome["body"])
        assert None is await server.store.owner.load()


async def test_a_signed_in_owner_adds_a_second_passkey_from_the_grants_page(
    services: Services,
) -> None:
    tls = services.dir / "tls"
    async with first_party(services) as server, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        _, challenge = pkce_pair()
        await enrol_and_sign_in(server, page, challenge)
        await page.goto(f"{server.issuer}/oauth/grants")
        # Another device: the first one already holds a passkey for this owner, and the
        # ceremony excludes it.
        await page.remove_virtual_authenticator()
        await page.add_virtual_authenticator(user_verified=True)
        async with page.navigation():  # the page reloads once the passkey is saved
            await page.click("#add-passkey button")
        passkeys = await page.evaluate("document.getElementById('passkeys').textContent")
        owner = await server.store.owner.load()
        assert ("2 passkeys enrolled.", 1) == (passkeys, len(await page.credentials()))
        assert owner is not None and 2 == len(owner.credentials)


async def test_security_events_are_logged_without_secrets(services: Services) -> None:
    tls = services.dir / "tls"
    async with first_party(services) as server, browser(trust=tls / "server.crt") as chromium:
        page = await chromium.open_page()
        await page.add_virtual_authenticator(user_verified=True)
        verifier, challenge = pkce_pair()
        with structlog.testing.capture_logs() as logs:
            await page.goto(server.authorize_url(challenge=challenge))
            await page.fill("#bootstrap-token", server.bootstrap_token)
            async with page.navigation():
                await page.click("#enrol-button")
            await settle(page, "document.getElementById('sign-in-button')")
            await page.set_user_verified(False)
            failed = await page.evaluate(UNVERIFIED_SIGN_IN)
            await page.set_user_verified(True)
            async with page.navigation():
                await page.click("#sign-in-button")
            await settle(page, "document.getElementById('approve')")
            query = await decide(page, "#approve")
            token = (await server.exchange_code(query["code"][0], verifier)).json()
            [entry] = await server.store.grants.list_active()
            await page.goto(f"{server.issuer}/oauth/grants")
            async with page.navigation():
                await page.click("button.revoke")
            await page.goto(server.authorize_url(challenge=challenge, state="state-2"))
            await settle(page, "document.getElementById('deny')")
            await decide(page, "#deny")
        cookies = [c.value for c in await page.cookies()]
    assert 400 == failed["status"]
    events = [
        {k: v for k, v in e.items() if k in ("event", "rule", "purpose", "client_id", "found")}
        for e in logs
        if e["event"]
        in (
            "passkey_enrolled",
            "passkey_enrolment_refused",
            "signed_in",
            "sign_in_failed",
            "consent_approved",
            "consent_denied",
            "grant_revoked",
        )
    ]
    assert [
        {"event": "passkey_enrolled", "purpose": "bootstrap"},
        {"event": "sign_in_failed", "rule": "passkey_refused"},
        {"event": "signed_in"},
        {"event": "consent_approved", "client_id": CLIENT_ID},
        {"event": "grant_revoked", "client_id": CLIENT_ID, "found": True},
        {"event": "consent_denied", "client_id": CLIENT_ID},
    ] == events
    text = repr(logs)
    gid = claims(token["access_token"])["gid"]
    secrets = [server.bootstrap_token, gid, entry.handle, query["code"][0], *cookies]
    assert [] == [secret for secret in secrets if secret and secret in text]
