"""The IMAP wire codec: argument encoding and response parsing, without a server."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.imap import codec, responses
from providers.imap.responses import ImapResponse
from schemas.errors import InvalidArguments, SafetyLimit, ServiceUnavailable
from schemas.mailbox import Folder

# Any Unicode text a Python str can hold as valid UTF-8 (no lone surrogates).
unicode_text = st.text(st.characters(exclude_categories=("Cs",)))
line_safe_text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\r\n\x00"))


class TestModifiedUtf7:
    @pytest.mark.parametrize(
        ("name", "wire"),
        [
            ("INBOX", "INBOX"),
            ("Café", "Caf&AOk-"),
            ("a&b", "a&-b"),
            ("&", "&-"),
            ("日本語", "&ZeVnLIqe-"),
            ("~peter/mail/台北/日本語", "~peter/mail/&U,BTFw-/&ZeVnLIqe-"),
            ("😀", "&2D3eAA-"),
        ],
    )
    def test_known_encodings_match_rfc_3501(self, name: str, wire: str) -> None:
        assert wire == codec.encode_mutf7(name)
        assert name == codec.decode_mutf7(wire)

    @given(unicode_text)
    def test_decode_inverts_encode(self, name: str) -> None:
        assert name == codec.decode_mutf7(codec.encode_mutf7(name))

    @given(unicode_text)
    def test_encoding_is_printable_ascii(self, name: str) -> None:
        assert all(" " <= ch <= "~" for ch in codec.encode_mutf7(name))

    @pytest.mark.parametrize(
        "wire",
        [
            "&AOk",  # unterminated
            "&AGE-",  # printable ASCII must not be base64-encoded
            "&AOk-&AOk-",  # adjacent runs must be merged
            "&2D0-",  # lone high surrogate
            "&A!k-",  # not base64
            "Café",  # raw 8-bit is not modified UTF-7
        ],
    )
    def test_non_canonical_or_broken_names_are_rejected(self, wire: str) -> None:
        with pytest.raises(ValueError):
            codec.decode_mutf7(wire)


class TestArguments:
    @given(line_safe_text)
    def test_quoted_strings_round_trip_through_the_tokenizer(self, value: str) -> None:
        quoted = codec.quote(value)
        assert [value.encode("utf-8")] == responses.tokenize([quoted.encode("utf-8")])

    @pytest.mark.parametrize("bad", ["a\rb", "a\nb", "a\x00b", "\r\n"])
    def test_cr_lf_and_nul_are_invalid_arguments(self, bad: str) -> None:
        with pytest.raises(InvalidArguments):
            codec.quote(bad)
        with pytest.raises(InvalidArguments):
            codec.string_arg(bad, non_sync_literal_max=10**9)

    def test_seven_bit_strings_are_quoted(self) -> None:
        assert codec.string_arg('a "b" \\c', non_sync_literal_max=10**9) == '"a \\"b\\" \\\\c"'

    def test_eight_bit_strings_become_non_synchronizing_literals_when_allowed(self) -> None:
        assert codec.string_arg("päss", non_sync_literal_max=10**9) == "{5+}\r\npäss"

    def test_eight_bit_strings_too_big_for_literal_minus_fall_back_to_quoted(self) -> None:
        assert codec.string_arg("päss", non_sync_literal_max=4) == '"päss"'

    @given(line_safe_text)
    def test_literal_decision_depends_only_on_8_bit_content(self, value: str) -> None:
        arg = codec.string_arg(value, non_sync_literal_max=10**9)
        assert arg.startswith("{") == (not value.isascii())

    def test_mailbox_arg_encodes_and_quotes_in_one_step(self) -> None:
        assert codec.mailbox_arg('Projekt "X" Ä') == '"Projekt \\"X\\" &AMQ-"'

    @pytest.mark.parametrize("bad", ["", "a\u200bb", "tab\there", "x" * 1025, "\ud800"])
    def test_mailbox_arg_refuses_invalid_folder_names(self, bad: str) -> None:
        with pytest.raises(InvalidArguments):
            codec.mailbox_arg(bad)

    def test_folder_names_may_use_1024_utf8_bytes(self) -> None:
        assert codec.folder_name_problem("é" * 512) is None
        assert codec.folder_name_problem("é" * 512 + "x") is not None

    def test_atoms_and_raw_syntax_refuse_what_would_change_the_command(self) -> None:
        assert codec.atom("\\Seen") == "\\Seen"
        with pytest.raises(InvalidArguments):
            codec.atom("two words")
        with pytest.raises(InvalidArguments):
            codec.raw("(X)\r\nA1 DELETE INBOX")

    def test_uid_sets_are_compact_and_sorted(self) -> None:
        assert codec.uid_set([10, 5, 2, 1, 3, 9, 2]) == "1:3,5,9:10"

    @pytest.mark.parametrize("bad", [[], [0], [4_294_967_296]])
    def test_uid_sets_refuse_empty_and_out_of_range(self, bad: list[int]) -> None:
        with pytest.raises(InvalidArguments):
            codec.uid_set(bad)

    def test_uid_batches_hold_at_most_500(self) -> None:
        batches = codec.uid_batches(range(1, 1202))
        assert [len(b) for b in batches] == [500, 500, 201]
        assert list(range(1, 1202)) == [u for b in batches for u in b]

    @given(st.sets(st.integers(1, 4_294_967_295), min_size=1, max_size=50))
    def test_uid_set_round_trips(self, uids: set[int]) -> None:
        assert sorted(uids) == codec.parse_uid_set(codec.uid_set(uids))


class TestTokenizer:
    def test_lists_strings_atoms_nil_and_literals(self) -> None:
        tokens = responses.tokenize([b"1 FETCH (FLAGS (\\Seen) X NIL BODY[] {5}", b"a)b\r\n", b")"])
        assert tokens == ["1", "FETCH", ["FLAGS", ["\\Seen"], "X", None, "BODY[]", b"a)b\r\n"]]

    def test_brackets_keep_their_spaces_inside_the_atom(self) -> None:
        tokens = responses.tokenize([b"(BODY[HEADER.FIELDS (SUBJECT DATE)] {3}", b"abc", b")"])
        assert tokens == [["BODY[HEADER.FIELDS (SUBJECT DATE)]", b"abc"]]

    @pytest.mark.parametrize("bad", [b"(a", b"a)", b'"open'])
    def test_unbalanced_input_is_malformed(self, bad: bytes) -> None:
        with pytest.raises(ServiceUnavailable):
            responses.tokenize([bad])

    def test_a_literal_at_the_end_of_a_response_has_no_continuation(self) -> None:
        lines = [b'LIST () "/" {5}', b'ab"cd', b'LIST () "/" INBOX']
        assert [[lines[0], lines[1], b""], [lines[2]]] == responses.group_responses(lines)


class TestList:
    def _folders(self, *lines: bytes) -> list[Folder]:
        response = ImapResponse(status="OK", text=b"List completed", lines=list(lines))
        return [responses.parse_list_response(g) for g in responses.list_responses(response)]

    def test_quoted_literal_and_atom_names_are_decoded(self) -> None:
        folders = self._folders(
            b'LIST (\\HasNoChildren) "/" INBOX',
            b'LIST (\\Drafts) "/" "My \\"Drafts\\""',
            b'LIST () "/" {5}',
            b'ab"cd',
            b'LIST (\\Noselect) NIL "Caf&AOk- * Bar" ("CHILDINFO" ("SUBSCRIBED"))',
        )
        assert [
            Folder("INBOX", "/", ["\\HasNoChildren"]),
            Folder('My "Drafts"', "/", ["\\Drafts"]),
            Folder('ab"cd', "/", []),
            Folder("Café * Bar", "", ["\\Noselect"]),
        ] == folders

    @pytest.mark.parametrize(
        "line", [b'LIST () "/" "Caf\xc3\xa9"', b'LIST () "/" "a&AGE-"', b'LIST () "/" "&AB8-"']
    )
    def test_names_that_cannot_be_used_safely_hit_the_safety_limit(self, line: bytes) -> None:
        with pytest.raises(SafetyLimit):
            self._folders(line)

    def test_other_untagged_lines_are_not_folders(self) -> None:
        assert self._folders(b"OK [ALERT] hello", b"3 EXISTS") == []


class TestResponseCodes:
    def test_appenduid(self) -> None:
        response = ImapResponse("OK", b"[APPENDUID 1796034106 7] Append completed.")
        assert responses.AppendUid(1796034106, [7]) == responses.parse_appenduid(response)

    def test_huge_uid_sets_from_a_server_hit_the_safety_limit(self) -> None:
        with pytest.raises(SafetyLimit):
            codec.parse_uid_set("1:4294967295")

    def test_capabilities_from_the_tagged_code_or_an_untagged_line(self) -> None:
        tagged = ImapResponse("OK", b"[CAPABILITY IMAP4rev1 MOVE LITERAL+] Logged in")
        untagged = ImapResponse("OK", b"done", [b"CAPABILITY IMAP4rev1 UIDPLUS"])
        assert responses.capabilities_in(tagged) == ["IMAP4rev1", "MOVE", "LITERAL+"]
        assert responses.capabilities_in(untagged) == ["IMAP4rev1", "UIDPLUS"]
        assert responses.capabilities_in(ImapResponse("OK", b"Logged in")) is None


class TestSelectAndStatus:
    EXAMINE = ImapResponse(
        "OK",
        b"[READ-ONLY] Examine completed",
        [
            b"FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)",
            b"OK [PERMANENTFLAGS (\\Seen \\*)] Flags permitted.",
            b"3 EXISTS",
            b"0 RECENT",
            b"OK [UIDVALIDITY 1796034106] UIDs valid",
            b"OK [UIDNEXT 4] Predicted next UID",
            b"OK [HIGHESTMODSEQ 18446744073709551615] Highest",
        ],
    )

    def test_examine_reports_uidvalidity_uidnext_modseq_flags_and_mode(self) -> None:
        result = responses.parse_select(self.EXAMINE)
        assert (
            responses.SelectResult(
                uid_validity=1796034106,
                uid_next=4,
                exists=3,
                highest_modseq=18446744073709551615,
                flags=["\\Answered", "\\Flagged", "\\Deleted", "\\Seen", "\\Draft"],
                permanent_flags=["\\Seen", "\\*"],
                read_only=True,
            )
            == result
        )

    def test_select_without_uidvalidity_is_unusable(self) -> None:
        response = ImapResponse("OK", b"[READ-WRITE] ok", [b"3 EXISTS", b"OK [UIDNEXT 4] x"])
        with pytest.raises(ServiceUnavailable):
            responses.parse_select(response)

    def test_status_of_an_encoded_name(self) -> None:
        response = ImapResponse(
            "OK", b"ok", [b'STATUS "Caf&AOk-" (MESSAGES 2 UIDNEXT 9 UIDVALIDITY 17)']
        )
        assert responses.StatusResult(
            "Café", {"MESSAGES": 2, "UIDNEXT": 9, "UIDVALIDITY": 17}
        ) == responses.parse_status(response)

    def test_search_numbers_skip_the_modseq_suffix(self) -> None:
        response = ImapResponse("OK", b"ok", [b"SEARCH 2 5 9 (MODSEQ 917162500)"])
        assert responses.parse_search(response) == [2, 5, 9]
        assert responses.parse_search(ImapResponse("OK", b"ok", [b"SEARCH"])) == []

    @given(
        st.lists(st.integers(min_value=1, max_value=2**32 - 1), max_size=60),
        st.sampled_from([b"SEARCH", b"search", b"Search"]),
        st.one_of(st.none(), st.integers(min_value=0, max_value=2**63 - 1)),
    )
    def test_search_numbers_of_any_plain_answer(
        self, uids: list[int], word: bytes, modseq: int | None
    ) -> None:
        line = b" ".join([word, *(str(u).encode() for u in uids)])
        if modseq is not None:
            line += b" (MODSEQ %d)" % modseq
        assert uids == responses.parse_search(ImapResponse("OK", b"ok", [line]))

    def test_a_search_answer_with_a_stray_word_is_still_refused(self) -> None:
        with pytest.raises(ServiceUnavailable):
            responses.parse_search(ImapResponse("OK", b"ok", [b"SEARCH 2 x 9"]))


class TestCleanText:
    def test_controls_dropped_and_cut_on_a_character_boundary(self) -> None:
        assert codec.clean_text("a\x00\u200bb") == "ab"
        assert codec.clean_text("é" * 200) == "é" * 128
        assert len(codec.clean_text("é" * 200 + "x", limit=5).encode()) <= 5
