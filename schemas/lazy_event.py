"""A ModelEvent read in two steps: its header from the record's bytes, its body on first use.

More on this module: docs/schemas.md, ``schemas/lazy_event.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from modelevents.schemas import codec
from modelevents.schemas.avro_projection import compile_projection, named_records
from modelevents.schemas.errors import CorruptRecord, UndecodableEvent
from modelevents.schemas.events import KIND_PAYLOAD, Elided, ModelEvent, Piece

__all__ = ["HEADER_FIELDS", "DEFERRED_FIELDS", "NEITHER", "LazyModelEvent", "header_reader",
           "lazy_event"]

# Read by the projection, in wire order: what dedupe, ordering, filters and piece assembly use.
HEADER_FIELDS = ("event_id", "run_id", "tenant", "provider", "api", "model", "kind", "seq",
                 "piece", "elided")
# Decoded together on first use.
DEFERRED_FIELDS = ("source", "received_at", "adapter", "envelope", "payload")

# How a record with neither piece nor elided ends: both unions' null branch.
NEITHER = b"\x00\x00"

# The HEADER_FIELDS but the event id, then where the deferred fields begin (None: read them from
# the start).
Header = tuple[str, str, str, str, str | None, str, int, Piece | None, Elided | None, int | None]
Reader = Callable[[bytes, int], Header]
_header: list[tuple[bytes, Reader, Reader]] = []
# The deferred fields, as their dataclasses, then piece and elided, from a current record: the
# first from the record's start (every field walked), the second from where ``source`` begins.
_body: list[Callable[[bytes, int], tuple[Any, ...]]] = []
# The event id alone (the record's first field), read when it is first asked for.
_event_id: list[Callable[[bytes, int], tuple[Any, ...]]] = []


def header_reader() -> tuple[bytes, Reader, Reader]:
    """``(begins, common, whole)``: the ten bytes a record of the current ModelEvent schema
    begins with (magic and fingerprint; a record that begins otherwise — another record, an
    earlier schema version — is for ``codec.decode``), and its header projections:
    ``common(data, 10)`` for a record that ends with :data:`NEITHER`, ``whole(data, 10)`` for
    the others. Both give the :data:`HEADER_FIELDS` in wire order but the event id (walked,
    read when first asked for: nothing on the way to a handler reads it), then where the
    deferred fields begin (``common``: the body is read on from there; ``whole``: None)."""
    if not _header:
        schema_set = codec.schemas()
        name = f"{codec.NAMESPACE}.ModelEvent"
        schema = schema_set.current[name]
        named = named_records(schema)
        wanted = {**dict.fromkeys(HEADER_FIELDS, True), "event_id": False}
        _event_id.append(compile_projection(schema, named, {"event_id": True}, prefix=True))
        body = dict.fromkeys((*DEFERRED_FIELDS, "piece", "elided"), True)
        _body.append(compile_projection(schema, named, body, types=codec.EVENT_TYPES))
        # A common record's header fields were all read, every string decoded: the rest of it
        # is read from where they end, not walked again.
        first = [f["name"] for f in schema["fields"]].index(DEFERRED_FIELDS[0])
        _body.append(compile_projection({**schema, "fields": schema["fields"][first:]}, named,
                                        body, types=codec.EVENT_TYPES))
        # Run id to model: the same as the event before's for most events (a run's events
        # come together on its partition); the kind: one of a few.
        repeated = {**dict.fromkeys(("run_id", "tenant", "provider", "api", "model"), "last"),
                    "kind": "memo"}
        common = compile_projection(schema, named, {**dict.fromkeys(HEADER_FIELDS[:8], True),
                                                    "event_id": False, **repeated},
                                    prefix=True, to_end=False, pad=2)
        whole = compile_projection(schema, named, wanted,
                                   types={"Piece": Piece, "Elided": Elided}, pad=1)
        _header.append((codec.MAGIC + schema_set.current_fingerprint[name], common, whole))
    return _header[0]


class LazyModelEvent(ModelEvent):
    """A ModelEvent whose :data:`DEFERRED_FIELDS` are decoded from ``_record`` on first use.

    ``_record`` is what the Kafka client handed out (``value``, ``topic``, ``partition``,
    ``offset``); it is let go once the fields are decoded."""

    # ``_id``: the event id (ModelEvent's own slot for it is not used: a store into a slot of
    # this class is cheaper than through the base class's descriptor), _UNREAD until read.
    __slots__ = ("_record", "_at", "_id")
    _record: Any  # the Kafka client's record, None once decoded
    _at: int | None  # where the deferred fields begin in its value; None: walk it from the start
    _id: str

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Built whole (dataclasses.replace builds one so): nothing left to decode.
        self._record = None
        super().__init__(*args, **kwargs)

    def _decode_rest(self) -> None:
        record = self._record
        data = record.value
        try:
            at = self._at
            source, received_at, adapter, envelope, payload, piece, elided = (
                _body[0](data, 10) if at is None else _body[1](data, at))
            expected = KIND_PAYLOAD.get(self.kind)
            if expected is not None and type(payload) is not expected:
                raise CorruptRecord(f"kind {self.kind} carries a {type(payload).__name__} "
                                    f"payload, expected {expected.__name__}")
            if (piece is not None or elided is not None) and data.endswith(NEITHER):
                raise CorruptRecord(f"a piece {piece} or elided {elided} against the contract")
        except CorruptRecord as exc:
            raise UndecodableEvent(
                f"{_where(record)}: corrupt {codec.NAMESPACE}.ModelEvent record "
                f"({len(data)} bytes) "
                f"past its header (event {self.event_id} of run {self.run_id}, seq {self.seq}): "
                f"{exc}", self) from exc
        _set_source(self, source)
        _set_received_at(self, received_at)
        _set_adapter(self, adapter)
        _set_envelope(self, envelope)
        _set_payload(self, payload)
        self._event_id()  # the record is let go: the event id is read from it first
        self._record = None

    def _event_id(self) -> str:
        """The event id: set, or read from the record (and kept)."""
        value: str = self._id
        if value is not _UNREAD:
            return value
        record = self._record
        try:
            data = record.value
            n = data[10]
            if n < 128 and not n & 1:  # a one-byte length, an id under 64 bytes (the header
                value = data[11:11 + (n >> 1)].decode()  # step checked it is within the record)
            else:
                value = _event_id[0](data, 10)[0]
        except (CorruptRecord, UnicodeDecodeError) as exc:
            raise UndecodableEvent(
                f"{_where(record)}: corrupt {codec.NAMESPACE}.ModelEvent record: its event id "
                f"does not decode (run {self.run_id}, seq {self.seq}): {exc}", self) from exc
        self._id = value
        return value

    def _set_id(self, value: str) -> None:
        self._id = value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ModelEvent):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in _FIELDS)

    __hash__ = None  # type: ignore[assignment]  # as ModelEvent: mutable, so unhashable

    def plain(self) -> ModelEvent:
        """The same event as a plain ModelEvent (decoding what is not decoded yet)."""
        return ModelEvent(**{f: getattr(self, f) for f in _FIELDS})

    def __repr__(self) -> str:
        return repr(self.plain())

    def __reduce__(self) -> tuple[Any, ...]:
        return (ModelEvent, tuple(getattr(self, f) for f in _FIELDS))


def _where(record: Any) -> str:
    return (f"{record.topic}[{record.partition}]@{record.offset}" if hasattr(record, "offset")
            else "the record")


_FIELDS = tuple(ModelEvent.__dataclass_fields__)
# In the event id's slot until it is read (a slot not set would raise AttributeError: costlier
# to catch than this is to compare).
_UNREAD: Any = object()
# ModelEvent's own slot descriptors, where the deferred values are kept.
_DEFERRED_SLOTS = tuple((name, ModelEvent.__dict__[name]) for name in DEFERRED_FIELDS)
_set_source, _set_received_at, _set_adapter, _set_envelope, _set_payload = (
    slot.__set__ for _, slot in _DEFERRED_SLOTS)


def _deferred(name: str, slot: Any) -> property:
    def get(self: LazyModelEvent) -> Any:
        if self._record is not None:
            self._decode_rest()
        return slot.__get__(self)

    def set_(self: LazyModelEvent, value: Any) -> None:
        if self._record is not None:  # the others first, or decoding them would undo this
            self._decode_rest()
        slot.__set__(self, value)

    return property(get, set_, doc=f"ModelEvent.{name}, decoded on first use")


for _name, _slot in _DEFERRED_SLOTS:
    setattr(LazyModelEvent, _name, _deferred(_name, _slot))
# (setattr: a property over a slot of the base class is what mypy's slots check refuses.)
setattr(LazyModelEvent, "event_id", property(  # noqa: B010
    LazyModelEvent._event_id, LazyModelEvent._set_id, doc="ModelEvent.event_id, read on first use"))

_new = object.__new__


def lazy_event(record: Any, header: Header) -> LazyModelEvent:
    """A LazyModelEvent of the ``header`` the :func:`header_reader` read from ``record.value``."""
    event = _new(LazyModelEvent)
    event._record = record
    event._id = _UNREAD
    (event.run_id, event.tenant, event.provider, event.api, event.model, event.kind, event.seq,
     event.piece, event.elided, event._at) = header
    return event
