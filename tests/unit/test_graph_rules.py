"""The Graph provider's pure rules: filters, cursors, the retry rule, what an answer means,
the local check of a submission, and linear work on answers up to their size limits."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable

import msgspec
import pytest

from providers.graph.answers import applied_or_not, read_failure
from providers.graph.http import MAX_JSON_BYTES, Answer, Kind, _retry_after, retry_after_of
from providers.graph.search import (
    continuation,
    decode_cursor,
    encode_cursor,
    header_match,
    odata_string,
    page_params,
    server_filter,
)
from providers.graph.submit import graph_submission_is_valid
from providers.graph.summaries import flags_of, reference_of, summary_of
from providers.graph.wire import Message, MessagePage, decode
from providers.graph.writes import graph_flags
from providers.mime.compose.limits import MAX_GRAPH_MESSAGE_BYTES
from schemas import errors
from schemas.search import SearchQuery
from schemas.secret import Secret
from schemas.submission import Envelope
from support.linear import LINEAR_BOUND, growth

KEY = Secret("client-secret")
ME = "https://graph.microsoft.com/v1.0/me"
COLLECTION = f"{ME}/mailFolders/inbox/messages"


def query(**fields: object) -> SearchQuery:
    return msgspec.structs.replace(SearchQuery(operation="search"), **fields)


class TestServerFilter:
    def test_no_filter_at_all_sends_none(self) -> None:
        assert "" == server_filter(query())
        assert "$filter" not in page_params(query())

    def test_the_ordered_property_comes_first_as_graph_requires(self) -> None:
        assert "receivedDateTime ge 1900-01-01T00:00:00Z and isRead eq false" == server_filter(
            query(unread=True)
        )

    def test_dates_read_state_flag_and_attention_conjoin(self) -> None:
        found = server_filter(
            query(since="2026-01-01", before="2026-02-01", flagged=False, attention=True)
        )
        assert (
            "receivedDateTime ge 2026-01-01T00:00:00Z and receivedDateTime lt 2026-02-01T00:00:00Z"
            " and flag/flagStatus ne 'flagged' and (isRead eq false or flag/flagStatus eq "
            "'flagged')"
        ) == found

    def test_a_message_id_is_an_odata_literal_with_quotes_doubled(self) -> None:
        assert "'<o''brien@x>'" == odata_string("<o'brien@x>")
        assert server_filter(query(message_id="o'b@x")).endswith("internetMessageId eq '<o''b@x>'")

    def test_a_page_is_at_most_25_and_oldest_ascends(self) -> None:
        params = page_params(query(limit=100, order="oldest"))
        assert ("25", "receivedDateTime asc") == (params["$top"], params["$orderby"])
        assert "7" == page_params(query(limit=7))["$top"]


def message(**fields: object) -> Message:
    base: dict[str, object] = {"id": "AAMkM1", "parentFolderId": "AAMkF1"}
    return msgspec.convert({**base, **fields}, Message)


class TestLiteralFilters:
    def test_from_to_subject_and_participant_match_in_any_case(self) -> None:
        found = message(
            subject="Quarterly Plan",
            **{"from": {"emailAddress": {"name": "Ana Díaz", "address": "ana@x.test"}}},
            toRecipients=[{"emailAddress": {"address": "bo@y.test"}}],
            ccRecipients=[{"emailAddress": {"name": "Cy", "address": "cy@z.test"}}],
        )
        assert header_match(query(from_="ANA DÍ"), found)
        assert header_match(query(to="BO@Y"), found)
        assert header_match(query(subject="plan"), found)
        assert header_match(query(participant="cy@z"), found)
        assert not header_match(query(to="cy@z"), found)  # Cc is a participant, not To
        assert not header_match(query(subject="budget"), found)

    def test_the_message_id_must_match_exactly(self) -> None:
        found = message(internetMessageId="<a@b>")
        assert header_match(query(message_id="a@b"), found)
        assert not header_match(query(message_id="A@b"), found)


class TestCursor:
    def test_a_cursor_carries_graphs_paging_value_and_comes_back(self) -> None:
        q = query(unread=True)
        text = encode_cursor(KEY, q, "$skip", "25")
        state = decode_cursor(KEY, msgspec.structs.replace(q, cursor=text))
        assert state is not None and ("$skip", "25") == (state.name, state.value)

    def test_the_limit_may_change_between_pages(self) -> None:
        text = encode_cursor(KEY, query(limit=10), "$skip", "10")
        assert decode_cursor(KEY, query(limit=20, cursor=text)) is not None

    @pytest.mark.parametrize(
        "change", [{"unread": True}, {"folder": "AAMkOther"}, {"order": "oldest"}]
    )
    def test_a_cursor_of_another_search_is_refused(self, change: dict[str, object]) -> None:
        text = encode_cursor(KEY, query(), "$skip", "10")
        with pytest.raises(errors.InvalidArguments):
            decode_cursor(KEY, query(cursor=text, **change))

    def test_an_edited_or_foreign_key_cursor_is_refused(self) -> None:
        text = encode_cursor(KEY, query(), "$skip", "10")
        state = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        state[2] = "100000"
        edited = base64.urlsafe_b64encode(json.dumps(state).encode()).decode().rstrip("=")
        for cursor, key in ((edited, KEY), (text, Secret("another-secret")), ("%%%", KEY)):
            with pytest.raises(errors.InvalidArguments):
                decode_cursor(key, query(cursor=cursor))

    def test_a_next_link_must_page_the_same_collection(self) -> None:
        assert ("$skip", "10") == continuation(f"{COLLECTION}?$top=10&$skip=10", COLLECTION)
        assert None is continuation(None, COLLECTION)
        for link in (
            f"{ME}/mailFolders/other/messages?$skip=10",
            "https://evil.example/v1.0/me/mailFolders/inbox/messages?$skip=10",
            f"{COLLECTION}?$top=10",
        ):
            with pytest.raises(errors.ServiceUnavailable):
                continuation(link, COLLECTION)

    def test_a_paging_value_too_long_for_a_cursor_is_unavailable(self) -> None:
        with pytest.raises(errors.ServiceUnavailable):
            encode_cursor(KEY, query(), "$skiptoken", "a" * 300 + "b" * 60)


def answered(status: int, retry_after_s: float = 1.0) -> Answer:
    return Answer(status=status, body=b"", retry_after_s=retry_after_s)


class TestTheOneRetryRule:
    def test_a_send_is_never_repeated(self) -> None:
        assert [None, None, None] == [_retry_after(Kind.SEND, answered(s)) for s in (429, 503, 504)]

    def test_a_write_waits_out_only_a_throttle(self) -> None:
        assert 1.0 == _retry_after(Kind.WRITE, answered(429))
        assert None is _retry_after(Kind.WRITE, answered(503))

    def test_a_read_waits_out_a_throttle_or_an_unavailable_at_most_five_seconds(self) -> None:
        assert 2.0 == _retry_after(Kind.READ, answered(503, 2.0))
        assert 5.0 == _retry_after(Kind.READ, answered(429, 120.0))
        assert None is _retry_after(Kind.READ, answered(500))

    def test_retry_after_is_seconds_or_an_http_date(self) -> None:
        assert 7.0 == retry_after_of("7")
        assert 30.0 == retry_after_of("Thu, 01 Jan 1970 00:00:30 GMT", now=0.0)
        assert 1.0 == retry_after_of("soon") == retry_after_of(None)


class TestWhatAnAnswerMeans:
    def test_reads_conclude_nothing_changed(self) -> None:
        assert isinstance(read_failure(answered(404)), errors.NotFound)
        unavailable = [read_failure(answered(s)) for s in (401, 403, 429, 500)]
        assert all(isinstance(e, errors.ServiceUnavailable) for e in unavailable)
        assert "angelos microsoft-auth" in read_failure(answered(401)).message

    def test_a_write_is_applied_refused_or_unknown(self) -> None:
        assert applied_or_not(answered(201), 201) is True
        assert applied_or_not(answered(409), 201) is False
        for status in (500, 503, 302, 200):
            with pytest.raises(errors.OutcomeUnknown):
                applied_or_not(answered(status), 201)

    def test_only_seen_and_flagged_and_never_conditionally(self) -> None:
        assert {"\\Seen", "\\Flagged"} == graph_flags(["\\seen", "\\FLAGGED"], 0)
        for flags, since in ((["\\Answered"], 0), (["$Label"], 0), (["\\Seen"], 9), ([], 0)):
            with pytest.raises(errors.UnsupportedOperation):
                graph_flags(flags, since)


class TestSummaries:
    def test_flags_and_a_whole_reference(self) -> None:
        found = message(isRead=True, isDraft=True, flag={"flagStatus": "flagged"})
        assert ["\\Seen", "\\Flagged", "\\Draft"] == flags_of(found)
        ref = reference_of(found, "acct")
        assert ("AAMkF1", "microsoft_graph", "acct", "AAMkM1") == (
            ref.folder, ref.provider, ref.account, ref.id
        )  # fmt: skip

    def test_a_malformed_id_from_graph_is_unavailable(self) -> None:
        with pytest.raises(errors.ServiceUnavailable):
            reference_of(message(id="a/b"), "acct")

    def test_the_date_is_the_sent_date_else_the_received_one(self) -> None:
        found = message(receivedDateTime="2026-03-01T10:00:00Z")
        assert "2026-03-01T10:00:00Z" == summary_of(found, "acct").date
        sent = message(sentDateTime="2026-02-28T09:00:00Z", receivedDateTime="2026-03-01T10:00:00Z")
        assert "2026-02-28T09:00:00Z" == summary_of(sent, "acct").date
        with pytest.raises(errors.ServiceUnavailable):
            summary_of(message(), "acct")


def mime(*headers: str) -> bytes:
    return ("\r\n".join(headers) + "\r\n\r\nbody\r\n").encode()


ENVELOPE = Envelope(mail_from="dana@x.test", recipients=("a@y.test", "b@y.test", "c@y.test"))
GOOD = ("From: <dana@x.test>", "To: <a@y.test>", "Cc: <b@y.test>", "Bcc: <c@y.test>")


class TestTheLocalCheckOfASubmission:
    def test_to_cc_and_bcc_must_be_exactly_the_approved_envelope(self) -> None:
        assert graph_submission_is_valid(ENVELOPE, mime(*GOOD), "dana@x.test")
        assert not graph_submission_is_valid(ENVELOPE, mime(*GOOD[:3]), "dana@x.test")
        extra = (*GOOD[:3], "Bcc: <c@y.test>, <d@y.test>")
        assert not graph_submission_is_valid(ENVELOPE, mime(*extra), "dana@x.test")

    @pytest.mark.parametrize(
        "header", ["Sender: <dana@x.test>", "Resent-To: <z@y.test>", "To: <a@y.test>"]
    )
    def test_sender_resent_and_repeated_fields_are_refused(self, header: str) -> None:
        assert not graph_submission_is_valid(ENVELOPE, mime(*GOOD, header), "dana@x.test")

    def test_the_from_must_be_the_configured_account(self) -> None:
        other = ("From: <eve@x.test>", *GOOD[1:])
        assert not graph_submission_is_valid(ENVELOPE, mime(*other), "dana@x.test")

    def test_graphs_size_limit_holds(self) -> None:
        big = mime(*GOOD) + b"x" * MAX_GRAPH_MESSAGE_BYTES
        assert not graph_submission_is_valid(ENVELOPE, big, "dana@x.test")


def page_of(size: int, build: Callable[[int], dict[str, object]]) -> bytes:
    """A message collection of about `size` bytes made of rows from `build`."""
    rows: list[bytes] = []
    used = 40
    while True:
        row = json.dumps(build(len(rows))).encode()
        if used + len(row) + 1 > size:
            break
        rows.append(row)
        used += len(row) + 1
    return b'{"value":[' + b",".join(rows) + b"]}"


PAGE_SHAPES: dict[str, Callable[[int], dict[str, object]]] = {
    "many small messages": lambda n: {"id": f"AAMk{n}", "parentFolderId": "AAMkF"},
    "long recipient lists": lambda n: {
        "id": f"AAMk{n}",
        "parentFolderId": "AAMkF",
        "toRecipients": [
            {"emailAddress": {"name": "n" * 20, "address": f"r{i}@x.test"}} for i in range(50)
        ],
    },
    "long escaped subjects": lambda n: {"id": f"AAMk{n}", "subject": '\u00e9\\"' * 400},
}


@pytest.mark.parametrize("shape", PAGE_SHAPES)
def test_reading_and_filtering_a_page_is_linear_up_to_the_answer_limit(shape: str) -> None:
    q = query(participant="nobody-matches", subject="nor-this")

    def read(body: bytes) -> object:
        page = decode(body, MessagePage)
        return [header_match(q, m) for m in page.value]

    def build(size: int) -> bytes:
        return page_of(size, PAGE_SHAPES[shape])

    assert len(build(MAX_JSON_BYTES)) <= MAX_JSON_BYTES
    ratio = growth(read, build, MAX_JSON_BYTES)
    assert ratio < LINEAR_BOUND, f"CPU grew {ratio:.1f}x from limit/4 to the limit"


def test_checking_a_submission_is_linear_up_to_graphs_message_limit() -> None:
    def build(size: int) -> bytes:
        return mime(*GOOD) + b"x" * (size - 200)

    def check(raw: bytes) -> object:
        return graph_submission_is_valid(ENVELOPE, raw, "dana@x.test")

    ratio = growth(check, build, MAX_GRAPH_MESSAGE_BYTES)
    assert ratio < LINEAR_BOUND, f"CPU grew {ratio:.1f}x from limit/4 to the limit"
