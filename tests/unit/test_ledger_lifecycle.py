"""The lifecycle state machine, checked against a table written independently of the code."""

from __future__ import annotations

import itertools

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.lifecycle import (
    AWAITS_EVIDENCE,
    STATES,
    TRANSITIONS,
    Lifecycle,
    State,
    advance,
    fold,
    state_after_types,
)
from ledger.store.scripts import lifecycle_lua
from schemas.ledger import Event, InvalidTransition, LedgerCorrupt
from schemas.ledger_events import ANNOTATION_TYPES, EVENT_TYPES, EventData, OperatorResolution
from support.ledger import (
    ABORTED,
    ABORTED_BEFORE_TERMINATOR,
    ACCEPTED,
    APPROVED_BY_ELICITATION,
    ATTEMPT,
    BODY_WRITE_FAILED,
    COMMIT,
    EVIDENCE,
    FILING_FAILED,
    FILING_SAVED,
    FILING_STARTED,
    GRAPH_REJECTION,
    GRAPH_UNKNOWN,
    NEEDS_APPROVAL,
    NOT_ATTEMPTED_REJECTION,
    PATHS,
    PID,
    QUARANTINED_APPROVAL,
    QUARANTINED_ATTEMPT,
    QUARANTINED_CLAIM,
    QUARANTINED_COMMIT,
    QUARANTINED_PREPARATION,
    RECOVERED_NOT_ATTEMPTED,
    RECOVERED_NOT_SUBMITTED,
    RECOVERED_UNKNOWN,
    REJECTED_ACK,
    REJECTED_ENVELOPE,
    SAMPLES,
    T0,
    UNKNOWN,
    VARIANTS,
    actor_for,
    claimed,
    prepared,
)

# Written from the design's transition table, independently of ledger/lifecycle.py.
EXPECTED: dict[tuple[str, str], str] = {
    ("NONE", "prepared"): "PREPARED",
    # Straight to the claim only when the preparation requires no approval (see CONDITIONAL).
    ("PREPARED", "claimed"): "CLAIMED",
    ("PREPARED", "expired"): "EXPIRED",
    # A person's approval, only of a preparation that requires one; then the claim, or expiry.
    ("PREPARED", "approved"): "APPROVED",
    ("APPROVED", "claimed"): "CLAIMED",
    ("APPROVED", "expired"): "EXPIRED",
    ("CLAIMED", "dispatch_aborted"): "REJECTED",
    ("CLAIMED", "smtp_attempt_started"): "ATTEMPTING",
    ("CLAIMED", "recovery_classified"): "REJECTED",
    ("ATTEMPTING", "smtp_rejected"): "REJECTED",
    ("ATTEMPTING", "smtp_commit_point"): "COMMITTED",
    ("ATTEMPTING", "recovery_classified"): "REJECTED",
    ("COMMITTED", "smtp_accepted"): "ACCEPTED",
    ("COMMITTED", "smtp_rejected"): "REJECTED",
    ("COMMITTED", "smtp_outcome_unknown"): "UNKNOWN",
    ("COMMITTED", "recovery_classified"): "UNKNOWN",
    ("ACCEPTED", "sent_filing_started"): "FILING",
    ("FILING", "sent_filing_succeeded"): "FILED",
    ("FILING", "sent_filing_failed"): "FILED",
    ("PREPARED", "rollback_quarantined"): "UNKNOWN",
    ("APPROVED", "rollback_quarantined"): "UNKNOWN",
    ("CLAIMED", "rollback_quarantined"): "UNKNOWN",
    ("ATTEMPTING", "rollback_quarantined"): "UNKNOWN",
    ("COMMITTED", "rollback_quarantined"): "UNKNOWN",
    # The provider's own Sent copy settles an unknown send as accepted, and nothing else.
    ("UNKNOWN", "outcome_evidence"): "EVIDENCED",
    # An operator's resolution settles nothing new: only settled sends take one, unchanged.
    ("ACCEPTED", "operator_resolution"): "ACCEPTED",
    ("FILED", "operator_resolution"): "FILED",
    ("REJECTED", "operator_resolution"): "REJECTED",
    ("UNKNOWN", "operator_resolution"): "UNKNOWN",
    ("EVIDENCED", "operator_resolution"): "EVIDENCED",
    ("EXPIRED", "operator_resolution"): "EXPIRED",
}


# The variants allowed in each valid (state, type) pair; all others must be refused.
ALLOWED_VARIANTS: dict[tuple[str, str], tuple[EventData, ...]] = {
    ("CLAIMED", "recovery_classified"): (RECOVERED_NOT_ATTEMPTED,),
    ("ATTEMPTING", "recovery_classified"): (RECOVERED_NOT_SUBMITTED,),
    ("COMMITTED", "recovery_classified"): (RECOVERED_UNKNOWN, GRAPH_UNKNOWN),
    ("ATTEMPTING", "smtp_rejected"): (
        REJECTED_ENVELOPE,
        ABORTED_BEFORE_TERMINATOR,
        NOT_ATTEMPTED_REJECTION,
        BODY_WRITE_FAILED,
    ),
    ("COMMITTED", "smtp_rejected"): (REJECTED_ACK, ABORTED_BEFORE_TERMINATOR, GRAPH_REJECTION),
    ("PREPARED", "rollback_quarantined"): (QUARANTINED_PREPARATION,),
    ("APPROVED", "rollback_quarantined"): (QUARANTINED_APPROVAL,),
    ("CLAIMED", "rollback_quarantined"): (QUARANTINED_CLAIM,),
    # The preparation on the way (NEEDS_APPROVAL) requires an approval by elicitation.
    ("PREPARED", "approved"): (APPROVED_BY_ELICITATION,),
    ("ATTEMPTING", "rollback_quarantined"): (QUARANTINED_ATTEMPT,),
    ("COMMITTED", "rollback_quarantined"): (QUARANTINED_COMMIT,),
}


# Two transitions out of PREPARED depend on what the preparation requires: an approval is taken
# only by one that requires it, a claim straight away only by one that does not. Each is tried
# from the preparation it fits; the other preparation must refuse it.
CONDITIONAL: dict[tuple[str, str], tuple[EventData, EventData]] = {
    ("PREPARED", "approved"): (NEEDS_APPROVAL, prepared()),
    ("PREPARED", "claimed"): (prepared(), NEEDS_APPROVAL),
}


def path_to(state: State, event_type: str = "") -> tuple[EventData, ...]:
    """The path into `state` from which `event_type` is tried."""
    fits = CONDITIONAL.get((state, event_type))
    return PATHS[state] if fits is None else (fits[0],)


def lifecycle_in(state: State, event_type: str = "") -> Lifecycle:
    path = path_to(state, event_type)
    return fold(events_for(path), [T0 + n for n in range(1, len(path) + 1)])


def events_for(items: tuple[EventData, ...] | list[EventData], start: int = 1) -> list[Event]:
    return [event(data, seq) for seq, data in enumerate(items, start=start)]


def event(data: EventData, seq: int, actor: str | None = None) -> Event:
    return Event(
        pid="0" * 32,
        seq=seq,
        type=data.TYPE,  # type: ignore[arg-type]
        eid=f"{seq:032x}",
        prev="0" * 64,
        at_ms=T0 + seq,
        actor=actor or actor_for(data),
        data=data,
    )


def step(state: State, data: EventData, *, srv_ms: int | None = None) -> Lifecycle:
    current = lifecycle_in(state, data.TYPE)
    seq = len(path_to(state, data.TYPE)) + 1
    return advance(current, event(data, seq), srv_ms)


class TestValidTransitions:
    @pytest.mark.parametrize(("state", "event_type"), sorted(EXPECTED))
    def test_every_valid_transition_reaches_its_state(self, state: State, event_type: str) -> None:
        for data in ALLOWED_VARIANTS.get((state, event_type), VARIANTS[event_type][:1]):
            srv_ms = T0 + 10_000_000 if event_type == "expired" else None
            assert EXPECTED[(state, event_type)] == step(state, data, srv_ms=srv_ms).state

    def test_the_implementation_table_is_exactly_the_spec_table(self) -> None:
        actual = {pair: rule.to for pair, rule in TRANSITIONS.items()}
        assert EXPECTED == actual

    @pytest.mark.parametrize("state", [s for s in STATES if s != "NONE"])
    @pytest.mark.parametrize("annotation", sorted(ANNOTATION_TYPES))
    def test_annotations_are_valid_in_every_state_after_prepared_and_change_nothing(
        self, state: State, annotation: str
    ) -> None:
        after = step(state, SAMPLES[annotation])
        assert state == after.state
        assert lifecycle_in(state).annotations + 1 == after.annotations

    def test_the_full_accepted_and_filed_path(self) -> None:
        path = [prepared(), claimed(append_sent=True), ATTEMPT, COMMIT, ACCEPTED]
        lifecycle = fold(events_for([*path, FILING_STARTED, FILING_SAVED]))
        assert "FILED" == lifecycle.state
        assert FILING_SAVED == lifecycle.filing_result
        assert ACCEPTED == lifecycle.terminal


class TestInvalidTransitions:
    @pytest.mark.parametrize(
        ("state", "event_type"),
        [
            pair
            for pair in itertools.product(STATES, sorted(EVENT_TYPES - ANNOTATION_TYPES))
            if pair not in EXPECTED
        ],
    )
    def test_every_other_event_from_every_state_is_refused(
        self, state: State, event_type: str
    ) -> None:
        for data in VARIANTS[event_type]:
            with pytest.raises(InvalidTransition) as caught:
                step(state, data, srv_ms=T0 + 10_000_000)
            assert (state, event_type) == (caught.value.state, caught.value.event_type)

    @pytest.mark.parametrize("pair", sorted(ALLOWED_VARIANTS))
    def test_data_that_does_not_fit_the_state_is_refused(self, pair: tuple[State, str]) -> None:
        state, event_type = pair
        for data in VARIANTS[event_type]:
            if data not in ALLOWED_VARIANTS[pair]:
                with pytest.raises(InvalidTransition):
                    step(state, data)

    @pytest.mark.parametrize("pair", sorted(CONDITIONAL))
    def test_a_conditional_transition_is_refused_from_the_other_preparation(
        self, pair: tuple[State, str]
    ) -> None:
        state, event_type = pair
        _, other = CONDITIONAL[pair]
        current = fold(events_for([other]))
        for data in VARIANTS[event_type]:
            with pytest.raises(InvalidTransition) as caught:
                advance(current, event(data, 2))
            assert (state, event_type) == (caught.value.state, caught.value.event_type)

    @pytest.mark.parametrize(
        "event_type",
        sorted(EVENT_TYPES - ANNOTATION_TYPES - {"approved", "expired", "rollback_quarantined"}),
    )
    def test_a_preparation_requiring_approval_takes_only_approval_expiry_or_quarantine(
        self, event_type: str
    ) -> None:
        current = fold(events_for([NEEDS_APPROVAL]))
        for data in VARIANTS[event_type]:
            with pytest.raises(InvalidTransition):
                advance(current, event(data, 2), T0 + 10_000_000)

    @pytest.mark.parametrize("annotation", sorted(ANNOTATION_TYPES))
    def test_an_annotation_cannot_open_a_stream(self, annotation: str) -> None:
        with pytest.raises(InvalidTransition):
            advance(Lifecycle(), event(SAMPLES[annotation], 1))

    def test_prepared_must_be_seq_1(self) -> None:
        with pytest.raises(InvalidTransition):
            advance(Lifecycle(), event(prepared(), 2))

    def test_expired_before_the_deadline_is_refused(self) -> None:
        deadline = prepared().expires_ms
        with pytest.raises(InvalidTransition):
            step("PREPARED", SAMPLES["expired"], srv_ms=deadline - 1)
        assert "EXPIRED" == step("PREPARED", SAMPLES["expired"], srv_ms=deadline).state

    def test_filing_needs_a_claim_that_asked_for_it(self) -> None:
        path = [prepared(), claimed(append_sent=False), ATTEMPT, COMMIT, ACCEPTED]
        with pytest.raises(InvalidTransition):
            fold(events_for([*path, FILING_STARTED]))

    def test_only_recovery_may_classify(self) -> None:
        current = lifecycle_in("CLAIMED")
        with pytest.raises(InvalidTransition):
            advance(current, event(RECOVERED_NOT_ATTEMPTED, 3, actor="dispatcher:x"))

    def test_only_recovery_may_quarantine(self) -> None:
        current = lifecycle_in("CLAIMED")
        with pytest.raises(InvalidTransition):
            advance(current, event(QUARANTINED_CLAIM, 3, actor="dispatcher:x"))

    def test_terminal_is_final(self) -> None:
        for state in ("REJECTED", "UNKNOWN", "EVIDENCED", "EXPIRED", "FILED"):
            for data in (ACCEPTED, ABORTED, UNKNOWN, COMMIT, FILING_FAILED):
                with pytest.raises(InvalidTransition):
                    step(state, data)  # type: ignore[arg-type]

    def test_an_invalid_transition_is_a_corrupt_ledger_error(self) -> None:
        assert issubclass(InvalidTransition, LedgerCorrupt)


class TestTypeOnlyFold:
    @pytest.mark.parametrize("state", STATES)
    def test_the_type_only_fold_agrees_with_the_full_fold(self, state: State) -> None:
        assert state == state_after_types([d.TYPE for d in PATHS[state]])

    def test_the_type_only_fold_refuses_what_the_table_refuses(self) -> None:
        with pytest.raises(InvalidTransition):
            state_after_types(["prepared", "smtp_accepted"])
        with pytest.raises(InvalidTransition):
            state_after_types(["duplicate_confirm"])


class TestLuaMirror:
    def test_the_lua_tables_list_exactly_the_python_transitions_and_needs(self) -> None:
        rendered = lifecycle_lua()
        next_rows = rendered.split("local NEXT = {\n")[1].split("\n}")[0].splitlines()
        need_rows = rendered.split("local NEED = {\n")[1].split("\n}")[0].splitlines()
        assert sorted(f"  ['{s}|{t}'] = '{r.to}'," for (s, t), r in TRANSITIONS.items()) == sorted(
            next_rows
        )
        assert sorted(
            f"  ['{s}|{t}'] = '{r.need}'," for (s, t), r in TRANSITIONS.items() if r.need
        ) == sorted(need_rows)

    def test_every_guarded_transition_has_a_generated_guard(self) -> None:
        rendered = lifecycle_lua()
        for (state, event_type), rule in TRANSITIONS.items():
            assert (f"  if key == '{state}|{event_type}' then" in rendered) == bool(rule.when)

    def test_the_lua_evidence_set_is_exactly_the_python_one(self) -> None:
        rendered = lifecycle_lua()
        row = next(line for line in rendered.splitlines() if "local AWAITS_EVIDENCE" in line)
        names = {name for name in STATES if f"['{name}'] = true" in row}
        assert AWAITS_EVIDENCE == names

    def test_the_lua_sets_name_every_annotation(self) -> None:
        rendered = lifecycle_lua()
        for annotation in ANNOTATION_TYPES:
            assert f"['{annotation}'] = true" in rendered


# Everything that approves, claims, takes a network step or files a Sent copy.
SENDING_OR_FILING = (
    "prepared", "approved", "claimed", "smtp_attempt_started", "smtp_commit_point", "smtp_accepted",
    "sent_filing_started", "sent_filing_succeeded", "sent_filing_failed",
)  # fmt: skip


class TestEvidence:
    @pytest.mark.parametrize("actor", ["recovery:worker-1", "operator:alice"])
    def test_recovery_or_an_operator_may_record_evidence_of_an_unknown_send(
        self, actor: str
    ) -> None:
        current = lifecycle_in("UNKNOWN")
        after = advance(current, event(EVIDENCE, current.lifecycle_events + 1, actor))
        assert ("EVIDENCED", EVIDENCE, UNKNOWN) == (after.state, after.evidence, after.terminal)

    @pytest.mark.parametrize("actor", ["dispatcher:x", "api:test-1", "sweeper:w"])
    def test_nobody_else_may_record_evidence(self, actor: str) -> None:
        current = lifecycle_in("UNKNOWN")
        with pytest.raises(InvalidTransition, match="only recovery or an operator"):
            advance(current, event(EVIDENCE, current.lifecycle_events + 1, actor))

    @pytest.mark.parametrize(
        "quarantine",
        [
            QUARANTINED_PREPARATION,
            QUARANTINED_APPROVAL,
            QUARANTINED_CLAIM,
            QUARANTINED_ATTEMPT,
            QUARANTINED_COMMIT,
        ],
    )
    def test_a_send_quarantined_as_unknown_after_a_rollback_may_take_evidence(
        self, quarantine: EventData
    ) -> None:
        path = {
            "prepared": PATHS["PREPARED"],
            "approved": PATHS["APPROVED"],
            "claimed": PATHS["CLAIMED"],
            "smtp_attempt_started": PATHS["ATTEMPTING"],
            "smtp_commit_point": PATHS["COMMITTED"],
        }[quarantine.last_lifecycle_type]  # type: ignore[union-attr]
        assert "EVIDENCED" == fold(events_for([*path, quarantine, EVIDENCE])).state

    @pytest.mark.parametrize("state", [s for s in STATES if s != "UNKNOWN"])
    def test_evidence_is_refused_in_every_state_but_unknown(self, state: State) -> None:
        with pytest.raises(InvalidTransition):
            step(state, EVIDENCE)

    @pytest.mark.parametrize("event_type", SENDING_OR_FILING)
    def test_evidence_can_never_be_followed_by_a_claim_a_network_step_or_a_filing(
        self, event_type: str
    ) -> None:
        for data in VARIANTS[event_type]:
            with pytest.raises(InvalidTransition):
                step("EVIDENCED", data, srv_ms=T0 + 10_000_000)

    def test_evidence_is_recorded_once(self) -> None:
        with pytest.raises(InvalidTransition):
            step("EVIDENCED", EVIDENCE)

    def test_a_resolution_after_evidence_leaves_it_evidenced(self) -> None:
        after = step("EVIDENCED", SAMPLES["operator_resolution"])
        assert ("EVIDENCED", 1) == (after.state, len(after.resolutions))

    def test_only_unknown_awaits_evidence(self) -> None:
        assert frozenset({"UNKNOWN"}) == AWAITS_EVIDENCE

    def test_the_fold_keeps_the_commit_point_the_evidence_is_compared_with(self) -> None:
        lifecycle = lifecycle_in("EVIDENCED")
        assert COMMIT == lifecycle.commit


ANY_DATA = st.sampled_from([d for variants in VARIANTS.values() for d in variants])


class TestProperties:
    @settings(max_examples=300)
    @given(st.lists(ANY_DATA, max_size=10), st.lists(st.booleans(), max_size=10))
    def test_random_sequences_fold_to_a_state_or_raise_invalid_transition(
        self, items: list[EventData], recovery: list[bool]
    ) -> None:
        events = [
            event(d, n, "recovery:w" if n <= len(recovery) and recovery[n - 1] else None)
            for n, d in enumerate(items, start=1)
        ]
        try:
            lifecycle = fold(events, [T0 + 10_000_000] * len(events))
        except InvalidTransition:
            return
        assert lifecycle.state in STATES
        assert lifecycle.state == state_after_types([e.type for e in events])

    @given(st.sampled_from(["REJECTED", "UNKNOWN", "EVIDENCED", "EXPIRED", "FILED"]), ANY_DATA)
    def test_after_a_terminal_state_only_annotations_resolutions_and_evidence_are_accepted(
        self, state: State, data: EventData
    ) -> None:
        if data.TYPE in ANNOTATION_TYPES or data.TYPE == "operator_resolution":
            assert state == step(state, data).state
        elif state == "UNKNOWN" and data.TYPE == "outcome_evidence":
            assert "EVIDENCED" == step(state, data).state
        else:
            with pytest.raises(InvalidTransition):
                step(state, data, srv_ms=T0 + 10_000_000)

    def test_a_resolution_by_anyone_but_an_operator_is_refused(self) -> None:
        lifecycle = lifecycle_in("UNKNOWN")
        resolution = SAMPLES["operator_resolution"]
        with pytest.raises(InvalidTransition, match="only an operator"):
            advance(lifecycle, event(resolution, lifecycle.lifecycle_events + 1, "api:test-1"))

    def test_resolutions_are_kept_in_order_and_leave_the_state(self) -> None:
        first = step("UNKNOWN", SAMPLES["operator_resolution"])
        later = OperatorResolution(outcome="not_arrived", note="bounce found", reprepared_as=PID)
        second = advance(first, event(later, first.lifecycle_events + 1, "operator:bob"))
        assert ("UNKNOWN", ("arrived", "not_arrived")) == (
            second.state, tuple(r.outcome for r in second.resolutions)
        )  # fmt: skip

    def test_struct_replace_keeps_lifecycles_immutable(self) -> None:
        first = lifecycle_in("CLAIMED")
        second = advance(first, event(ATTEMPT, 3))
        assert ("CLAIMED", "ATTEMPTING") == (first.state, second.state)
        assert first == msgspec.structs.replace(first)
