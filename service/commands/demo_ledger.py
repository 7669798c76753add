"""The demo's last part: `angelos ledger show` and `angelos ledger verify`, run as the real CLI.

They run as subprocesses of this interpreter (`python -m service.cli`, the code the `angelos`
console script calls) with the server's own environment, so they read the very store the demo
server wrote to: a Redis named by ANGELOS_REDIS_URL, or the embedded one under
ANGELOS_DATA_DIR, which a second process adopts while the server keeps it running.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Mapping
from typing import Any, Final, TextIO

import msgspec

from service.ledger_cli.common import FINDINGS, UNREACHABLE, UNVERIFIED, USAGE

LEDGER_TIMEOUT_S: Final = 60.0
# What each exit status of `angelos ledger` means, for a newcomer reading the walk-through.
EXIT_MEANINGS: Final = {
    FINDINGS: "findings: the ledger does not check out (docs/auditing.md explains each kind)",
    USAGE: "a usage or configuration problem, named above",
    UNREACHABLE: "the ledger store did not answer",
    UNVERIFIED: (
        "unverified: no findings, but the ledger's MACs could not be checked without its key"
    ),
}


class LedgerAnswer(msgspec.Struct):
    """What one `angelos ledger` command gave: its exit status, output and plain messages."""

    exit: int
    output: str
    messages: list[str]


class LedgerResult(msgspec.Struct):
    """One ledger step as the demo's `--json` mode reports it."""

    exit: int
    output: Any
    messages: list[str]


async def run_ledger(
    args: list[str], env: Mapping[str, str], log: TextIO, *, as_json: bool
) -> LedgerAnswer:
    """Run `angelos ledger ARGS`; its log lines go to the demo's log, its messages are kept."""
    command = [sys.executable, "-m", "service.cli", "ledger", *args, "--quiet"]
    if as_json:
        command.append("--json")
    process = await asyncio.create_subprocess_exec(
        *command,
        env=dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), LEDGER_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        return LedgerAnswer(-1, "", [f"no answer within {LEDGER_TIMEOUT_S:.0f} s; stopped"])
    messages = []
    for line in err.decode("utf-8", "replace").splitlines():
        if is_log_line(line):
            log.write(line + "\n")
        elif line.strip():
            messages.append(line)
    log.flush()
    code = process.returncode if process.returncode is not None else -1
    return LedgerAnswer(code, out.decode("utf-8", "replace"), messages)


def is_log_line(line: str) -> bool:
    """Whether a line is one of angelos's JSON log records (not a message for a person)."""
    if not line.startswith("{"):
        return False
    try:
        return isinstance(msgspec.json.decode(line), dict)
    except msgspec.DecodeError:
        return False


def as_result(answer: LedgerAnswer) -> LedgerResult:
    """The answer with its `--json` output decoded (None when there was none)."""
    output: Any = None
    with contextlib.suppress(msgspec.DecodeError):
        output = msgspec.json.decode(answer.output) if answer.output.strip() else None
    return LedgerResult(answer.exit, output, answer.messages)


def as_text(answer: LedgerAnswer, indent: str) -> str:
    """The answer as the walk-through prints it: the command's own output, indented."""
    lines = [*answer.output.rstrip("\n").splitlines(), *answer.messages]
    if answer.exit not in (0, -1):
        meaning = EXIT_MEANINGS.get(answer.exit, "an unexpected status")
        lines.append(f"exit {answer.exit}: {meaning}")
    return "\n".join(f"{indent}{line}".rstrip() for line in lines)
