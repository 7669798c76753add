"""LedgerStore: the send ledger over redis.asyncio.

Every write goes through one of the Lua scripts; every read is one round trip, repeated once on
a fresh connection when the first one fails (a read changes nothing). Writes that carry an event
id are retried on a lost reply (the script answers `duplicate`, or `ack_lost` for a claim, whose
reply carried the only copy of the payload). Every script also guards against a store that went
back in time: it is given this host's witness clock (ledger/store/durability/witness.py) and
refuses to start a send while a rollback halt is recorded.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar, cast

import msgspec
import redis.exceptions as rex
from msgspec import UNSET, Struct

from ledger.chain import event_hash, event_mac, genesis, key_of, mac_key_id
from ledger.ids import new_id
from ledger.lifecycle import state_after_types
from ledger.store.answers import (
    AppendOutcome,
    ClaimOutcome,
    Halt,
    Head,
    LedgerMeta,
    OpenMember,
    PrepareOutcome,
    append_outcome,
    claim_outcome,
    text,
    time_ms,
    unexpected,
)
from ledger.store.batch import Replied, ScriptRunner
from ledger.store.bulk import entry_from
from ledger.store.connection import UNREACHABLE, StoreClient, drop_idle
from ledger.store.durability.acks import Acknowledgment
from ledger.store.durability.witness import Witness
from ledger.store.keys import SCHEMA_VERSION, LedgerKeys
from ledger.store.lua_scripts import Arg
from ledger.store.nodes import NOT_RUN_HERE, borrowed
from ledger.store.retry import RetryPolicy
from ledger.store.wire import exchange
from schemas.ledger import (
    Event,
    EventRejected,
    LedgerEntry,
    LedgerUnavailable,
    PreparedPayload,
    encode_event,
    encode_payload,
)
from schemas.ledger_events import MAX_ENTRIES, Claimed, EventData, Prepared
from schemas.secret import Secret
from schemas.send_policy import RateLimit

T = TypeVar("T")
MAX_REBUILDS: Final = 5  # rebuilds after annotation-only conflicts, at most


def head_of(entries: Sequence[LedgerEntry]) -> Head | None:
    """Return the head a writer must name after these entries (None for an empty stream)."""
    if not entries:
        return None
    last = entries[-1]
    return Head(last.seq, last.h, state_after_types([entry.t for entry in entries]))


def prepared_data(
    payload: PreparedPayload, blob: bytes, retention_ms: int | None = None
) -> Prepared:
    """Derive the `prepared` event data from a payload and its exact stored bytes."""
    return Prepared(
        owner=payload.owner,
        digest=payload.digest,
        message_id=payload.message_id,
        transport=payload.transport,
        action=payload.action,
        created_ms=payload.created_ms,
        expires_ms=payload.expires_ms,
        encoded_bytes=len(payload.raw),
        recipient_count=len(payload.recipients),
        attachment_sha256=tuple(a.sha256 for a in payload.attachments),
        payload_sha256=hashlib.sha256(blob).hexdigest(),
        grant=payload.grant,
        retention_ms=UNSET if retention_ms is None else retention_ms,
        approval=payload.approval,
        allowlist_sha256=payload.allowlist_sha256,
    )


DEFAULT_RETENTION_MS: Final = 604_800_000
DEFAULT_PREPARE_TTL_MS: Final = 900_000


class LedgerSettings(Struct, frozen=True, kw_only=True):
    """The ledger settings the store needs (the service maps its StoreConfig here)."""

    namespace: str = "angelos"
    retention_ms: int = DEFAULT_RETENTION_MS
    annotation_cap: int = 32
    recovery_grace_ms: int = 900_000
    prepare_ttl_ms: int = DEFAULT_PREPARE_TTL_MS
    hmac_key: Secret | None = None  # ANGELOS_LEDGER_HMAC_KEY, 64 hex
    retry: RetryPolicy = RetryPolicy()  # for the scripted (eid-carrying) writes
    batching: bool = True  # coalesce script calls of one loop turn into pipelines (batch.py)


class LedgerStore:
    """The ledger's only door to Redis: prepare, claim, append, read, and recovery queries."""

    def __init__(
        self,
        client: StoreClient,
        settings: LedgerSettings | None = None,
        *,
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.client = client
        self.settings = settings or LedgerSettings()
        self.keys = LedgerKeys(self.settings.namespace)
        key = self.settings.hmac_key
        self._mac_key = key_of(key)
        self._clock = clock or _wall_ms
        self._runner = ScriptRunner(client, batching=self.settings.batching)
        self.witness: Witness | None = None  # this host's rollback witness, once the store is known

    # ----------------------------------------------------------------------------- reads

    async def read(self, pid: str) -> tuple[int, list[LedgerEntry]]:
        """Return (server time ms, entries) from ONE round trip: TIME + XRANGE on the node that
        holds the stream (on a cluster, its clock is the one the scripts compare with)."""
        stream = self.keys.stream(pid)

        async def once() -> tuple[Any, Any]:
            async with borrowed(self.client, stream) as connection:
                now, raw = await exchange(
                    connection, [("TIME",), ("XRANGE", stream, "-", "+", "COUNT", MAX_ENTRIES + 1)]
                )
                for reply in (now, raw):
                    if isinstance(reply, Exception):
                        raise reply  # a refusal, or a moved slot: the connection stays usable
            return now, raw

        now, raw = await self._read(once)
        items = [(entry_id, dict(zip(f[::2], f[1::2], strict=True))) for entry_id, f in raw]
        return time_ms(now), [entry_from(pid, item) for item in items]

    async def payload(self, pid: str) -> bytes | None:
        """Read an unclaimed preparation's private payload without consuming it (None: gone)."""
        blob = await self._read(lambda: self.client.get(self.keys.payload(pid)))
        return None if blob is None else cast(bytes, blob)

    async def server_time_ms(self) -> int:
        """Return Redis TIME in milliseconds."""
        return time_ms(await self._read(self.client.time))

    async def halt(self) -> Halt | None:
        """Return the recorded rollback halt, if any (sending stays off while it is there)."""
        record = await self.meta_field("halt")
        return Halt.parse(record) if record else None

    async def meta_field(self, name: str) -> str:
        """Read one field of the meta hash ("" when absent), writing nothing."""
        value = await self._read(lambda: self.client.hget(self.keys.meta, name))
        return "" if value is None else text(value)

    # ----------------------------------------------------------------------------- writes

    async def prepare(
        self, payload: PreparedPayload, *, actor: str, eid: str, at_ms: int | None = None
    ) -> PrepareOutcome:
        """Append `prepared` (seq 1) and store the private payload until its deadline."""
        blob = encode_payload(payload)
        ttl_ms = payload.expires_ms - payload.created_ms
        if not 0 < ttl_ms <= self.settings.prepare_ttl_ms:
            raise EventRejected("the preparation lifetime is out of range")
        event = Event(
            pid=payload.pid,
            seq=1,
            type="prepared",
            eid=eid,
            prev=genesis(payload.pid),
            at_ms=self._clock() if at_ms is None else at_ms,
            actor=actor,
            data=prepared_data(payload, blob, self.settings.retention_ms),
        )
        e, h, m = self._seal(event)
        keys = self.keys
        script_keys = [keys.stream(payload.pid), keys.payload(payload.pid), keys.index]
        script_keys += [keys.unclaimed, keys.meta]
        args: list[Arg] = [payload.pid, e, h, eid, m, blob, ttl_ms]
        args += [self.settings.retention_ms, payload.expires_ms, self._floor()]
        reply, _ = await self._write("prepare", script_keys, args)
        result = text(reply[0])
        if result == "ok":
            self._saw(reply[2])
            return PrepareOutcome(
                result="ok", eid=eid, head=Head(1, h, "PREPARED"), srv_ms=int(reply[1])
            )
        if result == "duplicate":
            stored = Head(1, text(reply[1]), "PREPARED")
            return PrepareOutcome(result="duplicate", eid=eid, head=stored)
        if result in ("exists", "halted"):
            return PrepareOutcome(result=cast(Any, result), eid=eid)
        raise unexpected(reply)

    async def claim(
        self,
        pid: str,
        *,
        owner: str,
        confirmed_digest: str,
        head: Head,
        claimed: Claimed,
        actor: str,
        eid: str,
        at_ms: int | None = None,
        grant: str | None = None,
        rate: RateLimit | None = None,
    ) -> ClaimOutcome:
        """Run the atomic one-time claim; exactly one caller can ever get `claimed`.

        A lost reply is retried with the same eid: if the claim had landed, the script answers
        `ack_lost` (the claim is ours, but its payload is gone with the lost reply). `rate`
        is the send rate limit the script enforces in the same step.
        """
        if claimed.confirmed_digest != confirmed_digest:
            raise EventRejected("the claim event confirms another digest")
        event = self._event(pid, head, claimed, actor, eid, at_ms)
        e, h, m = self._seal(event)
        keys = self.keys
        reply, confirmed = await self._write(
            "claim",
            [keys.stream(pid), keys.payload(pid), keys.index, keys.open, keys.unclaimed,
             keys.meta, keys.rate],
            [pid, owner, confirmed_digest, head.seq, head.h, e, h, eid, m,
             self.settings.retention_ms, self._floor(shared=True), grant or "",
             0 if rate is None else rate.count, 0 if rate is None else rate.window_ms],
        )  # fmt: skip
        outcome = claim_outcome(reply, head, h)
        self._saw(outcome.clock)
        return msgspec.structs.replace(outcome, confirmed=confirmed)

    async def append(
        self,
        pid: str,
        head: Head,
        data: EventData,
        *,
        actor: str,
        eid: str,
        at_ms: int | None = None,
        lease_of: str | None = None,
        retry: RetryPolicy | None = None,
        still_wanted: Callable[[], bool] | None = None,
    ) -> AppendOutcome:
        """Compare-and-append one event after `head`.

        When only annotations slipped in (same lifecycle state), the event is rebuilt on the new
        head with the same eid, at most 5 times; a lost reply is retried with the same eid under
        `retry` (default: the store's policy), while `still_wanted` says so.
        `lease_of` names the claim's dispatcher id, needed for recovery-written events.
        """
        if isinstance(data, Prepared | Claimed):
            raise EventRejected("prepared and claimed are written only by prepare() and claim()")
        keys = self.keys
        lease = keys.lease(lease_of) if lease_of else keys.prefix + "lease:-"
        outcome: AppendOutcome | None = None
        for _ in range(1 + MAX_REBUILDS):
            event = self._event(pid, head, data, actor, eid, at_ms)
            e, h, m = self._seal(event)
            args: list[Arg] = [
                pid, head.seq, head.h, data.TYPE, e, h, eid, m, self.settings.retention_ms,
                self.settings.annotation_cap, self.settings.recovery_grace_ms, self._floor(),
            ]  # fmt: skip
            script_keys = [keys.stream(pid), keys.payload(pid), keys.index, keys.open]
            script_keys += [keys.unclaimed, lease, keys.meta, keys.evidence]
            reply, confirmed = await self._write(
                "append", script_keys, args, retry=retry, still_wanted=still_wanted
            )
            outcome = append_outcome(reply, head, data.TYPE, h, eid)
            if not confirmed or (outcome.result == "duplicate" and self.acknowledgment.required):
                # A repeat ran on another connection than the write it repeats: its WAIT
                # cannot speak for that write, so a gate must not count it as confirmed.
                outcome = msgspec.structs.replace(outcome, confirmed=False)
            self._saw(outcome.clock)
            if (
                outcome.result != "conflict"
                or outcome.head is None
                or outcome.head.state != head.state
            ):
                return outcome
            head = outcome.head  # only annotations slipped in: same eid, new seq/prev
        assert outcome is not None
        return outcome

    # ----------------------------------------------------------------------------- small keys

    async def refresh_lease(self, dispatcher_id: str, ttl_ms: int) -> None:
        """Set (or refresh) this process's dispatcher lease for `ttl_ms`."""
        await self._call(
            self.client.set(self.keys.lease(dispatcher_id), b"1", px=ttl_ms), maybe_applied=True
        )

    async def release_lease(self, dispatcher_id: str) -> None:
        """Delete this process's dispatcher lease (clean shutdown)."""
        await self._call(self.client.delete(self.keys.lease(dispatcher_id)), maybe_applied=True)

    async def forget_open(self, member: OpenMember) -> None:
        """Remove a stale `open` member whose stream is closed or gone."""
        await self._call(self.client.zrem(self.keys.open, member.member), maybe_applied=True)

    async def schedule_evidence(self, pid: str, due_ms: int) -> None:
        """Move an unknown send's next search for evidence to `due_ms` (only while listed)."""
        await self._call(
            self.client.zadd(self.keys.evidence, {pid: due_ms}, xx=True), maybe_applied=True
        )

    async def forget_evidence(self, pid: str) -> None:
        """Drop a send from the evidence work list: its searches are over, or it is settled."""
        await self._call(self.client.zrem(self.keys.evidence, pid), maybe_applied=True)

    async def forget_unclaimed(self, pid: str) -> None:
        """Remove a stale `unclaimed` member whose stream is claimed, expired or gone."""
        await self._call(self.client.zrem(self.keys.unclaimed, pid), maybe_applied=True)

    @property
    def acknowledgment(self) -> Acknowledgment:
        """What every scripted write waits for before it counts as confirmed."""
        return self._runner.ack

    def require(self, ack: Acknowledgment) -> None:
        """Make every scripted write wait for `ack` (replicas, fsync) on its own connection."""
        self._runner.ack = ack

    async def ensure_meta(self) -> LedgerMeta:
        """Create the meta hash fields once (schema, created_ms, store_id, mac_key_id) and
        return them."""
        now = await self.server_time_ms()
        key_id = "" if self._mac_key is None else mac_key_id(self._mac_key)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hsetnx(self.keys.meta, "schema", SCHEMA_VERSION)
            pipe.hsetnx(self.keys.meta, "created_ms", now)
            pipe.hsetnx(self.keys.meta, "store_id", new_id())
            if key_id:
                pipe.hsetnx(self.keys.meta, "mac_key_id", key_id)
            # The retention in force, for an audit of streams that are gone (kept up to date).
            pipe.hset(self.keys.meta, "retention_ms", self.settings.retention_ms)
            pipe.hgetall(self.keys.meta)
            replies = await self._call(pipe.execute(), maybe_applied=True)
        stored = {text(k): text(v) for k, v in replies[-1].items()}
        return LedgerMeta(
            stored.get("schema", ""),
            int(stored.get("created_ms", "0") or 0),
            stored.get("mac_key_id", ""),
            stored.get("store_id", ""),
        )

    async def guard(self) -> tuple[int, Halt | None]:
        """Compare the store's clock with this host's witness; record a halt if it is behind."""
        reply, _ = await self._write("guard", [self.keys.meta], [self._floor(shared=True)])
        clock, record = int(reply[0]), text(reply[1])
        self._saw(clock)
        return clock, Halt.parse(record) if record else None

    async def acknowledge(self, halt: Halt) -> str:
        """Clear exactly this halt (a person handled it): `acknowledged`, `none` or `changed`."""
        reply, _ = await self._write("acknowledge", [self.keys.meta], [halt.record])
        return text(reply[0])

    # ----------------------------------------------------------------------------- helpers

    def _event(
        self, pid: str, head: Head, data: EventData, actor: str, eid: str, at_ms: int | None
    ) -> Event:
        return Event(
            pid=pid,
            seq=head.seq + 1,
            type=cast(Any, data.TYPE),
            eid=eid,
            prev=head.h,
            at_ms=self._clock() if at_ms is None else at_ms,
            actor=actor,
            data=data,
        )

    def _floor(self, *, shared: bool = False) -> int:
        # A claim, the step a forgotten history would let happen twice, also reads what the
        # host's other processes kept; the other writes compare with this process's memory.
        return 0 if self.witness is None else self.witness.floor(shared=shared)

    def _saw(self, clock: Any) -> None:
        if self.witness is not None and clock:
            self.witness.saw(int(clock))

    async def _read(self, once: Callable[[], Awaitable[T]]) -> T:
        """Run a read; after a lost connection, once more on a fresh one (reads change nothing)."""
        try:
            return await once()
        except (*UNREACHABLE, *NOT_RUN_HERE):  # a lost connection, or a cluster's moved slot
            await drop_idle(self.client)
        except rex.ResponseError:  # never a raw redis error out of the store
            raise LedgerUnavailable(
                "the send ledger store refused a command", maybe_applied=False
            ) from None
        return cast(T, await self._call(once(), maybe_applied=False))

    def _seal(self, event: Event) -> tuple[bytes, str, str]:
        """Return (canonical e, h, m or "")."""
        e = encode_event(event)
        h = event_hash(e)
        return e, h, "" if self._mac_key is None else event_mac(self._mac_key, h)

    async def _write(
        self,
        name: str,
        keys: Sequence[str],
        args: Sequence[Arg],
        *,
        retry: RetryPolicy | None = None,
        still_wanted: Callable[[], bool] | None = None,
    ) -> Replied:
        """Run an eid-carrying script under the retry policy (the script deduplicates); return
        its reply and whether the required acknowledgment confirmed it."""
        policy = retry or self.settings.retry
        run = policy.call(lambda: self._runner.run(name, keys, args), still_wanted=still_wanted)
        replied: Replied = await self._call(run, maybe_applied=True)
        return replied

    async def _call(self, awaitable: Any, *, maybe_applied: bool) -> Any:
        """Await one redis-py call (its async typing is loose), mapping failures to our errors."""
        try:
            return await awaitable
        except UNREACHABLE:
            await drop_idle(self.client)  # the others may be as stale as the one that failed
            raise LedgerUnavailable(maybe_applied=maybe_applied) from None
        except rex.ResponseError:
            raise LedgerUnavailable(
                "the send ledger store refused a command", maybe_applied=False
            ) from None


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000
