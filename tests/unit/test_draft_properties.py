"""Properties: every composed draft reads back exactly; no input makes the reader misbehave."""

from __future__ import annotations

import base64
import contextlib
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from providers.mime.compose import build_draft_bytes, compose_draft
from providers.mime.draft.draft import parse_draft, read_draft
from schemas.args.common import AttachmentIn, Message
from schemas.compose import ComposedMessage, Identity
from schemas.errors import SafetyLimit, UnsupportedOperation

IDENTITY = Identity(sender="alice@example.test")
NOW = datetime(2026, 10, 6, 18, 0, tzinfo=UTC)

header_text = st.text(st.characters(blacklist_categories=["Cc", "Cs"]), max_size=60)
_BODY_CONTROLS = "".join(chr(c) for c in [*range(9), 11, 12, *range(14, 32), *range(127, 160)])
body_text = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters=_BODY_CONTROLS), max_size=300
)
address = st.builds(
    "{}@{}.test".format,
    st.from_regex(r"[a-z0-9][a-z0-9.+_-]{0,10}[a-z0-9]", fullmatch=True).filter(
        lambda s: ".." not in s
    ),
    st.from_regex(r"[a-z0-9]{1,10}", fullmatch=True),
)
entry = st.one_of(
    address,
    st.builds(
        lambda name, addr: '"' + name.replace("\\", "\\\\").replace('"', '\\"') + f'" <{addr}>',
        header_text,
        address,
    ),
)
subject = header_text.filter(lambda s: len(s.encode()) <= 512)
filename = st.text(
    st.characters(blacklist_categories=["Cc", "Cs"], blacklist_characters="/\\"),
    min_size=1,
    max_size=30,
)
attachment = st.builds(
    lambda name, data, ctype: AttachmentIn(name, ctype, base64.b64encode(data).decode()),
    filename,
    st.binary(max_size=300),
    st.sampled_from(["application/octet-stream", "text/plain; charset=iso-8859-1", "image/png"]),
)


def build(message: Message) -> tuple[ComposedMessage, bytes]:
    composed = compose_draft(message, identity=IDENTITY, draft_id="ab" * 16, created_at=NOW)
    return composed, build_draft_bytes(composed)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    to=st.lists(entry, max_size=3),
    bcc=st.lists(entry, max_size=2),
    subj=subject,
    text=body_text,
    html=st.one_of(st.just(""), body_text.filter(bool)),
    files=st.lists(attachment, max_size=3),
)
def test_every_composed_draft_reads_back_exactly(
    to: list[str], bcc: list[str], subj: str, text: str, html: str, files: list[AttachmentIn]
) -> None:
    message = Message(to=to, bcc=bcc, subject=subj, text=text, html=html, attachments=files)
    composed, raw = build(message)
    draft = read_draft(raw)
    single_text = not html and not files
    want_text = composed.text
    if single_text and want_text.endswith("\n"):
        want_text = want_text[:-1]  # the message's own closing CRLF ends the last line
    assert (want_text, composed.html) == (draft.text, draft.html)
    assert subj == draft.subject
    rebuilt = draft.message()
    assert composed.to == (rebuilt.to or [])
    assert composed.bcc == (rebuilt.bcc or [])
    assert [(a.filename, a.data_base64) for a in files] == [
        (f.filename, base64.b64encode(f.data).decode()) for f in draft.attachments
    ]
    assert "<" + "ab" * 16 + "@example.test>" == draft.message_id


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_are_read_or_refused_never_crash(raw: bytes) -> None:
    with contextlib.suppress(UnsupportedOperation, SafetyLimit):
        read_draft(raw)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_damaged_drafts_are_read_or_refused_never_crash(data: st.DataObject) -> None:
    files = [AttachmentIn("a.bin", "application/octet-stream", "AP+A")]
    _, raw = build(Message(to=["p@example.test"], text="Hi", html="<p>Hi</p>", attachments=files))
    position = data.draw(st.integers(0, len(raw) - 1))
    cut = data.draw(st.integers(0, 8))
    insert = data.draw(st.binary(max_size=8))
    damaged = raw[:position] + insert + raw[position + cut :]
    try:
        parse_draft(damaged)
        read_draft(damaged)
    except (UnsupportedOperation, SafetyLimit):
        pass
