"""The canonical scalars of ledger events, and the base of every event's data."""

from __future__ import annotations

from typing import Annotated, ClassVar, Final, Literal

from msgspec import Meta, Struct

from schemas.submission import NetworkStage

# ---------------------------------------------------------------------------------------------
# Scalars of the canonical form

MAX_INT: Final = 2**53 - 1
MAX_MESSAGE_ID_BYTES: Final = 997
MAX_ENTRIES: Final = 128  # a stream with more entries is corrupt

_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
_DOT_ATOM = rf"{_ATEXT}+(?:\.{_ATEXT}+)*"
# The Message-ID validator, restricted to the canonical alphabet (no `"` or `\` anywhere).
MESSAGE_ID_PATTERN: Final = rf"^<{_DOT_ATOM}@(?:{_DOT_ATOM}|\[[!#-Z^-~]*\])>$"

Int53 = Annotated[int, Meta(ge=0, le=MAX_INT)]
Hex32 = Annotated[str, Meta(pattern="^[0-9a-f]{32}$")]
Hex64 = Annotated[str, Meta(pattern="^[0-9a-f]{64}$")]
MessageId = Annotated[str, Meta(pattern=MESSAGE_ID_PATTERN, max_length=MAX_MESSAGE_ID_BYTES)]
Actor = Annotated[
    str, Meta(pattern=r"^(api|dispatcher|recovery|sweeper|operator):[A-Za-z0-9._-]{1,64}$")
]
Endpoint = Annotated[str, Meta(pattern=r"^[A-Za-z0-9.-]{1,253}:[0-9]{1,5}$")]
EnhancedStatus = Annotated[str, Meta(pattern=r"^(|[245]\.[0-9]{1,3}\.[0-9]{1,3})$")]
ReplyCode = Annotated[int, Meta(ge=0, le=599)]
Uid32 = Annotated[int, Meta(ge=1, le=4_294_967_295)]
GraphId = Annotated[str, Meta(pattern=r"^[A-Za-z0-9_=-]{1,1024}$")]

Transport = Literal["smtp", "microsoft_graph"]
PrepareAction = Literal["new", "reply", "reply_all", "forward", "draft"]
SmtpStage = Literal["not_attempted", NetworkStage]
PublicStatus = Literal["prepared", "sending", "accepted", "rejected", "unknown", "expired"]
SentFiling = Literal["pending", "saved", "failed", "unknown", "skipped"]

# A client's self-reported name or version: canonical printable ASCII (no `"` or `\\`).
ClientText = Annotated[str, Meta(pattern=r"^[ !#-\[\]-~]*$", max_length=100)]
# A protocol revision (`2025-06-18`), or "" when unknown: one pattern, since msgspec checks a
# constrained str before a Literal of the same str type and would refuse "".
ProtocolVersion = Annotated[str, Meta(pattern=r"^([0-9]{4}-[0-9]{2}-[0-9]{2})?$")]
ApprovalRefusal = Literal[
    "declined",
    "cancelled",
    "malformed_answer",
    "state_invalid",
    "state_expired",
    "state_replayed",
    "timed_out",
]

# The operator's own words: printable ASCII without `"` or `\\` (the canonical alphabet).
ResolutionNote = Annotated[str, Meta(pattern=r"^[ !#-\[\]-~]*$", max_length=500)]


class EventDataBase(Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Base of every event's `data` object."""

    TYPE: ClassVar[str] = ""
    ANNOTATION: ClassVar[bool] = False
