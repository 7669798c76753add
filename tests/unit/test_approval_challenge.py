"""The approval page's pure parts: the challenge binding, the approved event, the rendering."""

from __future__ import annotations

import hashlib

from service.auth.server.browser.approval_state import (
    approval_challenge,
    approved_event,
    binding,
    split_challenge,
)
from service.auth.server.browser.approval_view import REFUSAL_PAGES, approval_page, refusal_page
from service.auth.server.store.keys import new_token
from service.wire.b64url import encode_b64url

PID = "0123456789abcdef" * 2
SHOWN = "ab" * 32


def test_the_challenge_carries_the_stored_nonce_and_the_binding() -> None:
    nonce = new_token()
    parts = split_challenge(approval_challenge(nonce, PID, SHOWN))
    assert (nonce, binding(PID, SHOWN)) == parts
    assert binding(PID, SHOWN) != binding(PID, "cd" * 32) != binding("f" * 32, SHOWN)


def test_a_challenge_of_another_length_or_alphabet_is_no_approval() -> None:
    assert split_challenge(new_token()) is None  # a sign-in challenge: the nonce alone
    assert split_challenge(encode_b64url(bytes(65))) is None
    assert split_challenge("not base64url!") is None


def test_the_approved_event_hashes_the_raw_credential_id() -> None:
    raw = b"\x01credential"
    event = approved_event(SHOWN, encode_b64url(raw))
    assert (event.mode, event.client_name, event.client_version, event.protocol) == (
        "passkey", "browser", "", "",
    )  # fmt: skip
    assert (SHOWN, hashlib.sha256(raw).hexdigest()) == (event.shown_sha256, event.credential_sha256)


def test_the_page_escapes_every_line_and_binds_the_form_to_the_text() -> None:
    lines = ["From: <a@example.org>", 'Subject: <script>alert("x")</script> & co']
    page = approval_page(csrf="c", pid=PID, lines=lines, shown=SHOWN, mail_from="m&m@example.org")
    html = page.text or ""
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; co" in html
    assert f'data-pid="{PID}" data-shown="{SHOWN}"' in html
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]


def test_every_refusal_has_its_page() -> None:
    statuses = {reason: refusal_page(reason, "m@example.org").status for reason in REFUSAL_PAGES}
    assert (404, 410, 200) == (statuses["unknown"], statuses["expired"], statuses["approved"])
