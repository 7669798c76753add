"""Human approval as a ledger fact: the APPROVED state, its needs, and their Lua mirror."""

from __future__ import annotations

import re
from typing import Any, get_args

import msgspec
import pytest

from ledger.audit.checks import AuditRules, audit_stream
from ledger.audit.show import conclusion
from ledger.lifecycle import (
    HALT_BLOCKED,
    OPEN,
    QUARANTINABLE,
    STATES,
    TRANSITIONS,
    UNCLAIMED,
    Lifecycle,
    State,
    advance,
    fold,
    state_after_types,
)
from ledger.projection import project
from ledger.store.ledger_store import prepared_data
from ledger.store.scripts import lifecycle_lua
from schemas.ledger import (
    Event,
    EventRejected,
    InvalidTransition,
    LedgerCorrupt,
    decode_event,
    decode_unclaimed,
    encode_event,
    encode_payload,
)
from schemas.ledger_events import Approved, EventData, Prepared
from schemas.send_policy import ApprovalMode, RequiredApproval, accepts
from support.ledger import (
    APPROVAL_ASKED,
    APPROVAL_DECLINED,
    APPROVED_BY_ELICITATION,
    APPROVED_BY_PASSKEY,
    ATTEMPT,
    EXPIRED,
    NEEDS_APPROVAL,
    OWNER,
    PID,
    QUARANTINED_APPROVAL,
    QUARANTINED_PREPARATION,
    T0,
    TTL_MS,
    actor_for,
    approved,
    build_events,
    chain,
    claimed,
    payload,
    prepared,
)

# Written from the design, independently of schemas/send_policy.py: which way of approving
# satisfies what a preparation requires.
SATISFIES: dict[tuple[str, str], bool] = {
    ("elicitation", "elicitation"): True,
    ("elicitation", "passkey"): False,
    ("passkey", "elicitation"): False,
    ("passkey", "passkey"): True,
    ("elicitation_or_passkey", "elicitation"): True,
    ("elicitation_or_passkey", "passkey"): True,
}
REQUIRED: tuple[RequiredApproval, ...] = ("elicitation", "passkey", "elicitation_or_passkey")
MODES: tuple[ApprovalMode, ...] = ("elicitation", "passkey")
LATE = T0 + 10_000_000  # past every preparation's deadline here
EITHER = prepared(approval="elicitation_or_passkey")  # NEEDS_APPROVAL takes elicitation only


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


def folded(*items: EventData) -> Lifecycle:
    return fold([event(data, seq) for seq, data in enumerate(items, start=1)])


def then(
    lifecycle: Lifecycle, data: EventData, actor: str | None = None, srv_ms: int | None = None
) -> Lifecycle:
    return advance(lifecycle, event(data, lifecycle.lifecycle_events + 1, actor), srv_ms)


class TestApproval:
    def test_the_policy_check_is_the_designed_table(self) -> None:
        assert SATISFIES == {(r, m): accepts(r, m) for r in REQUIRED for m in MODES}

    def test_a_preparation_requiring_nothing_cannot_be_approved(self) -> None:
        for data in (APPROVED_BY_ELICITATION, APPROVED_BY_PASSKEY):
            with pytest.raises(InvalidTransition, match="requires no approval of this kind"):
                then(folded(prepared()), data)

    @pytest.mark.parametrize(("required", "mode"), sorted(SATISFIES))
    def test_only_an_accepted_mode_approves(self, required: RequiredApproval, mode: str) -> None:
        current = folded(prepared(approval=required))
        data = approved(mode)  # type: ignore[arg-type]
        if SATISFIES[(required, mode)]:
            after = then(current, data)
            assert ("APPROVED", data, "approved") == (
                after.state, after.approved, after.last_lifecycle_type
            )  # fmt: skip
        else:
            with pytest.raises(InvalidTransition) as caught:
                then(current, data)
            assert ("PREPARED", "approved") == (caught.value.state, caught.value.event_type)

    @pytest.mark.parametrize(
        "actor", ["dispatcher:x", "recovery:worker-1", "sweeper:w", "operator:alice", "apix:1"]
    )
    def test_only_the_service_records_an_approval(self, actor: str) -> None:
        with pytest.raises(InvalidTransition, match="only the service"):
            then(folded(NEEDS_APPROVAL), APPROVED_BY_ELICITATION, actor)

    def test_an_approval_is_recorded_once(self) -> None:
        current = folded(NEEDS_APPROVAL, APPROVED_BY_ELICITATION)
        with pytest.raises(InvalidTransition):
            then(current, APPROVED_BY_ELICITATION)

    def test_approval_requests_and_refusals_only_annotate(self) -> None:
        current = folded(NEEDS_APPROVAL)
        for data in (APPROVAL_ASKED, APPROVAL_DECLINED, APPROVAL_ASKED):
            current = then(current, data)
        assert ("PREPARED", 3, None) == (current.state, current.annotations, current.approved)
        assert "APPROVED" == then(current, APPROVED_BY_ELICITATION).state


class TestClaim:
    @pytest.mark.parametrize("required", REQUIRED)
    def test_a_preparation_requiring_approval_is_not_claimed_without_it(
        self, required: RequiredApproval
    ) -> None:
        with pytest.raises(InvalidTransition, match="requires an approval first"):
            then(folded(prepared(approval=required)), claimed())

    def test_a_preparation_requiring_nothing_is_claimed_at_once(self) -> None:
        assert "CLAIMED" == then(folded(prepared()), claimed()).state

    def test_an_approved_preparation_is_claimed_and_keeps_its_approval(self) -> None:
        after = then(folded(NEEDS_APPROVAL, APPROVED_BY_ELICITATION), claimed(), srv_ms=T0 + 5)
        assert ("CLAIMED", APPROVED_BY_ELICITATION, T0 + 5) == (
            after.state, after.approved, after.claimed_srv_ms
        )  # fmt: skip
        assert "ATTEMPTING" == then(after, ATTEMPT).state

    def test_an_approved_preparation_is_claimed_once(self) -> None:
        after = then(folded(NEEDS_APPROVAL, APPROVED_BY_ELICITATION), claimed())
        with pytest.raises(InvalidTransition):
            then(after, claimed())

    def test_annotations_between_approval_and_claim_change_nothing(self) -> None:
        current = folded(NEEDS_APPROVAL, APPROVAL_ASKED, APPROVED_BY_ELICITATION)
        current = then(current, APPROVAL_DECLINED)  # a late refusal cannot undo the approval
        assert "CLAIMED" == then(current, claimed()).state


class TestExpiryAndQuarantine:
    def test_an_approved_preparation_expires_only_at_its_deadline(self) -> None:
        current = folded(NEEDS_APPROVAL, APPROVED_BY_ELICITATION)
        deadline = NEEDS_APPROVAL.expires_ms
        with pytest.raises(InvalidTransition, match="before the preparation deadline"):
            then(current, EXPIRED, srv_ms=deadline - 1)
        assert "EXPIRED" == then(current, EXPIRED, srv_ms=deadline).state

    def test_an_unapproved_preparation_requiring_approval_expires_too(self) -> None:
        assert "EXPIRED" == then(folded(NEEDS_APPROVAL), EXPIRED, srv_ms=LATE).state

    def test_an_approved_preparation_is_quarantined_as_approved(self) -> None:
        current = folded(NEEDS_APPROVAL, APPROVED_BY_ELICITATION)
        with pytest.raises(InvalidTransition):
            then(current, QUARANTINED_PREPARATION)
        with pytest.raises(InvalidTransition):
            then(current, QUARANTINED_APPROVAL, "dispatcher:x")
        assert "UNKNOWN" == then(current, QUARANTINED_APPROVAL).state

    def test_the_state_sets_know_approved(self) -> None:
        assert frozenset({"PREPARED", "APPROVED"}) == UNCLAIMED
        assert UNCLAIMED | {"CLAIMED", "ATTEMPTING", "COMMITTED", "FILING"} == OPEN
        assert {"PREPARED", "APPROVED", "CLAIMED", "ATTEMPTING", "COMMITTED"} == QUARANTINABLE
        assert "approved" in HALT_BLOCKED
        assert "APPROVED" in STATES


class TestTypeOnlyFold:
    @pytest.mark.parametrize(
        "items",
        [
            (NEEDS_APPROVAL, APPROVED_BY_ELICITATION),
            (NEEDS_APPROVAL, APPROVAL_ASKED, APPROVED_BY_ELICITATION, claimed(), ATTEMPT),
            (EITHER, APPROVED_BY_PASSKEY, QUARANTINED_APPROVAL),
            (prepared(approval="passkey"), APPROVED_BY_PASSKEY, EXPIRED),
        ],
        ids=["approved", "claimed", "quarantined", "expired"],
    )
    def test_the_type_only_fold_agrees_with_the_full_fold(
        self, items: tuple[EventData, ...]
    ) -> None:
        full = fold([event(d, n) for n, d in enumerate(items, start=1)], [LATE] * len(items))
        assert full.state == state_after_types([d.TYPE for d in items])

    def test_the_type_only_fold_refuses_an_approval_out_of_place(self) -> None:
        for types in (["approved"], ["prepared", "claimed", "approved"], ["prepared"] * 2):
            with pytest.raises(InvalidTransition):
                state_after_types(types)


def lua_set(rendered: str, name: str) -> set[str]:
    row = next(line for line in rendered.splitlines() if line.startswith(f"local {name} = "))
    return set(re.findall(r"\['([^']*)'\] = true", row))


class TestLuaMirror:
    def test_unclaimed_is_rendered_exactly(self) -> None:
        assert {"PREPARED", "APPROVED"} == lua_set(lifecycle_lua(), "UNCLAIMED")

    def test_accepts_holds_exactly_the_pairs_the_policy_allows(self) -> None:
        rendered = lua_set(lifecycle_lua(), "ACCEPTS")
        assert {f"{r}|{m}" for (r, m), ok in SATISFIES.items() if ok} == rendered
        assert {
            f"{r}|{m}"
            for r in get_args(RequiredApproval)
            for m in get_args(ApprovalMode)
            if accepts(r, m)
        } == rendered

    def test_the_approval_needs_are_rendered_for_the_scripts(self) -> None:
        rendered = lifecycle_lua()
        assert "  ['PREPARED|approved'] = 'approval'," in rendered
        assert "  ['PREPARED|claimed'] = 'unapproved'," in rendered
        assert "  ['APPROVED|claimed'] = 'CLAIMED'," in rendered
        assert "['APPROVED|claimed'] = '" not in rendered.split("local NEED = {")[1]
        assert "approved" in lua_set(rendered, "HALT_BLOCKED")

    def test_every_need_of_the_table_is_one_the_append_or_claim_script_knows(self) -> None:
        needs = {rule.need for rule in TRANSITIONS.values() if rule.need}
        assert {"approval", "unapproved"} <= needs


class TestEncoding:
    @pytest.mark.parametrize(
        "data", [NEEDS_APPROVAL, APPROVED_BY_ELICITATION, APPROVED_BY_PASSKEY, APPROVAL_ASKED]
    )
    def test_the_new_data_round_trips_byte_for_byte(self, data: EventData) -> None:
        raw = encode_event(event(data, 1))
        assert raw == encode_event(decode_event(raw))

    def test_an_approval_from_a_client_that_named_no_protocol_is_recorded(self) -> None:
        data = msgspec.structs.replace(APPROVED_BY_ELICITATION, protocol="", client_name="")
        assert b'"protocol":""' in encode_event(event(data, 2))

    def test_the_required_approval_is_frozen_into_prepared(self) -> None:
        raw = encode_event(event(NEEDS_APPROVAL, 1))
        assert b'"approval":"elicitation"' in raw
        assert b'"approval"' not in encode_event(event(prepared(), 1))

    @pytest.mark.parametrize(
        "change",
        [
            {"client_name": 'a"b'},
            {"client_version": "caf\u00e9"},
            {"protocol": "June 2025"},
            {"shown_sha256": "A7" * 32},
            {"mode": "password"},
        ],
    )
    def test_an_approval_outside_its_alphabet_is_refused(self, change: dict[str, str]) -> None:
        data = msgspec.structs.replace(APPROVED_BY_ELICITATION, **change)
        with pytest.raises(EventRejected):
            encode_event(event(data, 2))

    def test_an_unknown_way_of_requiring_approval_is_refused(self) -> None:
        data = msgspec.structs.replace(NEEDS_APPROVAL, approval="off")
        with pytest.raises(EventRejected):
            encode_event(event(data, 1))

    def test_approved_is_its_own_lifecycle_event(self) -> None:
        assert isinstance(APPROVED_BY_PASSKEY, Approved)
        assert ("passkey", "c8" * 32) == (
            APPROVED_BY_PASSKEY.mode, APPROVED_BY_PASSKEY.credential_sha256
        )  # fmt: skip


class TestWhatItMeans:
    def test_an_approved_preparation_is_prepared_to_its_owner(self) -> None:
        entries = chain([NEEDS_APPROVAL, APPROVAL_ASKED, APPROVED_BY_ELICITATION])
        answer = project(entries, OWNER, T0 + 10)
        assert ("prepared", "elicitation") == (answer.status, answer.approval)

    def test_a_preparation_still_awaiting_approval_says_so(self) -> None:
        answer = project(chain([NEEDS_APPROVAL, APPROVAL_ASKED]), OWNER, T0 + 10)
        assert ("prepared", "required") == (answer.status, answer.approval)

    def test_an_approved_preparation_past_its_deadline_is_expired(self) -> None:
        entries = chain([NEEDS_APPROVAL, APPROVED_BY_ELICITATION])
        assert "expired" == project(entries, OWNER, T0 + TTL_MS).status

    def test_an_approved_claim_is_sending(self) -> None:
        entries = chain([EITHER, APPROVED_BY_PASSKEY, claimed()])
        assert ("sending", "passkey") == (
            (answer := project(entries, OWNER, T0 + 10)).status, answer.approval
        )  # fmt: skip

    def test_the_audit_says_nothing_was_sent_by_an_approved_preparation(self) -> None:
        said = conclusion(folded(NEEDS_APPROVAL, APPROVED_BY_ELICITATION))
        assert "nothing was sent" in said and "approved" in said
        assert said != conclusion(folded(NEEDS_APPROVAL))

    @pytest.mark.parametrize("state", ["PREPARED", "APPROVED"])
    def test_an_unclaimed_conclusion_never_claims_a_send(self, state: State) -> None:
        items = [EITHER] if state == "PREPARED" else [EITHER, APPROVED_BY_PASSKEY]
        said = conclusion(folded(*items))
        assert "never claimed" in said and "nothing was sent by this service" in said

    @pytest.mark.parametrize(
        ("items", "actors", "why"),
        [
            ((NEEDS_APPROVAL, claimed()), None, "requires an approval first"),
            ((prepared(), APPROVED_BY_ELICITATION), None, "requires no approval"),
            ((NEEDS_APPROVAL, APPROVED_BY_PASSKEY), None, "requires no approval"),
            ((NEEDS_APPROVAL, APPROVED_BY_ELICITATION), ("api:1", "dispatcher:x"), "only the"),
        ],
        ids=["claim-unapproved", "approval-not-required", "wrong-mode", "wrong-actor"],
    )
    def test_verify_reports_a_claim_or_approval_the_table_refuses(
        self, items: tuple[EventData, ...], actors: tuple[str, ...] | None, why: str
    ) -> None:
        rules = AuditRules(grace_ms=1_000, as_of_ms=T0 + 10_000, retention_ms=3_600_000)
        pid = "f" * 32
        [finding] = audit_stream(pid, chain(items, pid=pid, actors=actors), rules).findings
        assert (2, "invalid_transition") == (finding.seq, finding.kind)
        assert why in finding.detail

    def test_the_chain_builder_signs_approvals_as_the_service(self) -> None:
        events = build_events([NEEDS_APPROVAL, APPROVAL_ASKED, APPROVED_BY_ELICITATION])
        assert {"api:test-1"} == {e.actor for e, _, _ in events}


class TestUnclaimedPayload:
    """What the approval prompt and page show is the payload its `prepared` event names."""

    def stored(self, **changes: Any) -> tuple[bytes, Prepared]:
        blob = encode_payload(payload(PID, created_ms=T0))
        prepared = prepared_data(payload(PID, created_ms=T0), blob)
        return encode_payload(payload(PID, created_ms=T0, **changes)), prepared

    def test_the_prepared_payload_decodes(self) -> None:
        blob, prepared = self.stored()
        assert PID == decode_unclaimed(blob, PID, prepared).pid

    @pytest.mark.parametrize("change", [{"owner": "f" * 64}, {"digest": "e" * 64}])
    def test_other_bytes_are_refused(self, change: dict[str, str]) -> None:
        blob, prepared = self.stored(**change)
        with pytest.raises(LedgerCorrupt):
            decode_unclaimed(blob, PID, prepared)

    def test_the_payload_of_another_id_is_refused(self) -> None:
        blob, prepared = self.stored()
        with pytest.raises(LedgerCorrupt):
            decode_unclaimed(blob, "a" * 32, prepared)
