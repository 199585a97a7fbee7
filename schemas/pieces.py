"""How a record too large for Kafka travels: cut into pieces, each under the record limit.

Two things can be larger than one Kafka record (:data:`~modelevents.schemas.limits.MAX_RECORD_BYTES`):

- **A delivery** — one SSE event with a whole generated image, a poll of a response with
  megabytes of text. :func:`split_frame` cuts its body into frames with the same ``frame_id``
  and ``piece = FramePiece(index, count)``, written consecutively to the run's partition;
  :class:`FrameAssembler` (the worker) joins them before any adapter sees the delivery.
- **An event** — a ``text.delta`` or ``tool.call`` carrying such a value, or its verbatim
  envelope. :func:`split_event` cuts it into ``count`` events of the same kind with
  ``piece = Piece(index, count)``, sequenced at consecutive ``seq``. The rule a consumer needs:
  *every string and bytes field of the payload, and ``envelope.body``, is the concatenation of
  that field over the pieces in index order; every other field is the same on each piece.*
  :func:`join_pieces` and :class:`PieceAssembler` do that. Piece 0 keeps the event's id; piece
  ``i`` is ``<id>~<i>``, so re-normalizing the same frames gives the same ids.

Whether an event is cut depends on its content only (:func:`weight`, the UTF-8 size of those
fields), never on its encoding, so ``modelevents normalize`` and the pipeline cut identically.
Strings are cut between characters, never inside one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from modelevents.schemas.annotations import plain_annotations
from modelevents.schemas.errors import IncompletePieces
from modelevents.schemas.events import KIND_PAYLOAD, Envelope, ModelEvent, Piece
from modelevents.schemas.frames import FramePiece, ProviderFrame
from modelevents.schemas.limits import PIECE_BYTES

__all__ = ["weight", "split_event", "split_events", "join_pieces", "PieceAssembler",
           "split_frame", "join_frames", "FrameAssembler", "IncompletePieces"]


def _content_fields(cls: type) -> tuple[str, ...]:
    # Plain annotations: "str", "bytes | None" … (a vocabulary Literal field is "str").
    return tuple(name for name, annotation in plain_annotations(cls).items()
                 if annotation.split(" | ")[0] in ("str", "bytes"))


# Per payload record: the fields that are cut (its strings and bytes), in declaration order.
CONTENT_FIELDS: dict[type, tuple[str, ...]] = {
    cls: _content_fields(cls) for cls in set(KIND_PAYLOAD.values())}
_ENVELOPE = "envelope.body"


def _values(event: ModelEvent) -> list[tuple[str, str | bytes]]:
    payload = event.payload
    out: list[tuple[str, str | bytes]] = []
    for name in CONTENT_FIELDS[type(payload)]:
        value = getattr(payload, name)
        if value:
            out.append((name, value))
    if event.envelope.body:
        out.append((_ENVELOPE, event.envelope.body))
    return out


def weight(event: ModelEvent) -> int:
    """The UTF-8 bytes of the event's content: its payload's strings and bytes, and its envelope."""
    return sum(len(v) if isinstance(v, (bytes, bytearray, memoryview)) else len(v.encode())
               for _, v in _values(event))


def _light(event: ModelEvent, budget: int) -> bool:
    """Certainly under ``budget`` without encoding anything (a character is at most 4 bytes)."""
    payload = event.payload
    total = len(event.envelope.body)
    for name in CONTENT_FIELDS[type(payload)]:
        value = getattr(payload, name)
        if value:
            total += len(value) * (1 if isinstance(value, (bytes, bytearray)) else 4)
    return total <= budget


def split_events(events: list[ModelEvent], budget: int = PIECE_BYTES) -> list[ModelEvent]:
    """``events`` with each one heavier than ``budget`` replaced by its pieces (the common case,
    nothing to cut, returns the same list)."""
    if all(_light(e, budget) for e in events):
        return events
    out: list[ModelEvent] = []
    for event in events:
        out += split_event(event, budget)
    return out


def _cut_points(data: bytes, budget: int, is_text: bool) -> list[int]:
    """Offsets cutting ``data`` into runs of at most ``budget`` bytes, moved back to the start
    of a UTF-8 character when ``is_text``."""
    cuts = [0]
    while len(data) - cuts[-1] > budget:
        cut = cuts[-1] + budget
        if is_text:
            while data[cut] & 0xC0 == 0x80:  # a continuation byte: not a character's start
                cut -= 1
        cuts.append(cut)
    cuts.append(len(data))
    return cuts


def split_event(event: ModelEvent, budget: int = PIECE_BYTES) -> list[ModelEvent]:
    """The event itself when its content fits ``budget``, else its pieces (see the module doc)."""
    if _light(event, budget) or weight(event) <= budget:
        return [event]
    # The content fields, laid end to end, are cut into runs of ``budget`` bytes; each piece
    # takes what falls into its run of every field.
    slices: list[dict[str, str | bytes]] = []
    room = budget
    for name, value in _values(event):
        is_text = isinstance(value, str)
        data = value.encode() if isinstance(value, str) else bytes(value)
        position = 0
        while position < len(data):
            if room == 0 or not slices:
                slices.append({})
                room = budget
            take = min(room, len(data) - position)
            end = position + take
            if is_text and end < len(data):
                while end > position and data[end] & 0xC0 == 0x80:
                    end -= 1
                if end == position:  # no room for even one character: next piece
                    room = 0
                    continue
            chunk = data[position:end]
            slices[-1][name] = chunk.decode() if is_text else chunk
            room -= end - position
            position = end
    count = len(slices)
    pieces = []
    for index, taken in enumerate(slices):
        payload = replace(event.payload, **{
            name: taken.get(name, _empty(getattr(event.payload, name)))
            for name in CONTENT_FIELDS[type(event.payload)]
            if getattr(event.payload, name) is not None})
        body = taken.get(_ENVELOPE, b"")
        assert isinstance(body, bytes)  # the envelope's runs are cut from its bytes
        pieces.append(replace(
            event, event_id=event.event_id if index == 0 else f"{event.event_id}~{index}",
            payload=payload, envelope=Envelope(event.envelope.content_type, body),
            piece=Piece(index, count)))
    return pieces


def _empty(value: Any) -> Any:
    return b"" if isinstance(value, (bytes, bytearray)) else ""


def join_pieces(pieces: Sequence[ModelEvent]) -> ModelEvent:
    """The whole event from all its pieces, in index order (IncompletePieces otherwise)."""
    first = pieces[0] if pieces else None
    if first is None or first.piece is None:
        raise IncompletePieces("join_pieces needs the pieces of one event, index 0 first")
    count = first.piece.count
    if len(pieces) != count or any(p.piece is None or p.piece.index != i or p.piece.count != count
                                   or p.kind != first.kind or p.run_id != first.run_id
                                   for i, p in enumerate(pieces)):
        raise IncompletePieces(
            f"event {first.event_id}: expected pieces 0..{count - 1} of one {first.kind} event, "
            f"got {[(p.piece.index if p.piece else None) for p in pieces]}")
    joined: dict[str, Any] = {}
    for name in CONTENT_FIELDS[type(first.payload)]:
        if getattr(first.payload, name) is None:
            continue
        parts = [getattr(p.payload, name) for p in pieces]
        joined[name] = (b"".join(parts) if isinstance(parts[0], (bytes, bytearray))
                        else "".join(parts))
    body = b"".join(bytes(p.envelope.body) for p in pieces)
    return replace(first, payload=replace(first.payload, **joined),
                   envelope=Envelope(first.envelope.content_type, body), piece=None)


class PieceAssembler:
    """Joins pieces as they are read: ``feed`` gives every whole event (an event that was never
    cut as it is), and None while an event's pieces are still coming. One per run; pieces of a
    run are consecutive, so at most one event is open at a time."""

    def __init__(self) -> None:
        self._open: list[ModelEvent] = []

    def feed(self, event: ModelEvent) -> ModelEvent | None:
        if event.piece is None:
            if self._open:
                raise IncompletePieces(
                    f"event {self._open[0].event_id} ended after {len(self._open)} of its "
                    f"{self._open[0].piece.count} pieces")  # type: ignore[union-attr]
            return event
        if event.piece.index == 0:
            self._open = []
        self._open.append(event)
        if len(self._open) < event.piece.count:
            return None
        whole, self._open = join_pieces(self._open), []
        return whole


def assemble(events: Iterable[ModelEvent]) -> list[ModelEvent]:
    """One run's events, in seq order, with every cut event joined again."""
    assembler = PieceAssembler()
    return [whole for e in events if (whole := assembler.feed(e)) is not None]


# --- frames ------------------------------------------------------------------------------------


def split_frame(frame: ProviderFrame, budget: int = PIECE_BYTES) -> list[ProviderFrame]:
    """The frame itself when its body fits ``budget``, else frames of its body's pieces."""
    body = frame.body
    if len(body) <= budget:
        return [frame]
    cuts = _cut_points(bytes(body), budget, is_text=False)
    count = len(cuts) - 1
    return [replace(frame, body=bytes(body[cuts[i]:cuts[i + 1]]), piece=FramePiece(i, count))
            for i in range(count)]


def join_frames(pieces: Sequence[ProviderFrame]) -> ProviderFrame:
    """The whole delivery from all its pieces, in index order (IncompletePieces otherwise)."""
    first = pieces[0] if pieces else None
    if first is None or first.piece is None:
        raise IncompletePieces("join_frames needs the pieces of one frame, index 0 first")
    count = first.piece.count
    if len(pieces) != count or any(p.piece is None or p.piece.index != i or p.piece.count != count
                                   or p.frame_id != first.frame_id for i, p in enumerate(pieces)):
        raise IncompletePieces(
            f"frame {first.frame_id}: expected pieces 0..{count - 1}, got "
            f"{[(p.frame_id, p.piece.index if p.piece else None) for p in pieces]}")
    return replace(first, body=b"".join(bytes(p.body) for p in pieces), piece=None)


class FrameAssembler:
    """Collects the pieces of deliveries by (run key, frame id); ``add`` gives the whole frame
    when its last piece arrived, else None. Pieces of a frame that start over (a resend) replace
    the ones collected."""

    def __init__(self) -> None:
        self.open: dict[tuple[str, str], list[ProviderFrame]] = {}

    def add(self, frame: ProviderFrame) -> ProviderFrame | None:
        assert frame.piece is not None
        key = (frame.run_key, frame.frame_id)
        collected = self.open.get(key)
        if frame.piece.index == 0 or collected is None:
            collected = self.open[key] = []
        collected.append(frame)
        if len(collected) < frame.piece.count:
            return None
        del self.open[key]
        return join_frames(collected)
