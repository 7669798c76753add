"""The store's seal (ledger.audit_events.fast_encode): for any event it writes exactly what
encode_event writes, and refuses exactly what encode_event refuses, with encode_event's reason."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.audit_events import fast_encode
from schemas.ledger import Event, EventRejected, encode_event
from schemas.ledger_events import EventData
from support.ledger import SAMPLES, VARIANTS, build_events, prepared

ALL_DATA: list[EventData] = [data for variants in VARIANTS.values() for data in variants]
HEXISH = st.text(alphabet="0123456789abcdefABCDEF\n g", max_size=70)
TEXTS = st.one_of(st.text(max_size=40), HEXISH, st.sampled_from(["", "\n", "a\n", "é"]))
ENVELOPE_TEXTS = ("pid", "eid", "prev", "actor")


def base_event(data: EventData) -> Event:
    event = build_events([prepared()])[0][0]
    return msgspec.structs.replace(event, type=data.TYPE, data=data)


def outcome(encode: Any, event: Event) -> bytes | str:
    try:
        return bytes(encode(event))
    except EventRejected as exc:
        return f"refused: {exc}"


@st.composite
def events(draw: st.DrawFn) -> Event:
    data = draw(st.sampled_from(ALL_DATA))
    texts = [name for name, value in msgspec.structs.asdict(data).items() if isinstance(value, str)]
    if texts and draw(st.booleans()):
        data = msgspec.structs.replace(data, **{draw(st.sampled_from(texts)): draw(TEXTS)})
    event = base_event(data)
    if draw(st.booleans()):
        event = msgspec.structs.replace(
            event, **{draw(st.sampled_from(ENVELOPE_TEXTS)): draw(TEXTS)}
        )
    if draw(st.booleans()):
        numbers = st.integers(min_value=-(2**64), max_value=2**64)
        event = msgspec.structs.replace(event, seq=draw(numbers), at_ms=draw(numbers))
    if draw(st.integers(0, 9)) == 0:  # the type of another class than the data's
        event = msgspec.structs.replace(event, type=draw(st.sampled_from(sorted(SAMPLES))))
    return event


class TestFastEncode:
    @pytest.mark.parametrize("data", ALL_DATA, ids=lambda data: type(data).__name__)
    def test_every_sample_event_seals_to_the_canonical_bytes(self, data: EventData) -> None:
        event = base_event(data)
        assert fast_encode(event) == encode_event(event)

    @given(events())
    def test_any_event_seals_or_is_refused_exactly_as_encode_event_says(self, event: Event) -> None:
        assert outcome(fast_encode, event) == outcome(encode_event, event)

    def test_a_hex_field_with_a_trailing_newline_is_left_to_the_strict_encoder(self) -> None:
        # The schema's `$` lets "…\n" through; the fast checks decline, and encode_event decides.
        event = msgspec.structs.replace(base_event(SAMPLES["claimed"]), eid="1" * 32 + "\n")
        assert outcome(fast_encode, event) == outcome(encode_event, event)

    def test_a_type_that_disagrees_with_its_data_is_refused(self) -> None:
        event = msgspec.structs.replace(base_event(SAMPLES["claimed"]), type="prepared")
        with pytest.raises(EventRejected):
            fast_encode(event)
