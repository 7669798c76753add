"""One Markdown page about one send for an incident ticket (`angelos ledger show --report`).

The conclusion, the evidence, the timeline, the outside checks as tick boxes, a letter to the
recipient and how to record the answer. Pure: it renders a Timeline and writes nothing. The
ledger holds no subject, addresses or body, so neither does the page.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from ledger.audit.evidence import Evidence
from ledger.audit.show import Timeline, evidence_lines

RESOLVE_USAGE = "--outcome arrived|not-arrived|unknown --note TEXT [--reprepared-as ID]"


def ticket(view: Timeline) -> str:
    """Render a send's timeline and evidence as a one-page Markdown ticket."""
    evidence = view.evidence
    stage = f" / {view.stage}" if view.stage else ""
    recovered = " (written by recovery)" if view.recovered else ""
    out = [
        f"# Send {view.pid}",
        "",
        f"- **Status:** {view.status}{stage}{recovered}",
        f"- **Conclusion:** {_cell(view.conclusion)}",
    ]
    if view.investigate:
        out.append(f"- **Investigate:** {_cell(view.investigate)}")
    out += ["", "## Evidence", "", "| | |", "| --- | --- |"]
    out += [f"| {label} | {_cell(text)} |" for label, text in _facts(evidence)]
    out += ["", "## Timeline", "", "| seq | server time (UTC) | event | actor | what it proves |"]
    out.append("| ---: | --- | --- | --- | --- |")
    for line in view.events:
        out.append(
            f"| {line.seq} | {line.server_time} | {line.type} | {_cell(line.actor)} "
            f"| {_cell(line.meaning)} |"
        )
    if view.findings:
        out += ["", "## Findings", ""]
        out += [f"- {_cell(finding)}" for finding in view.findings]
        out += ["", "The stream's record itself is in question: see docs/auditing.md first."]
    out += ["", "## Outside checks", "", *_checks(evidence)]
    out += ["", "## Letter to the recipient", "", *_letter(view)]
    out += ["", "## Record the answer", "", *_resolve(view.pid), ""]
    return "\n".join(out)


def _facts(evidence: Evidence) -> list[tuple[str, str]]:
    facts: list[tuple[str, str]] = []
    for label, text in evidence_lines(evidence):
        if label in ("Message-ID", "raw_sha256", "endpoint"):
            head, _, tail = text.partition(" ")
            text = f"{_code(head)} {tail}".rstrip()
        if not label and facts:  # a continuation line belongs to the fact above it
            facts[-1] = (facts[-1][0], f"{facts[-1][1]}: {text}")
            continue
        facts.append((label, text))
    return facts or [("(none)", "the ledger holds no evidence for this send")]


def _checks(evidence: Evidence) -> list[str]:
    mid = _code(evidence.message_id) if evidence.message_id else "(none recorded)"
    when = evidence.may_have_left_at or "the time of the claim in the timeline"
    where = f" at {_code(evidence.endpoint)}" if evidence.endpoint else ""
    digest = _code(evidence.raw_sha256) if evidence.raw_sha256 else "(no commit point: none)"
    return [
        f"- [ ] Look in the Sent folder for Message-ID {mid} (a provider that files sent mail "
        "itself has a copy only if it accepted the message; angelos files its own copy only "
        "after an acceptance): `angelos ledger evidence PREPARED_ID` searches it and records a "
        "copy it finds; finding none proves nothing.",
        f"- [ ] Ask the provider for its submission log or message trace, or search the SMTP "
        f"server's log{where}, for Message-ID {mid} around {when}.",
        f"- [ ] If a provider-side copy turns up, compare its SHA-256 with raw_sha256 {digest} "
        "(the bytes as received, without the trace headers the server added): equal proves it "
        "is this send.",
        "- [ ] Ask the recipient (the letter below).",
    ]


def _letter(view: Timeline) -> list[str]:
    evidence = view.evidence
    moment = evidence.commit_srv_ms
    if moment is None:
        moment = next((line.srv_ms for line in view.events if line.type == "claimed"), None)
    if moment is None:
        moment = view.events[0].srv_ms if view.events else 0
    mid = evidence.message_id or "(none recorded)"
    said = (
        f"On {_human(moment)} we may have sent you a message with Message-ID {mid}. A "
        "technical fault on our side means we cannot tell whether it reached you. Could you "
        "tell us whether it arrived? We will not send it again unless you tell us it did not."
    )
    out: list[str] = []
    if evidence.commit_srv_ms is None:
        out += [
            "The ledger has no commit point for this send, so it never handed the message over "
            "(unless it is still open: see the conclusion); the recipient has nothing to "
            "confirm. If you ask anyway:",
            "",
        ]
    fence = _fence(said)
    return [*out, f"{fence}text", said, fence]


def _resolve(pid: str) -> list[str]:
    fence = "```"
    return [
        "Once you know, record it (this never resends anything and never reopens the send):",
        "",
        f"{fence}sh",
        f"angelos ledger resolve {pid} {RESOLVE_USAGE}",
        fence,
        "",
        "`--note` is your finding in your own words (at most 500 printable ASCII characters, "
        'without `"` or `\\`), never mail content. `--reprepared-as` names the new send if '
        "the owner prepared the message again.",
    ]


def _human(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%d %B %Y at %H:%M:%S UTC")


def _cell(text: str) -> str:
    """Text safe inside one Markdown table cell (or list item): no pipes, no line breaks."""
    return text.replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    """An inline code span that holds `text` verbatim, whatever backticks it contains."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    padded = f" {text} " if longest else text
    return f"{ticks}{padded}{ticks}"


def _fence(text: str) -> str:
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)
