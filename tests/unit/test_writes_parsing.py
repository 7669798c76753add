"""Pure pieces of the IMAP writes: COPYUID mappings, PERMANENTFLAGS, post-conditions, FETCH data."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from providers.imap.responses import ImapResponse
from providers.imap.write import flag_names, message_attrs, single_copyuid
from providers.imap.write_flags import permits, postcondition_met


def ok_with(text: bytes, *lines: bytes) -> ImapResponse:
    return ImapResponse(status="OK", text=text, lines=list(lines))


class TestSingleCopyuid:
    """Only an exact single-UID COPYUID for the source UID yields a destination."""

    def test_a_tagged_mapping_for_the_source_uid_is_used(self) -> None:
        response = ok_with(b"[COPYUID 1700000001 912 88] Copy completed.")
        assert (1700000001, 88) == single_copyuid(response, 912)

    def test_an_untagged_mapping_as_move_sends_it_is_used(self) -> None:
        response = ok_with(b"Move completed.", b"OK [COPYUID 42 7 3] Moved UIDs.", b"5 EXPUNGE")
        assert (42, 3) == single_copyuid(response, 7)

    def test_no_code_is_no_mapping(self) -> None:
        assert single_copyuid(ok_with(b"Copy completed."), 7) is None

    @pytest.mark.parametrize(
        "code",
        [
            b"[COPYUID 42 8 3]",  # another source UID
            b"[COPYUID 42 7:7 3]",  # a range, even of one
            b"[COPYUID 42 7 3:4]",
            b"[COPYUID 42 7,9 3,4]",
            b"[COPYUID 0 7 3]",  # no UIDVALIDITY
            b"[COPYUID 42 7 0]",
            b"[COPYUID 42 7 4294967296]",
            b"[COPYUID 42 7]",
            b"[COPYUID 42 7 3 9]",
            b'[COPYUID "42" 7 3]',
            b"[COPYUID 42 7 (3)]",
        ],
    )
    def test_anything_but_one_exact_pair_is_no_mapping(self, code: bytes) -> None:
        assert single_copyuid(ok_with(code + b" Copy completed."), 7) is None

    def test_an_unreadable_response_code_is_no_mapping_rather_than_an_error(self) -> None:
        assert single_copyuid(ok_with(b"[COPYUID 42 7 3 Copy completed."), 7) is None

    @given(st.integers(1, 2**32 - 1), st.integers(1, 2**32 - 1), st.integers(1, 2**32 - 1))
    def test_every_valid_pair_round_trips(self, validity: int, source: int, target: int) -> None:
        response = ok_with(f"[COPYUID {validity} {source} {target}] done".encode())
        assert (validity, target) == single_copyuid(response, source)


class TestPermits:
    """PERMANENTFLAGS decide which flags a change may set."""

    def test_system_flags_match_in_any_case(self) -> None:
        assert permits(["\\Answered", "\\Seen"], "\\seen")
        assert not permits(["\\Answered", "\\Seen"], "\\Flagged")

    def test_keywords_need_their_name_or_the_wildcard(self) -> None:
        assert permits(["\\Seen", "\\*"], "$Label1")
        assert permits(["$label1"], "$Label1")
        assert not permits(["\\Seen"], "$Label1")

    def test_the_wildcard_never_admits_a_system_flag(self) -> None:
        assert not permits(["\\*"], "\\Deleted")

    def test_no_permanentflags_at_all_means_every_flag_is_permanent(self) -> None:
        assert permits(None, "\\Deleted")
        assert permits(None, "$Label1")

    def test_an_empty_list_permits_nothing(self) -> None:
        assert not permits([], "\\Seen")


class TestPostcondition:
    """The state after a STORE must show the requested delta."""

    def attrs(self, line: bytes) -> dict[str, object]:
        found = message_attrs(ok_with(b"done", line), 5)
        assert found is not None
        return found

    def test_add_needs_every_flag_present_in_any_case(self) -> None:
        attrs = self.attrs(b"1 FETCH (UID 5 FLAGS (\\Seen $label1))")
        assert postcondition_met(attrs, "add", ["\\Seen", "$Label1"])
        assert not postcondition_met(attrs, "add", ["\\Seen", "\\Flagged"])

    def test_remove_needs_every_flag_absent(self) -> None:
        attrs = self.attrs(b"1 FETCH (UID 5 FLAGS (\\Seen))")
        assert postcondition_met(attrs, "remove", ["\\Flagged"])
        assert not postcondition_met(attrs, "remove", ["\\seen", "\\Flagged"])

    def test_missing_flags_item_reads_as_no_flags(self) -> None:
        attrs = self.attrs(b"1 FETCH (UID 5 MODSEQ (9))")
        assert [] == flag_names(attrs)
        assert not postcondition_met(attrs, "add", ["\\Seen"])


class TestMessageAttrs:
    """A STORE answer may hold FETCH data of other messages; only the UID counts."""

    def test_data_of_another_uid_or_without_uid_is_ignored(self) -> None:
        response = ok_with(
            b"Store completed.", b"3 FETCH (FLAGS (\\Seen))", b"4 FETCH (UID 6 FLAGS ())"
        )
        assert message_attrs(response, 5) is None

    def test_the_last_data_for_the_uid_wins(self) -> None:
        response = ok_with(
            b"Store completed.",
            b"1 FETCH (UID 5 MODSEQ (9) FLAGS (\\Seen))",
            b"1 FETCH (UID 5 MODSEQ (11) FLAGS (\\Seen \\Flagged))",
        )
        attrs = message_attrs(response, 5)
        assert attrs is not None
        assert ["\\Seen", "\\Flagged"] == flag_names(attrs)
