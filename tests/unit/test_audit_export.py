"""The export's manifest and trailer as replay reads them: each kind of damage its own finding."""

from __future__ import annotations

import msgspec

from ledger.audit.export import completeness_findings, read_export
from ledger.audit.manifest import Binder, ExportRules, Manifest, Trailer, trailer_mac
from ledger.audit.report import Checked, build_report, macs_state, render_text
from ledger.audit.summary import LedgerAudit
from ledger.chain import mac_key_id
from support.ledger import ACCEPTED, ATTEMPT, COMMIT, PID, chain, claimed, prepared

KEY = bytes(range(32))
OTHER = bytes(range(1, 33))


def export_lines(key: bytes | None = KEY) -> list[bytes]:
    """A one-send export as `angelos ledger export` writes it."""
    entries = chain([prepared(), claimed(), ATTEMPT, COMMIT, ACCEPTED], key=key)
    manifest = Manifest(
        namespace="angelos", exported_ms=1, streams=1, index_entries=5,
        mac_key_id="" if key is None else mac_key_id(key),
        rules=ExportRules(recovery_grace_ms=900_000, retention_ms=604_800_000),
    )  # fmt: skip
    lines = [msgspec.json.encode(manifest), *(msgspec.json.encode(e) for e in entries)]
    binder = Binder()
    for line in lines:
        binder.add(line)
    digest = binder.hexdigest()
    trailer = Trailer(
        lines=5, streams=1, events=5, missing=0, sha256=digest,
        mac="" if key is None else trailer_mac(key, digest),
    )  # fmt: skip
    return [*lines, msgspec.json.encode(trailer)]


def found(lines: list[bytes], key: bytes | None = KEY) -> list[str]:
    export = read_export(line + b"\n" for line in lines)
    return [f.kind for f in export.problems + completeness_findings(export, key)]


class TestCompleteness:
    def test_an_untouched_export_has_no_finding(self) -> None:
        assert [] == found(export_lines())

    def test_a_cut_trailer_is_a_truncated_export(self) -> None:
        assert ["export_truncated"] == found(export_lines()[:-1])

    def test_a_removed_event_line_is_named(self) -> None:
        lines = export_lines()
        assert ["export_events_removed"] == found([*lines[:3], *lines[4:]])

    def test_a_removed_send_is_named(self) -> None:
        lines = export_lines()
        assert ["export_send_removed"] == found([lines[0], lines[-1]])

    def test_a_changed_line_breaks_the_digest(self) -> None:
        lines = export_lines()
        lines[2] = lines[2].replace(b'"srv_ms":', b'"srv_ms":1')
        assert ["export_altered"] == found(lines)

    def test_a_line_after_the_trailer_is_a_finding(self) -> None:
        lines = export_lines()
        assert ["export_altered"] == found([*lines, lines[1]])

    def test_a_trailer_recomputed_without_the_key_fails_its_mac(self) -> None:
        lines = export_lines()
        body = [*lines[:2], lines[2].replace(b'"srv_ms":', b'"srv_ms":1'), *lines[3:-1]]
        binder = Binder()
        for line in body:
            binder.add(line)
        trailer = msgspec.json.decode(lines[-1], type=Trailer)
        forged = msgspec.structs.replace(trailer, sha256=binder.hexdigest())
        assert ["export_mac_mismatch"] == found([*body, msgspec.json.encode(forged)])

    def test_an_export_without_manifest_has_nothing_to_be_held_against(self) -> None:
        export = read_export(line + b"\n" for line in export_lines()[1:-1])
        assert (None, []) == (export.manifest, completeness_findings(export, KEY))
        assert 5 == len(export.entries[PID])


class TestWhatWasChecked:
    def test_without_a_key_a_sealed_ledger_is_not_checked(self) -> None:
        assert ("not_checked", "") == macs_state(None, mac_key_id(KEY))

    def test_another_key_is_a_wrong_key(self) -> None:
        assert ("wrong_key", mac_key_id(OTHER)) == macs_state(OTHER, mac_key_id(KEY))

    def test_an_unsealed_ledger_has_no_macs(self) -> None:
        assert ("unsealed", "") == macs_state(None, "")

    def test_a_clean_run_without_the_key_ends_unverified_never_verified(self) -> None:
        checked = Checked(
            source="export", as_of="t", as_of_ms=0, macs="not_checked",
            sealed_key_id=mac_key_id(KEY), completeness="manifest",
        )  # fmt: skip
        report = build_report(LedgerAudit(), checked)
        text = render_text(report)
        assert ("unverified", False) == (report.verdict, "verified: no findings" in text)
        assert text.rstrip().endswith("unverified (MACs not checked)")
