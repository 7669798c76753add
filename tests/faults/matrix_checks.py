"""The checks both fault matrices make of a run (tests/faults/matrix.py), whatever the
transport: mixins for the test classes of test_fault_matrix.py and test_graph_fault_matrix.py,
which add their transport's own checks. Not a test file, so tests/faults/conftest.py has pytest
rewrite its asserts as in one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import pytest
from faults.matrix import Matrix, Row

from schemas.ledger_events import ANNOTATION_TYPES


def by_row(rows: Sequence[Row]) -> pytest.MarkDecorator:
    """Parametrise a test (or a test class) by `row`, one id per row name."""
    return pytest.mark.parametrize("row", rows, ids=[r.name for r in rows])


class EveryLedgerStep:
    """The checks of every row, whatever the transport: a test class parametrised with
    `by_row(ROWS)` mixes them in beside its transport's own."""

    def test_the_projected_status_is_the_conservative_one(
        self, matrix: Matrix[Any], row: Row
    ) -> None:
        outcome = matrix.reached(row)
        expected = row.projected
        assert expected == {k: outcome.status.get(k) for k in expected}, outcome.types
        if "recovered" in expected:  # a send recovery closed names recovery as its actor
            assert "recovery" == outcome.recovered_by

    def test_a_reconfirm_replays_and_nothing_is_resent(self, matrix: Matrix[Any], row: Row) -> None:
        outcome = matrix.reached(row)
        assert False is outcome.replay.get("resent"), outcome.replay
        assert outcome.status["status"] == outcome.replay["status"]

    def test_the_lifecycle_ends_where_recovery_put_it(self, matrix: Matrix[Any], row: Row) -> None:
        outcome = matrix.reached(row)
        lifecycle = [t for t in outcome.types if t not in ANNOTATION_TYPES]
        closing = [t for t, count in row.closing.items() if count]
        assert closing == lifecycle[-len(closing) :], lifecycle
        assert row.closing == {t: outcome.types.count(t) for t in row.closing}


class DiedWaiting:
    """The checks of a row whose send died or stopped waiting for the transport (mixed into a
    test class parametrised with the queued rows)."""

    def test_the_ledger_shows_the_wait_and_no_attempt_marker(
        self, matrix: Matrix[Any], row: Row
    ) -> None:
        outcome = matrix.reached(row)
        assert "dispatch_queued" in outcome.types
        assert "smtp_attempt_started" not in outcome.types


class AroundRecovery:
    """The checks of the CLI answers around recovery. A test class mixes them in and sets
    `rows` to its table: the checks that take `row` run for each kill row."""

    rows: ClassVar[Sequence[Row]]

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Parametrise `row` with the kill rows (pytest calls this for every test of the class)."""
        if "row" in metafunc.fixturenames:
            killed = [r for r in self.rows if r.mode == "exit"]
            metafunc.parametrize("row", killed, ids=[r.name for r in killed])

    def test_show_concludes_what_the_last_durable_step_proves(
        self, matrix: Matrix[Any], row: Row
    ) -> None:
        said = matrix.shown[row.name]["conclusion"]
        if row.status == "rejected":
            assert "provably" in said and "may have" not in said, said
        else:
            assert "may have been" in said or "accepted" in said, said
            assert "provably" not in said, said
        assert "resend" not in said.replace("never resend", ""), said

    def test_recovery_inside_the_grace_touches_nothing(self, matrix: Matrix[Any]) -> None:
        assert [] == [d for d in matrix.dry_run["decisions"] if d["action"] != "too_early"]

    def test_the_incident_queue_lists_the_abandoned_claims(self, matrix: Matrix[Any]) -> None:
        listed = {item["prepared_id"] for item in matrix.queue["sends"]}
        # A send killed during its Sent filing (SMTP) is already `accepted`, and recovery closes
        # only the filing: it is not in the sending queue.
        abandoned = {o.pid for o in matrix.killed() if o.row.closing.get("recovery_classified")}
        assert abandoned <= listed

    def test_the_cli_recovery_closed_every_killed_dispatch(self, matrix: Matrix[Any]) -> None:
        decided = {d["pid"] for d in matrix.recovers[0]["decisions"] if d["action"] == "classified"}
        killed = {pid for o in matrix.killed() for pid in (o.pid, *o.holder_pids)}
        assert killed == decided

    @pytest.mark.parametrize("mode", ["exit", "stop"])
    def test_verify_passes_on_every_stream_the_matrix_produced(
        self, matrix: Matrix[Any], mode: str
    ) -> None:
        report = matrix.verify[mode]
        assert (True, []) == (report["ok"], report["findings"])

    def test_the_whole_matrix_fits_in_a_few_minutes(self, matrix: Matrix[Any]) -> None:
        assert matrix.elapsed_s < 240
