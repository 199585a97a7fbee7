"""LazyModelEvent (schemas/lazy_event.py): the header from a projection, the rest decoded on first
use, and what it must keep of a ModelEvent — isinstance, equality, repr, pickling, replace."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelevents.schemas import codec
from modelevents.schemas import events as ev
from modelevents.schemas.errors import CorruptRecord, SchemaError, UndecodableEvent
from modelevents.schemas.lazy_event import (
    DEFERRED_FIELDS,
    HEADER_FIELDS,
    NEITHER,
    LazyModelEvent,
    header_reader,
    lazy_event,
)
from tests.schemas.sample_records import model_event


def record(data: bytes, offset: int = 7) -> SimpleNamespace:
    """What the Kafka client hands out, as far as a LazyModelEvent reads it."""
    return SimpleNamespace(value=data, topic="p.events", partition=1, offset=offset)


def header(data: bytes) -> tuple:
    current, common, whole = header_reader()
    assert data.startswith(current)
    return (common if data.endswith(NEITHER) else whole)(data, 10)


def lazy(event: ev.ModelEvent) -> LazyModelEvent:
    return lazy_event(record(codec.encode(event)), header(codec.encode(event)))


def undecoded(event: LazyModelEvent) -> bool:
    return event._record is not None


def test_every_field_is_a_header_or_a_deferred_one() -> None:
    assert sorted(HEADER_FIELDS + DEFERRED_FIELDS) == sorted(f.name for f in
                                                             dataclasses.fields(ev.ModelEvent))


@pytest.mark.parametrize("elided", [None, ev.Elided("text", "text.delta", 12)])
@pytest.mark.parametrize("kind", sorted(ev.KINDS))
def test_the_header_is_read_without_decoding_the_rest(kind: str, elided: ev.Elided | None
                                                      ) -> None:
    event = dataclasses.replace(model_event(kind, seq=41), elided=elided)
    # Neither piece nor elided: the record ends with 00 00 and its header is read from its
    # first fields; else it is walked whole.
    assert codec.encode(event).endswith(NEITHER) == (event.piece is None and elided is None)
    got = lazy(event)
    assert isinstance(got, ev.ModelEvent)
    assert {f: getattr(got, f) for f in HEADER_FIELDS} == {f: getattr(event, f)
                                                           for f in HEADER_FIELDS}
    assert undecoded(got)
    assert got.payload == event.payload and not undecoded(got)
    assert {f: getattr(got, f) for f in DEFERRED_FIELDS} == {f: getattr(event, f)
                                                             for f in DEFERRED_FIELDS}


@pytest.mark.parametrize("kind", sorted(ev.KINDS))
def test_it_behaves_as_the_model_event_it_stands_for(kind: str) -> None:
    event = model_event(kind, seq=3)
    assert lazy(event) == event and event == lazy(event) and lazy(event) == lazy(event)
    assert not (lazy(event) != event)
    assert lazy(event) != dataclasses.replace(event, seq=4)
    assert lazy(event) != dataclasses.replace(event, payload=ev.Unknown("other"))
    assert repr(lazy(event)) == repr(event)
    unpickled = pickle.loads(pickle.dumps(lazy(event)))
    assert type(unpickled) is ev.ModelEvent and unpickled == event
    assert copy.deepcopy(lazy(event)) == event
    assert dataclasses.asdict(lazy(event)) == dataclasses.asdict(event)
    assert dataclasses.replace(lazy(event), seq=9) == dataclasses.replace(event, seq=9)
    assert lazy(event).plain() == event and type(lazy(event).plain()) is ev.ModelEvent
    assert codec.encode(lazy(event)) == codec.encode(event)
    assert event.projection() == lazy(event).projection()
    with pytest.raises(TypeError):
        hash(lazy(event))  # a ModelEvent is not hashable either


def test_a_field_assigned_before_the_rest_is_decoded_is_kept() -> None:
    event = model_event("text.delta", seq=1)
    got = lazy(event)
    got.payload = ev.Text(0, 0, "changed")
    assert got.payload.text == "changed" and got.source == event.source
    got = lazy(event)
    got.kind = "text.done"
    assert got.kind == "text.done" and got.payload == event.payload


def test_a_record_whose_header_does_not_hold_is_refused_by_the_header_step() -> None:
    data = codec.encode(model_event("text.done", seq=1))
    # Cut inside the header, the event id's length beyond the record; a piece cut short.
    pieced = codec.encode(model_event("text.delta", seq=1))
    for bad in (data[:14], data[:10] + b"\xfe\xff\xff\x0f" + data[11:], pieced[:-2]):
        with pytest.raises(CorruptRecord):
            header(bad)


def test_what_the_header_step_does_not_check_raises_when_the_rest_is_read() -> None:
    data = codec.encode(model_event("text.done", seq=1))
    wrong = model_event("text.delta", seq=1)
    wrong.payload, wrong.piece = ev.Usage(), None
    zero = dataclasses.replace(model_event("text.done", seq=1),
                               elided=ev.Elided("text", "", 0))  # against the contract
    cases = {"1 bytes after the record": data + b"\x00",
             "beyond|cut off|IndexError": data[:-6] + NEITHER,
             "kind text.delta carries a Usage payload, expected Text": codec.encode(wrong),
             "against the contract": codec.encode(zero)}
    for message, bad in cases.items():
        got = lazy_event(record(bad), header(bad))
        assert got.kind in ("text.done", "text.delta") and got.seq == 1
        with pytest.raises(UndecodableEvent, match=message):
            got.payload  # noqa: B018
        if "after" not in message and "contract" not in message:  # codec.decode ignores those
            with pytest.raises(SchemaError):
                codec.decode(bad)


def test_a_payload_that_is_not_utf8_raises_when_touched_and_every_time() -> None:
    event = model_event("text.delta", seq=5)
    event.payload = ev.Text(0, 0, "MARKER")
    data = codec.encode(event)
    assert data.count(b"MARKER") == 1
    broken = data.replace(b"MARKER", b"\xff\xfe\xfd\xfc\xfb\xfa")
    with pytest.raises(SchemaError):
        codec.decode(broken)  # what an eager decode says of it
    got = lazy_event(record(broken, offset=12), header(broken))
    assert (got.run_id, got.seq, got.kind) == ("run-1", 5, "text.delta")  # the header reads
    for _ in range(2):
        with pytest.raises(UndecodableEvent, match=r"p\.events\[1\]@12: corrupt .* past its "
                                                   r"header \(event evt-text.delta of run run-1, "
                                                   r"seq 5\)") as raised:
            got.payload  # noqa: B018
        assert raised.value.event is got
    with pytest.raises(UndecodableEvent):
        got.source  # noqa: B018
    with pytest.raises(UndecodableEvent):
        repr(got)


@settings(max_examples=60, deadline=None)
@given(run_id=st.text(min_size=1, max_size=80), text=st.text(max_size=300),
       seq=st.integers(min_value=-1, max_value=2**62), model=st.one_of(st.none(), st.text()),
       piece=st.one_of(st.none(), st.tuples(st.integers(0, 9), st.integers(1, 10))))
def test_lazy_and_eager_decoding_agree(run_id: str, text: str, seq: int, model: str | None,
                                       piece: tuple[int, int] | None) -> None:
    event = dataclasses.replace(model_event("text.delta", seq=seq), run_id=run_id, model=model,
                                payload=ev.Text(0, 1, text),
                                piece=None if piece is None else ev.Piece(*piece))
    got = lazy(event)
    assert got.run_id == run_id and got.seq == seq and got.piece == event.piece
    assert got == codec.decode(codec.encode(event)) == event


def test_the_event_id_is_read_when_first_asked_for_and_a_broken_one_raises_then() -> None:
    event = model_event("text.delta", seq=2)
    event.event_id = "EVENTMARK"
    data = codec.encode(event)
    got = lazy(event)
    assert got.run_id == event.run_id and got.event_id == "EVENTMARK" and undecoded(got)
    assert got.payload == event.payload and got.event_id == "EVENTMARK"  # kept, record let go
    broken = data.replace(b"EVENTMARK", b"\xff" * 9)
    bad = lazy_event(record(broken, offset=3), header(broken))  # the header reads without it
    assert (bad.run_id, bad.seq, bad.kind) == (event.run_id, 2, "text.delta")
    for _ in range(2):
        with pytest.raises(UndecodableEvent, match=r"p\.events\[1\]@3: .* its event id does not "
                                                   r"decode") as raised:
            bad.event_id  # noqa: B018
        assert raised.value.event is bad
