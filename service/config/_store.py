"""Store variables: ANGELOS_REDIS_URL, ANGELOS_DATA_DIR and the ledger's SEND_* settings."""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from typing import Any

from schemas.secret import Secret
from service.config._model import StoreConfig
from service.config._values import value_of
from service.config.table.variables import BY_NAME, read

_MIN_DISPATCH_DEADLINE_S = 780
_MIN_RECOVERY_GRACE_S = 900
# The integer ledger variables by the StoreConfig field each fills; their rules are in the table.
_NUMBERS = {
    "retention_s": "SEND_LEDGER_RETENTION_S",
    "waitaof_replicas": "SEND_LEDGER_WAITAOF_REPLICAS",
    "wait_replicas": "SEND_LEDGER_WAIT_REPLICAS",
    "fsync_timeout_ms": "SEND_LEDGER_FSYNC_TIMEOUT_MS",
    "tool_deadline_s": "SEND_TOOL_DEADLINE_S",
    "smtp_data_termination_timeout_s": "SMTP_DATA_TERMINATION_TIMEOUT_S",
    "outcome_persist_window_s": "SEND_OUTCOME_PERSIST_WINDOW_S",
    "sent_filing_timeout_s": "SENT_FILING_TIMEOUT_S",
    "recovery_interval_s": "SEND_RECOVERY_INTERVAL_S",
    "dispatcher_lease_ms": "SEND_DISPATCHER_LEASE_MS",
    "dispatcher_lease_refresh_ms": "SEND_DISPATCHER_LEASE_REFRESH_MS",
    "annotation_cap": "SEND_ANNOTATION_CAP",
    "archive_checkpoint_s": "ANGELOS_LEDGER_ARCHIVE_CHECKPOINT_S",
    "archive_segment_bytes": "ANGELOS_LEDGER_ARCHIVE_SEGMENT_BYTES",
}


def test_mode(env: Mapping[str, str]) -> bool:
    """ANGELOS_ALLOW_FAULT_INJECTION=1 with ANGELOS_ENV=test: lower bounds drop, hooks apply."""
    return env.get("ANGELOS_ALLOW_FAULT_INJECTION") == "1" and env.get("ANGELOS_ENV") == "test"


def load_store(
    env: Mapping[str, str], mail_timeout_ms: int | None
) -> tuple[StoreConfig | None, tuple[str, ...]]:
    """Validate the store and ledger variables; mail_timeout_ms feeds the deadline rule."""
    problems: list[str] = []
    mode, url = _redis(env, problems)
    home, xdg_data_home = _home(env), _xdg_data_home(env)
    data_dir = _data_dir(env, home, xdg_data_home, needed=mode == "embedded", problems=problems)
    testing = test_mode(env)
    numbers = {
        attr: read(env, name, problems, test_mode=testing) for attr, name in _NUMBERS.items()
    }
    timings = _deadlines(env, numbers, mail_timeout_ms, testing, problems)

    namespace = read(env, "SEND_LEDGER_NAMESPACE", problems)
    fsync = read(env, "SEND_LEDGER_FSYNC", problems)
    hmac_key = read(env, "ANGELOS_LEDGER_HMAC_KEY", problems)
    archive_dir = read(env, "ANGELOS_LEDGER_ARCHIVE_DIR", problems)
    signing_key = read(env, "ANGELOS_AUDIT_SIGNING_KEY", problems)
    if archive_dir is not None and signing_key is None and value_of(
        env, "ANGELOS_AUDIT_SIGNING_KEY"
    ) is None:
        problems.append(
            "ANGELOS_AUDIT_SIGNING_KEY: required with ANGELOS_LEDGER_ARCHIVE_DIR (create one "
            "with `angelos ledger keygen`)"
        )
    # Production ignores the test-only variable entirely.
    prepare_ttl_ms = read(env, "ANGELOS_TEST_PREPARE_TTL_MS", problems) if testing else None
    read(env, "ANGELOS_REDIS_REST_URL", problems)  # refused: any value is a problem
    read(env, "ANGELOS_REDIS_REST_TOKEN", problems)

    if problems:
        return None, tuple(problems)
    store = StoreConfig(
        mode=mode,
        url=url,
        data_dir=data_dir,
        home=home,
        xdg_data_home=xdg_data_home,
        namespace=namespace,
        hmac_key=None if hmac_key is None else Secret(hmac_key),
        fsync_provider_managed=fsync == "provider_managed",
        assume_noeviction=read(env, "SEND_LEDGER_ASSUME_NOEVICTION", problems),
        test_mode=testing,
        test_prepare_ttl_ms=prepare_ttl_ms,
        retention_s=_pick(numbers, "retention_s"),
        waitaof_replicas=_pick(numbers, "waitaof_replicas"),
        wait_replicas=_pick(numbers, "wait_replicas"),
        fsync_timeout_ms=_pick(numbers, "fsync_timeout_ms"),
        tool_deadline_s=_pick(numbers, "tool_deadline_s"),
        smtp_data_termination_timeout_s=_pick(numbers, "smtp_data_termination_timeout_s"),
        dispatch_deadline_s=timings[0],
        outcome_persist_window_s=_pick(numbers, "outcome_persist_window_s"),
        sent_filing_timeout_s=_pick(numbers, "sent_filing_timeout_s"),
        recovery_grace_s=timings[1],
        recovery_interval_s=_pick(numbers, "recovery_interval_s"),
        dispatcher_lease_ms=_pick(numbers, "dispatcher_lease_ms"),
        dispatcher_lease_refresh_ms=_pick(numbers, "dispatcher_lease_refresh_ms"),
        annotation_cap=_pick(numbers, "annotation_cap"),
        archive_dir=archive_dir,
        audit_signing_key=None if signing_key is None else Secret(signing_key),
        archive_checkpoint_s=_pick(numbers, "archive_checkpoint_s"),
        archive_segment_bytes=_pick(numbers, "archive_segment_bytes"),
    )
    return store, ()


def _pick(numbers: dict[str, Any], attr: str) -> int:
    number: int | None = numbers[attr]
    return BY_NAME[_NUMBERS[attr]].unset if number is None else number


def _redis(env: Mapping[str, str], problems: list[str]) -> tuple[str, Secret | None]:
    if value_of(env, "ANGELOS_REDIS_URL") is None:
        return "embedded", None
    url = read(env, "ANGELOS_REDIS_URL", problems)
    if url == "off":
        return "off", None
    return "redis", None if url is None else Secret(url)


def _data_dir(
    env: Mapping[str, str],
    home: str | None,
    xdg_data_home: str | None,
    *,
    needed: bool,
    problems: list[str],
) -> str:
    if value_of(env, "ANGELOS_DATA_DIR") is not None:
        explicit: str | None = read(env, "ANGELOS_DATA_DIR", problems)
        return explicit or ""
    if xdg_data_home is not None:
        return os.path.join(xdg_data_home, "angelos")
    if home is not None:
        return os.path.join(home, ".local", "share", "angelos")
    if needed:
        problems.append("ANGELOS_DATA_DIR: required because neither XDG_DATA_HOME nor HOME is set")
    return ""


def _xdg_data_home(env: Mapping[str, str]) -> str | None:
    # The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored.
    usable: str | None = read(env, "XDG_DATA_HOME", [])
    return usable


def _home(env: Mapping[str, str]) -> str | None:
    raw = value_of(env, "HOME") or _account_home()
    if raw is None:
        return None
    usable: str | None = BY_NAME["HOME"].check.parse(raw)[0]
    return usable


def _account_home() -> str | None:
    try:
        return pwd.getpwuid(os.getuid()).pw_dir or None
    except (KeyError, OSError):
        return None


def _deadlines(
    env: Mapping[str, str],
    numbers: dict[str, Any],
    mail_timeout_ms: int | None,
    test_mode: bool,
    problems: list[str],
) -> tuple[int, int]:
    """Resolve SEND_DISPATCH_DEADLINE_S and SEND_RECOVERY_GRACE_S with their relation rules."""
    termination_s = numbers["smtp_data_termination_timeout_s"]
    lease_ms = numbers["dispatcher_lease_ms"]
    refresh_ms = numbers["dispatcher_lease_refresh_ms"]
    if lease_ms is not None and refresh_ms is not None and refresh_ms * 3 > lease_ms:
        problems.append(
            "SEND_DISPATCHER_LEASE_REFRESH_MS: must be at most a third of SEND_DISPATCHER_LEASE_MS"
        )

    # Unset deadlines follow the variables they depend on, so that raising MAIL_TIMEOUT or the
    # termination timeout alone never turns a default into a violation.
    needed_ms = 5 * (mail_timeout_ms or 30_000) + 1000 * (termination_s or 600)
    dispatch_s = _derived(
        env,
        "SEND_DISPATCH_DEADLINE_S",
        max(_MIN_DISPATCH_DEADLINE_S, -(-needed_ms // 1000)),
        problems,
    )
    if (
        dispatch_s is not None
        and not test_mode
        and mail_timeout_ms is not None
        and termination_s is not None
        and dispatch_s * 1000 < needed_ms
    ):
        problems.append(
            "SEND_DISPATCH_DEADLINE_S: must be at least 5 x MAIL_TIMEOUT"
            " + SMTP_DATA_TERMINATION_TIMEOUT_S"
        )
    floor_ms = 1000 * (dispatch_s or _MIN_DISPATCH_DEADLINE_S) + (lease_ms or 30_000) + 60_000
    grace_s = _derived(
        env, "SEND_RECOVERY_GRACE_S", max(_MIN_RECOVERY_GRACE_S, floor_ms // 1000 + 1), problems
    )
    known = dispatch_s is not None and lease_ms is not None
    if known and grace_s is not None and grace_s * 1000 <= floor_ms:
        problems.append(
            "SEND_RECOVERY_GRACE_S: must exceed SEND_DISPATCH_DEADLINE_S"
            " + SEND_DISPATCHER_LEASE_MS + 60 s"
        )
    return dispatch_s or 0, grace_s or 0


def _derived(env: Mapping[str, str], name: str, default: int, problems: list[str]) -> int | None:
    """A variable whose default follows others: that default when unset, else its entry's rule."""
    if value_of(env, name) is None:
        return default
    number: int | None = read(env, name, problems)
    return number
