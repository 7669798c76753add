"""The table's entries for the ledger store and the send timings."""

from __future__ import annotations

import re
from typing import Final

from service.config._values import HEX64, SIGNER_KEY
from service.config.table.entry import Variable
from service.config.table.rules import (
    AbsolutePath,
    Choice,
    Int,
    Matches,
    Positive,
    RedisUrl,
    Switch,
)

LEDGER_VARIABLES: Final = (
    Variable(
        "ANGELOS_REDIS_URL",
        "store",
        RedisUrl(),
        "the ledger's Redis; unset starts an embedded one, `off` disables sending",
        shown="unset (embedded Redis)",
        also="; microsoft: not `off` (its refresh token is stored there)",
        secret=True,
    ),
    Variable(
        "ANGELOS_DATA_DIR",
        "store",
        AbsolutePath(),
        "where the embedded Redis keeps its AOF, and every server its rollback witness and the "
        "journal of ledger writes it still owes (directories created with mode 0700); keep it "
        "on persistent, writable storage, or sending stays off",
        shown="`$XDG_DATA_HOME/angelos`, else `$HOME/.local/share/angelos`",
    ),
    Variable(
        "XDG_DATA_HOME",
        "store",
        AbsolutePath(lenient=True),
        "places `ANGELOS_DATA_DIR` when that is unset",
        in_env_file=False,
    ),
    Variable(
        "HOME",
        "store",
        AbsolutePath(lenient=True),
        "places `ANGELOS_DATA_DIR` when it and `XDG_DATA_HOME` are unset",
        shown="the account's home directory",
        in_env_file=False,
    ),
    Variable(
        "SEND_LEDGER_NAMESPACE",
        "store",
        Matches(
            re.compile(r"[a-z0-9-]{1,32}", re.ASCII),
            "1-32 of `a-z`, `0-9` and `-`",
            "must be 1-32 characters of a-z, 0-9 and -",
        ),
        "prefix of every ledger key; never reuse or share one",
        unset="angelos",
    ),
    Variable(
        "ANGELOS_LEDGER_HMAC_KEY",
        "store",
        Matches(HEX64, "64 hex characters"),
        "adds a MAC to every ledger event; audits need the same key",
        secret=True,
    ),
    Variable(
        "ANGELOS_LEDGER_ARCHIVE_DIR",
        "store",
        AbsolutePath(),
        "where `serve` archives every ledger event into signed segments (created with mode "
        "0700); while an archive exists, nothing unarchived expires",
        shown="unset (no archiver in `serve`)",
    ),
    Variable(
        "ANGELOS_AUDIT_SIGNING_KEY",
        "store",
        Matches(
            SIGNER_KEY,
            "a signer key from `angelos ledger keygen` (`PRIVATE+KEY+name+id+key`)",
            "must be a signer key from `angelos ledger keygen`",
        ),
        "signs the archive's checkpoints (Ed25519); apart from every OAuth key; required with "
        "`ANGELOS_LEDGER_ARCHIVE_DIR`",
        secret=True,
    ),
    Variable(
        "ANGELOS_LEDGER_ARCHIVE_CHECKPOINT_S",
        "store",
        Int(10, 86_400, test_low=1),
        "longest time between two signed checkpoints while events arrive",
        unset=300,
    ),
    Variable(
        "ANGELOS_LEDGER_ARCHIVE_SEGMENT_BYTES",
        "store",
        Int(1_048_576, 1_073_741_824, test_low=256),
        "size after which the archiver closes a segment (and signs a checkpoint)",
        unset=67_108_864,
        shown="{} (64 MiB)",
    ),
    Variable(
        "SEND_LEDGER_FSYNC",
        "store",
        Choice(("provider_managed",)),
        "`provider_managed` skips the fsync check where the provider forbids `CONFIG GET`",
        shown="unset (`appendfsync always` is checked)",
    ),
    Variable(
        "SEND_LEDGER_ASSUME_NOEVICTION",
        "store",
        Switch(),
        "skips the `maxmemory-policy noeviction` check where `CONFIG GET` is forbidden",
        unset=False,
    ),
    Variable(
        "SEND_LEDGER_WAITAOF_REPLICAS",
        "store",
        Int(0),
        "replicas that must confirm each durable step through `WAITAOF`",
        unset=0,
        also="; above 0 needs `WAITAOF` (Redis 7.2+)",
    ),
    Variable(
        "SEND_LEDGER_WAIT_REPLICAS",
        "store",
        Int(0, 16),
        "replicas that must hold each ledger write (`WAIT` on the writing connection) before "
        "a claim or a commit point is acted on; otherwise the send stops before its attempt "
        "marker",
        unset=0,
        also="; a Redis Cluster whose ledger shard has replicas needs at least 1",
    ),
    Variable(
        "SEND_LEDGER_FSYNC_TIMEOUT_MS",
        "store",
        Int(100, 10_000),
        "how long one `WAIT` or `WAITAOF` may wait",
        unset=2_000,
    ),
    Variable(
        "SEND_LEDGER_RETENTION_S",
        "store",
        Int(604_800, test_low=1),
        "how long a send's ledger stream is kept after its last lifecycle event",
        unset=604_800,
        shown="{} (7 days)",
    ),
    Variable(
        "SEND_TOOL_DEADLINE_S",
        "timing",
        Int(10, 300, test_low=1),
        "how long `mail_send_confirmed` waits before answering `sending`",
        unset=90,
    ),
    Variable(
        "SMTP_DATA_TERMINATION_TIMEOUT_S",
        "timing",
        Int(30, 900, test_low=1),
        "wait for the SMTP server's reply to the end of the message data",
        unset=600,
    ),
    Variable(
        "SEND_DISPATCH_DEADLINE_S",
        "timing",
        Positive(),
        "time from claim to the final reply; the commit point must come before it minus the"
        " termination timeout",
        shown="`5 x MAIL_TIMEOUT + SMTP_DATA_TERMINATION_TIMEOUT_S`, at least 780",
        also=" >= 5 x `MAIL_TIMEOUT` + `SMTP_DATA_TERMINATION_TIMEOUT_S`",
    ),
    Variable(
        "SEND_OUTCOME_PERSIST_WINDOW_S",
        "timing",
        Int(1),
        "how long a dispatch waits for the store to record an outcome before answering with "
        "the persistence warning; the outcome is kept and recorded when the store answers",
        unset=600,
    ),
    Variable(
        "SENT_FILING_TIMEOUT_S",
        "timing",
        Int(5, 120, test_low=1),
        "time allowed to file the Sent copy over IMAP",
        unset=30,
    ),
    Variable(
        "SEND_RECOVERY_GRACE_S",
        "timing",
        Positive(),
        "age after which recovery may close a claim whose process is gone",
        shown="`SEND_DISPATCH_DEADLINE_S + SEND_DISPATCHER_LEASE_MS + 60 s`, at least 900",
        also=" above `SEND_DISPATCH_DEADLINE_S` + the lease + 60 s",
    ),
    Variable(
        "SEND_RECOVERY_INTERVAL_S",
        "timing",
        Int(5, 300, test_low=1),
        "how often each server runs a recovery pass",
        unset=30,
    ),
    Variable(
        "SEND_DISPATCHER_LEASE_MS",
        "timing",
        Int(1_000),
        "liveness lease of a server process; recovery waits for it to lapse, and a dispatch "
        "takes a network step only within two thirds of it after the last confirmed renewal",
        unset=30_000,
    ),
    Variable(
        "SEND_DISPATCHER_LEASE_REFRESH_MS",
        "timing",
        Int(100),
        "how often the lease is renewed",
        unset=10_000,
        also=", at most a third of `SEND_DISPATCHER_LEASE_MS`",
    ),
    Variable(
        "SEND_ANNOTATION_CAP",
        "timing",
        Int(0, 128),
        "most annotations (such as late outcomes) one send's stream accepts",
        unset=32,
    ),
)
