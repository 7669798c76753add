"""The fast path's event decoder: one C decode per event, and the text checks made cheap.

schemas.ledger.decode_event decodes the envelope, then the data by type, and calls Python's
`re` once per constrained text field (about 0.3 µs each, most of a decode). Here one decode of
a union tagged by `type` reads the whole event, with every constrained text field typed plain
`str`; `valid_text` then checks those fields at least as strictly as the schema: hex fields by
length and alphabet (the schema's `$` would also let a trailing newline through; such an event
is left to the full audit), other patterns with the schema's own regex, remembering values
that passed (actors, endpoints and statuses repeat across sends). Everything else (literals,
integer bounds, unknown fields) is validated by msgspec exactly as the schema says. The store
seals the events it writes with the same checks (fast_encode), falling back to encode_event.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, Final, Literal, NamedTuple, Union, cast

import msgspec
from msgspec import Meta, Struct

from schemas.ledger import Event, encode_event
from schemas.ledger_events import DATA_CLASSES, MAX_ENTRIES, Actor, Int53

_HEX_BYTES: Final = b"0123456789abcdef"
_HEX_PATTERNS: Final = {"^[0-9a-f]{32}$": 32, "^[0-9a-f]{64}$": 64}
_REMEMBERED: Final = 4096  # distinct passing values kept per field
_PLAIN: Final = msgspec.inspect.StrType()


class Checks(NamedTuple):
    """How to check one data class's loosened text fields."""

    hex_values: Callable[[Any], tuple[str, ...]] | None  # the hex fields, read in one call
    hex_lengths: tuple[int, ...]
    others: tuple[tuple[str, Callable[[str], bool]], ...]  # schema checks with a memory


class FastEvent(Struct, frozen=True, forbid_unknown_fields=True, gc=False, tag_field="type"):
    """An event envelope; `type` is the tag that picks the tagged subclass and its data class.

    `pid` and `prev` are plain text: the fast pass compares them with the stream's pid and the
    previous hash, which fit Hex32/Hex64 already, so equality implies the pattern. `eid` and
    `actor` are checked by `valid_text`.
    """

    KIND: ClassVar[str] = ""
    KIND_BYTES: ClassVar[bytes] = b""
    CHECKS: ClassVar[Checks]
    v: Literal[1]
    pid: str
    seq: Annotated[int, Meta(ge=1, le=MAX_ENTRIES)]
    eid: str
    prev: str
    at_ms: Int53
    actor: str
    data: Any  # each tagged subclass narrows it to its (loosened) data class


class _Remembering:
    """The schema's own check of one text field (pattern and lengths), with a memory."""

    def __init__(self, info: msgspec.inspect.StrType) -> None:
        self.pattern = None if info.pattern is None else re.compile(info.pattern)
        self.min_length = info.min_length
        self.max_length = info.max_length
        self.passed: set[str] = set()

    def __call__(self, value: str) -> bool:
        if value in self.passed:
            return True
        if self.min_length is not None and len(value) < self.min_length:
            return False
        if self.max_length is not None and len(value) > self.max_length:
            return False
        if self.pattern is not None and self.pattern.search(value) is None:  # as msgspec does
            return False
        if len(self.passed) < _REMEMBERED:
            self.passed.add(value)
        return True


def _loosened(cls: type[Struct]) -> tuple[type[Struct], Checks]:
    """Subclass a data class with its constrained text fields as plain `str`, and their checks."""
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    texts = [
        (field.name, field.type)
        for field in info.fields
        if isinstance(field.type, msgspec.inspect.StrType) and field.type != _PLAIN
    ]
    hexes = [(name, _HEX_PATTERNS[t.pattern or ""]) for name, t in texts if _is_hex(t)]
    others = tuple((name, _Remembering(t)) for name, t in texts if not _is_hex(t))
    names = [name for name, _ in hexes]
    # attrgetter of one name returns the bare value: ask twice to always get a tuple.
    getter = operator.attrgetter(*(names * 2 if len(names) == 1 else names)) if names else None
    lengths = tuple(length for _, length in hexes) * (2 if len(names) == 1 else 1)
    loose = msgspec.defstruct(
        f"_Loose{cls.__name__}",
        [(name, str) for name, _ in texts],
        bases=(cls,),
        frozen=True,
        forbid_unknown_fields=True,
        kw_only=True,
    )
    return loose, Checks(getter, lengths, others)


def _is_hex(info: msgspec.inspect.StrType) -> bool:
    return info.pattern in _HEX_PATTERNS and info.min_length is None and info.max_length is None


def _tagged(kind: str, data: type[Struct]) -> type[FastEvent]:
    loose, checks = _loosened(data)
    return cast(
        type[FastEvent],
        msgspec.defstruct(
            f"_Fast_{kind}",
            [("data", loose)],
            bases=(FastEvent,),
            tag=kind,
            namespace={"KIND": kind, "KIND_BYTES": kind.encode("ascii"), "CHECKS": checks},
            frozen=True,
            forbid_unknown_fields=True,
            gc=False,
        ),
    )


_EVENT_CLASSES: Final = tuple(_tagged(kind, cls) for kind, cls in DATA_CLASSES.items())
DECODER: Final[msgspec.json.Decoder[FastEvent]] = msgspec.json.Decoder(
    Union[_EVENT_CLASSES]  # noqa: UP007
)
# Re-encoding sorted and comparing bytes proves canonical form, as decode_event does.
ENCODER: Final = msgspec.json.Encoder(order="sorted")
_ACTOR: Final = _Remembering(cast(msgspec.inspect.StrType, msgspec.inspect.type_info(Actor)))


def valid_text(event: FastEvent) -> bool:
    """Tell whether the event's loosened text fields pass the schema's constraints."""
    eid = event.eid
    if len(eid) != 32 or not _ACTOR(event.actor):
        return False
    data = event.data
    hex_values, hex_lengths, others = event.CHECKS
    if hex_values is None:
        hexes = eid
    else:
        values = hex_values(data)
        if tuple(map(len, values)) != hex_lengths:
            return False
        hexes = eid + "".join(values)
    # Every hex field has its length, and together they hold only lowercase hex digits
    # (bytes.translate deleting those leaves nothing; str.strip is four times slower).
    if hexes.encode().translate(None, _HEX_BYTES):
        return False
    for name, check in others:  # noqa: SIM110 - all() would build a generator per event
        if not check(getattr(data, name)):
            return False
    return True


def fast_encode(event: Event) -> bytes:
    """Return encode_event's bytes for `event`, proven by this module's cheaper checks."""
    # The store seals every event it writes: encode_event's strict decode costs ~3 µs, these
    # checks ~1.4. Whenever they decline, encode_event decides, with its own refusal reason.
    encoded = ENCODER.encode(event)
    try:
        fast = DECODER.decode(encoded)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return encode_event(event)
    hexes = (fast.pid + fast.prev).encode()
    if (
        fast.KIND != event.data.TYPE
        or len(fast.pid) != 32
        or len(fast.prev) != 64
        or hexes.translate(None, _HEX_BYTES)
        or not valid_text(fast)
        or ENCODER.encode(fast) != encoded
    ):
        return encode_event(event)
    return encoded
