"""Store variables: ANGELOS_REDIS_URL, ANGELOS_DATA_DIR and the ledger's SEND_* settings."""

from __future__ import annotations

import os
import pwd
import re
from collections.abc import Mapping

import msgspec

from schemas.secret import Secret
from service.config._model import StoreConfig
from service.config._rules import has_control, parse_decimal, value_of
from service.config._urls import parse_redis_url

_NAMESPACE = re.compile(r"[a-z0-9-]{1,32}", re.ASCII)
_HEX64 = re.compile(r"[0-9a-fA-F]{64}", re.ASCII)
_MAX_TEST_PREPARE_TTL_MS = 900_000
_MIN_DISPATCH_DEADLINE_S = 780
_MIN_RECOVERY_GRACE_S = 900


class _Bound(msgspec.Struct, frozen=True):
    """One integer ledger variable: default, production range, and test-build lower bound."""

    name: str
    default: int
    low: int
    high: int | None
    test_low: int


_BOUNDS: dict[str, _Bound] = {
    "retention_s": _Bound("SEND_LEDGER_RETENTION_S", 604_800, 604_800, None, 1),
    "waitaof_replicas": _Bound("SEND_LEDGER_WAITAOF_REPLICAS", 0, 0, None, 0),
    "fsync_timeout_ms": _Bound("SEND_LEDGER_FSYNC_TIMEOUT_MS", 2_000, 100, 10_000, 100),
    "tool_deadline_s": _Bound("SEND_TOOL_DEADLINE_S", 90, 10, 300, 1),
    "smtp_data_termination_timeout_s": _Bound("SMTP_DATA_TERMINATION_TIMEOUT_S", 600, 30, 900, 1),
    "outcome_persist_window_s": _Bound("SEND_OUTCOME_PERSIST_WINDOW_S", 600, 1, None, 1),
    "sent_filing_timeout_s": _Bound("SENT_FILING_TIMEOUT_S", 30, 5, 120, 1),
    "recovery_interval_s": _Bound("SEND_RECOVERY_INTERVAL_S", 30, 5, 300, 1),
    "dispatcher_lease_ms": _Bound("SEND_DISPATCHER_LEASE_MS", 30_000, 1_000, None, 1_000),
    "dispatcher_lease_refresh_ms": _Bound(
        "SEND_DISPATCHER_LEASE_REFRESH_MS", 10_000, 100, None, 100
    ),
    "annotation_cap": _Bound("SEND_ANNOTATION_CAP", 32, 0, 128, 0),
}


def load_store(
    env: Mapping[str, str], mail_timeout_ms: int | None
) -> tuple[StoreConfig | None, tuple[str, ...]]:
    """Validate the store and ledger variables; mail_timeout_ms feeds the deadline rule."""
    problems: list[str] = []
    mode, url = _redis(env, problems)
    home, xdg_data_home = _home(env), _xdg_data_home(env)
    data_dir = _data_dir(env, home, xdg_data_home, needed=mode == "embedded", problems=problems)
    test_mode = env.get("ANGELOS_ALLOW_FAULT_INJECTION") == "1" and env.get("ANGELOS_ENV") == "test"
    numbers = {attr: _integer(env, bound, test_mode, problems) for attr, bound in _BOUNDS.items()}
    timings = _deadlines(env, numbers, mail_timeout_ms, test_mode, problems)

    namespace = value_of(env, "SEND_LEDGER_NAMESPACE") or "angelos"
    if _NAMESPACE.fullmatch(namespace) is None:
        problems.append("SEND_LEDGER_NAMESPACE: must be 1-32 characters of a-z, 0-9 and -")
    fsync = value_of(env, "SEND_LEDGER_FSYNC")
    if fsync not in (None, "provider_managed"):
        problems.append("SEND_LEDGER_FSYNC: must be unset or provider_managed")
    hmac_key = value_of(env, "ANGELOS_LEDGER_HMAC_KEY")
    if hmac_key is not None and _HEX64.fullmatch(hmac_key) is None:
        problems.append("ANGELOS_LEDGER_HMAC_KEY: must be 64 hex characters")
    prepare_ttl_ms = _test_prepare_ttl(env, test_mode, problems)
    for name in ("ANGELOS_REDIS_REST_URL", "ANGELOS_REDIS_REST_TOKEN"):
        if value_of(env, name) is not None:
            problems.append(f"{name}: not supported by this version; use ANGELOS_REDIS_URL")

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
        assume_noeviction=env.get("SEND_LEDGER_ASSUME_NOEVICTION") == "1",
        test_mode=test_mode,
        test_prepare_ttl_ms=prepare_ttl_ms,
        retention_s=_pick(numbers, "retention_s"),
        waitaof_replicas=_pick(numbers, "waitaof_replicas"),
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
    )
    return store, ()


def _pick(numbers: dict[str, int | None], attr: str) -> int:
    number = numbers[attr]
    return _BOUNDS[attr].default if number is None else number


def _redis(env: Mapping[str, str], problems: list[str]) -> tuple[str, Secret | None]:
    raw = value_of(env, "ANGELOS_REDIS_URL")
    if raw is None:
        return "embedded", None
    if raw == "off":
        return "off", None
    _, rule = parse_redis_url(raw)
    if rule:
        problems.append(f"ANGELOS_REDIS_URL: {rule}")
        return "redis", None
    return "redis", Secret(raw)


def _data_dir(
    env: Mapping[str, str],
    home: str | None,
    xdg_data_home: str | None,
    *,
    needed: bool,
    problems: list[str],
) -> str:
    explicit = value_of(env, "ANGELOS_DATA_DIR")
    if explicit is not None:
        if has_control(explicit) or not os.path.isabs(explicit):
            problems.append("ANGELOS_DATA_DIR: must be an absolute path without control characters")
            return ""
        return explicit
    if xdg_data_home is not None:
        return os.path.join(xdg_data_home, "angelos")
    if home is not None:
        return os.path.join(home, ".local", "share", "angelos")
    if needed:
        problems.append("ANGELOS_DATA_DIR: required because neither XDG_DATA_HOME nor HOME is set")
    return ""


def _usable_path(value: str | None) -> str | None:
    return value if value is not None and os.path.isabs(value) and not has_control(value) else None


def _xdg_data_home(env: Mapping[str, str]) -> str | None:
    # The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored.
    return _usable_path(value_of(env, "XDG_DATA_HOME"))


def _home(env: Mapping[str, str]) -> str | None:
    return _usable_path(value_of(env, "HOME") or _account_home())


def _account_home() -> str | None:
    try:
        return pwd.getpwuid(os.getuid()).pw_dir or None
    except (KeyError, OSError):
        return None


def _integer(
    env: Mapping[str, str], bound: _Bound, test_mode: bool, problems: list[str]
) -> int | None:
    raw = value_of(env, bound.name)
    if raw is None:
        return bound.default
    low = bound.test_low if test_mode else bound.low
    number = parse_decimal(raw)
    if number is None or number < low or (bound.high is not None and number > bound.high):
        span = f">= {low}" if bound.high is None else f"{low}..{bound.high}"
        problems.append(f"{bound.name}: must be an integer {span}")
        return None
    return number


def _deadlines(
    env: Mapping[str, str],
    numbers: dict[str, int | None],
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
    dispatch_s = _relational(
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
    grace_s = _relational(
        env, "SEND_RECOVERY_GRACE_S", max(_MIN_RECOVERY_GRACE_S, floor_ms // 1000 + 1), problems
    )
    known = dispatch_s is not None and lease_ms is not None
    if known and grace_s is not None and grace_s * 1000 <= floor_ms:
        problems.append(
            "SEND_RECOVERY_GRACE_S: must exceed SEND_DISPATCH_DEADLINE_S"
            " + SEND_DISPATCHER_LEASE_MS + 60 s"
        )
    return dispatch_s or 0, grace_s or 0


def _relational(env: Mapping[str, str], name: str, default: int, problems: list[str]) -> int | None:
    raw = value_of(env, name)
    if raw is None:
        return default
    number = parse_decimal(raw)
    if number is None or number < 1:
        problems.append(f"{name}: must be a positive integer")
        return None
    return number


def _test_prepare_ttl(env: Mapping[str, str], test_mode: bool, problems: list[str]) -> int | None:
    if not test_mode:
        return None  # production ignores the test-only variable entirely
    raw_ttl = value_of(env, "ANGELOS_TEST_PREPARE_TTL_MS")
    prepare_ttl_ms = None if raw_ttl is None else parse_decimal(raw_ttl)
    if raw_ttl is not None and (
        prepare_ttl_ms is None or not 1 <= prepare_ttl_ms <= _MAX_TEST_PREPARE_TTL_MS
    ):
        problems.append(
            f"ANGELOS_TEST_PREPARE_TTL_MS: must be an integer 1..{_MAX_TEST_PREPARE_TTL_MS}"
        )
        prepare_ttl_ms = None
    return prepare_ttl_ms
