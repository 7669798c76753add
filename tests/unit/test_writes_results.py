"""The write results on the wire and how outcomes attach."""

from __future__ import annotations

import json

import msgspec
import pytest

from schemas import errors
from schemas.mailbox import Reference
from schemas.mutations import (
    FlagResult,
    FolderCreated,
    FolderRenamed,
    MutationResult,
    flag_skeleton,
    not_applied,
    outcome_on_error,
    unknown,
)

SOURCE = Reference(folder="INBOX", uid_validity=1712345678, uid=912)
ARCHIVED = Reference(folder="Archive", uid_validity=1700000001, uid=88)


def wire(value: object) -> str:
    return msgspec.json.encode(value).decode()


class TestMutationResult:
    def test_a_copy_with_mapping_lists_source_destination_status_in_order(self) -> None:
        result = MutationResult(source=SOURCE, destination=ARCHIVED, status="copied")
        assert (
            '{"source":{"folder":"INBOX","uid_validity":1712345678,"uid":912},'
            '"destination":{"folder":"Archive","uid_validity":1700000001,"uid":88},'
            '"status":"copied"}'
        ) == wire(result)

    def test_unknown_destination_and_empty_warnings_are_omitted(self) -> None:
        source = json.loads(wire(SOURCE))
        assert {"source": source, "status": "unknown"} == json.loads(wire(unknown(SOURCE)))
        assert {"source": source, "status": "not_applied"} == json.loads(wire(not_applied(SOURCE)))

    def test_a_status_outside_the_spec_list_cannot_be_decoded(self) -> None:
        with pytest.raises(msgspec.ValidationError):
            msgspec.json.decode(b'{"status":"gone"}', type=MutationResult)


class TestFlagResult:
    def test_conditional_is_always_present_and_modseq_is_omitted_when_zero(self) -> None:
        assert {"reference": json.loads(wire(SOURCE)), "flags": [], "conditional": False} == (
            json.loads(wire(flag_skeleton(SOURCE)))
        )

    def test_a_64_bit_modseq_keeps_every_digit(self) -> None:
        result = FlagResult(
            reference=SOURCE, flags=["\\Seen"], modseq=18446744073709551615, conditional=True
        )
        assert '"modseq":18446744073709551615' in wire(result)
        assert 18446744073709551615 == json.loads(wire(result))["modseq"]

    def test_a_skeleton_may_carry_a_warning(self) -> None:
        assert ["careful"] == json.loads(wire(flag_skeleton(SOURCE, "careful")))["warnings"]


class TestFolderResults:
    def test_folder_results_are_single_booleans(self) -> None:
        assert '{"created":true}' == wire(FolderCreated(created=True))
        assert '{"renamed":false}' == wire(FolderRenamed(renamed=False))


class TestOutcomeOnError:
    def test_a_mail_error_gets_the_outcome(self) -> None:
        with pytest.raises(errors.ServiceUnavailable) as caught, outcome_on_error("o"):
            raise errors.ServiceUnavailable()
        assert "o" == caught.value.outcome

    def test_the_innermost_outcome_wins(self) -> None:
        with (
            pytest.raises(errors.OutcomeUnknown) as caught,
            outcome_on_error("outer"),
            outcome_on_error("inner"),
        ):
            raise errors.OutcomeUnknown()
        assert "inner" == caught.value.outcome

    def test_an_outcome_set_at_the_raise_is_kept(self) -> None:
        with pytest.raises(errors.Conflict) as caught, outcome_on_error("outer"):
            raise errors.Conflict(outcome="own")
        assert "own" == caught.value.outcome

    def test_other_exceptions_pass_through_untouched(self) -> None:
        with pytest.raises(ValueError), outcome_on_error("o"):
            raise ValueError("x")
