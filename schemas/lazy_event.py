"""A ModelEvent read in two steps: its header from the record's bytes, its body on first use.

The consumer API (``consumers/client.py``) drops most of what a subscription reads before a user
sees it — duplicates, other tenants, other kinds — and a router that hands events on by kind and
run needs none of their payloads. Decoding a whole ModelEvent (~15 fields, three nested records,
the payload) costs about twice what the Kafka client spends handing out its bytes; this module
splits that cost:

* :func:`header_reader` gives, for a record of the current ModelEvent schema, a compiled
  projection (``schemas/avro_projection.py``) that walks the *whole* record — every length,
  varint, boolean, union branch and the record's end are checked, so a record whose structure
  does not hold is refused here (:class:`~modelevents.schemas.errors.CorruptRecord`) — and
  builds only the header: :data:`HEADER_FIELDS` and the payload's union branch.
* :class:`LazyModelEvent` is a ``ModelEvent`` (a subclass: ``isinstance``, ``match``,
  ``dataclasses.fields`` / ``replace`` / ``asdict`` hold) whose header fields are set from that
  projection and whose :data:`DEFERRED_FIELDS` — ``payload``, ``source``, ``envelope``,
  ``received_at``, ``adapter`` — are decoded from the kept bytes, all at once, the first time
  one of them is read. Equality compares field by field with any ModelEvent (lazy or not),
  ``repr`` and pickling are a plain ModelEvent's (a pickle loads as a plain ModelEvent).

What the projection does not check is the UTF-8 of the strings it skips (the payload's, the
frame id, the adapter, the content type): decoding them is most of what it saves. Such a record
passes the header step and raises :class:`~modelevents.schemas.errors.UndecodableEvent` (a
SchemaError naming the record's topic, partition and offset, and the event) when a deferred
field is first read, and again on every later read: nothing half-decoded is ever returned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from modelevents.schemas import codec
from modelevents.schemas.avro_projection import BRANCH, compile_projection, named_records
from modelevents.schemas.errors import CorruptRecord, UndecodableEvent
from modelevents.schemas.events import KIND_PAYLOAD, Elided, ModelEvent, Piece

__all__ = ["HEADER_FIELDS", "DEFERRED_FIELDS", "PAYLOAD_BRANCH", "LazyModelEvent",
           "header_reader", "lazy_event"]

# Read by the projection, in wire order: what dedupe, ordering, filters and piece assembly use.
HEADER_FIELDS = ("event_id", "run_id", "tenant", "provider", "api", "model", "kind", "seq",
                 "piece", "elided")
# Decoded together on first use.
DEFERRED_FIELDS = ("source", "received_at", "adapter", "envelope", "payload")

_PROJECTION: dict[str, Any] = {name: True for name in HEADER_FIELDS}
_PROJECTION["payload"] = {BRANCH: {}}  # the branch's name only: the payload is skipped

# kind → the full name of the payload record its events carry: a header whose branch is another
# is refused, as codec.decode refuses it (a kind not of the vocabulary is let through by both).
PAYLOAD_BRANCH = {kind: f"{codec.NAMESPACE}.{cls.__name__}" for kind, cls in KIND_PAYLOAD.items()}

Header = tuple[str, str, str, str, str, str | None, str, int, tuple[str, None], Piece | None,
               Elided | None]
_header: list[tuple[bytes, Callable[[bytes, int], Header]]] = []
# The deferred fields' values, as their dataclasses, from a record of the current schema.
_body: list[Callable[[bytes, int], tuple[Any, ...]]] = []


def header_reader() -> tuple[bytes, Callable[[bytes, int], Header]]:
    """The ten bytes a record of the current ModelEvent schema begins with (magic and
    fingerprint), and its header projection: ``read(data, 10)`` gives the
    :data:`HEADER_FIELDS` in wire order with ``(payload branch, None)`` before ``piece``. A
    record that begins otherwise (another record, an earlier schema version) is for
    ``codec.decode``."""
    if not _header:
        schema_set = codec.schemas()
        name = f"{codec.NAMESPACE}.ModelEvent"
        schema = schema_set.current[name]
        named = named_records(schema)
        _body.append(compile_projection(schema, named, dict.fromkeys(DEFERRED_FIELDS, True),
                                        types=codec.EVENT_TYPES))
        read = compile_projection(schema, named, _PROJECTION,
                                  types={"Piece": Piece, "Elided": Elided})
        _header.append((codec.MAGIC + schema_set.current_fingerprint[name], read))
    return _header[0]


class LazyModelEvent(ModelEvent):
    """A ModelEvent whose :data:`DEFERRED_FIELDS` are decoded from ``_record`` on first use.

    ``_record`` is what the Kafka client handed out (``value``, ``topic``, ``partition``,
    ``offset``); it is let go once the fields are decoded."""

    __slots__ = ("_record",)
    _record: Any  # the Kafka client's record, None once decoded

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Built whole (dataclasses.replace builds one so): nothing left to decode.
        self._record = None
        super().__init__(*args, **kwargs)

    def _decode_rest(self) -> None:
        record = self._record
        data = record.value
        try:
            values = _body[0](data, 10)
        except CorruptRecord as exc:
            where = (f"{record.topic}[{record.partition}]@{record.offset}"
                     if hasattr(record, "offset") else "the record")
            raise UndecodableEvent(
                f"{where}: corrupt {codec.NAMESPACE}.ModelEvent record ({len(data)} bytes) "
                f"past its header (event {self.event_id} of run {self.run_id}, seq {self.seq}): "
                f"{exc}", self) from exc
        for (_, slot), value in zip(_DEFERRED_SLOTS, values):
            slot.__set__(self, value)
        self._record = None

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


_FIELDS = tuple(ModelEvent.__dataclass_fields__)
# ModelEvent's own slot descriptors, where the deferred values are kept.
_DEFERRED_SLOTS = tuple((name, ModelEvent.__dict__[name]) for name in DEFERRED_FIELDS)


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

_new = object.__new__


def lazy_event(record: Any, header: Header) -> LazyModelEvent:
    """A LazyModelEvent of the ``header`` the :func:`header_reader` read from ``record.value``."""
    event = _new(LazyModelEvent)
    event._record = record
    (event.event_id, event.run_id, event.tenant, event.provider, event.api, event.model,
     event.kind, event.seq, _, event.piece, event.elided) = header
    return event
