"""Properties: any valid composition parses back unchanged with the stdlib email package."""

from __future__ import annotations

import binascii
import re
from datetime import UTC, datetime
from email import message_from_bytes, policy
from email.message import EmailMessage

from hypothesis import given, settings
from hypothesis import strategies as st

from providers.mime.compose import compose_new
from providers.mime.compose.addresses import Mailbox, header_form, parse_entry, simple_entry
from providers.mime.compose.encoding import quoted_printable
from schemas.args.common import Message
from schemas.compose import ComposedMessage, Identity

IDENTITY = Identity(sender="alice@example.test")
NOW = datetime(2026, 10, 6, 18, 0, tzinfo=UTC)
ATEXT = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-/=?^_`{|}~"

# Any Unicode text without control characters or surrogates (what the rules allow).
header_text = st.text(st.characters(blacklist_categories=["Cc", "Cs"]), max_size=40)
# CR, LF and TAB are the only controls a body may hold.
_BODY_CONTROLS = "".join(chr(c) for c in [*range(9), 11, 12, *range(14, 32), *range(127, 160)])
body_text = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters=_BODY_CONTROLS), max_size=400
)
atom = st.text(st.sampled_from(ATEXT), min_size=1, max_size=12)
local_part = st.lists(atom, min_size=1, max_size=3).map(".".join)
domain = st.lists(st.from_regex(r"[a-z0-9]{1,10}", fullmatch=True), min_size=1, max_size=3).map(
    lambda labels: ".".join([*labels, "test"])
)
address = st.builds(lambda local, host: f"{local}@{host}", local_part, domain)


def quoted(name: str) -> str:
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


entry = st.one_of(
    address,
    st.builds(lambda name, addr: f"{quoted(name)} <{addr}>", header_text, address),
)
subject = header_text.filter(lambda s: len(s.encode()) <= 512)


def parse(raw: bytes) -> EmailMessage:
    parsed = message_from_bytes(raw, policy=policy.default)
    assert isinstance(parsed, EmailMessage)
    return parsed


def addresses(parsed: EmailMessage, name: str) -> list[tuple[str, str]]:
    header = parsed[name]
    if header is None:
        return []
    return [(a.display_name, a.addr_spec) for a in header.addresses]


def plain_part(parsed: EmailMessage) -> str:
    part = parsed.get_body(("plain",))
    assert part is not None
    text = part.get_content()
    assert isinstance(text, str)
    return text.replace("\r\n", "\n")


def same_mailboxes(want: list[tuple[str, str]], got: list[tuple[str, str]]) -> bool:
    """Compare mailboxes exactly, except that a name written as several encoded words is
    compared without whitespace: the stdlib puts a space between adjacent encoded words in a
    display name, where RFC 2047 §6.2 (and our own reader) drop it."""
    if [a for _, a in want] != [a for _, a in got]:
        return False
    for (name, addr), (parsed_name, _) in zip(want, got, strict=True):
        if " =?" in header_form(Mailbox(name, addr)):
            name, parsed_name = re.sub(r"\s+", "", name), re.sub(r"\s+", "", parsed_name)
        if name != parsed_name:
            return False
    return True


def expected_mailboxes(entries: list[str], seen: set[str]) -> list[tuple[str, str]]:
    kept = []
    for value in entries:
        mailbox = parse_entry(value, "x")
        if mailbox.address.lower() not in seen:
            seen.add(mailbox.address.lower())
            kept.append((mailbox.name, mailbox.address))
    return kept


def compose(
    to: list[str], cc: list[str], bcc: list[str], subj: str, text: str, html: str
) -> ComposedMessage:
    message = Message(to=to, cc=cc, bcc=bcc, subject=subj, text=text, html=html)
    return compose_new(message, identity=IDENTITY, prepared_id="ab" * 16, created_at=NOW)


@settings(max_examples=300, deadline=None)
@given(
    to=st.lists(entry, min_size=1, max_size=4),
    cc=st.lists(entry, max_size=3),
    bcc=st.lists(entry, max_size=3),
    subj=subject,
    text=body_text,
    html=st.one_of(st.just(""), body_text),
)
def test_valid_compositions_round_trip_through_the_stdlib_parser(
    to: list[str], cc: list[str], bcc: list[str], subj: str, text: str, html: str
) -> None:
    composed = compose(to, cc, bcc, subj, text, html)
    raw = composed.raw
    assert re.search(rb"(?<!\r)\n", raw) is None
    assert re.search(rb"\r(?!\n)", raw) is None
    assert all(len(line) <= 998 for line in raw.split(b"\r\n"))
    assert raw.endswith(b"\r\n")
    assert b"\nbcc:" not in raw.lower()

    seen: set[str] = set()
    want_to = expected_mailboxes(to, seen)
    want_cc = expected_mailboxes(cc, seen)
    want_bcc = expected_mailboxes(bcc, seen)
    parsed = parse(raw)
    assert same_mailboxes(want_to, addresses(parsed, "To"))
    assert same_mailboxes(want_cc, addresses(parsed, "Cc"))
    assert [a for _, a in want_to + want_cc + want_bcc] == composed.recipients
    assert subj == parsed["Subject"]
    got = plain_part(parsed)
    # A lone text part gets the message's closing CRLF unless its text already ends a line.
    closing = "\n" if not html and composed.text and not composed.text.endswith("\n") else ""
    assert composed.text + closing == got
    if html:
        html_part = parsed.get_body(("html",))
        assert html_part is not None
        assert composed.html == str(html_part.get_content()).replace("\r\n", "\n")


qp_text = st.lists(
    st.sampled_from(["a", " ", "\t", "=", ".", "\n", "é", "€", "\U0001f600", "x" * 80, " \n"]),
    max_size=120,
).map("".join)


@settings(max_examples=300)
@given(qp_text)
def test_quoted_printable_round_trips_in_lines_of_at_most_76_without_trailing_space(
    text: str,
) -> None:
    encoded = quoted_printable(text)
    lines = encoded.split(b"\r\n")
    assert all(len(line) <= 76 and not line.endswith((b" ", b"\t")) for line in lines)
    assert re.search(rb"(?<!\r)\n|\r(?!\n)", encoded) is None
    assert text.encode("utf-8") == binascii.a2b_qp(encoded.replace(b"\r\n", b"\n"))


ENTRY_PIECES = ["a", "b.c", "@", "<", ">", " ", "\t", '"', "John", "x-y", "o'n", "=?", "."]
entry_parts = st.lists(
    st.sampled_from([*ENTRY_PIECES, "é", "\\", "(", ")", "(x y)", "(é)"]), max_size=12
).map("".join)


@settings(max_examples=500)
@given(entry_parts)
def test_an_entry_read_without_the_stdlib_parser_reads_as_the_stdlib_reads_it(
    entry: str,
) -> None:
    simple = simple_entry(entry)
    if simple is not None:
        header = policy.default.header_factory("To", entry)
        (address,) = header.addresses
        assert () == tuple(header.defects)
        assert (address.display_name, address.username, address.domain) == simple
