"""ProviderFrame: one verbatim delivery from a provider (mirrors avro/provider_frame.avsc).

``stream_frames`` builds the frames of a decoded SSE stream in bulk, field for field what the
constructor builds, without calling it (the bulk path of ``adapters/framing.py``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from modelevents.schemas.vocabulary import Transport


@dataclass(slots=True)
class FramePiece:
    """Where a frame stands among the pieces of a delivery too large for one Kafka record
    (``schemas/pieces.py`` cuts and joins them)."""

    index: int  # 0 … count - 1
    count: int


@dataclass(slots=True)
class ProviderFrame:
    frame_id: str  # deterministic: stream id + index, webhook-id, poll id
    run_key: str
    provider: str
    api: str
    transport: Transport
    received_at: int  # epoch milliseconds
    content_type: str
    body: bytes  # SSE data field, webhook body or poll response body, verbatim
    tenant: str = "default"
    stream_id: str | None = None
    index: int = 0
    sse_event: str | None = None
    cursor: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    http_status: int | None = None
    piece: FramePiece | None = None  # set on each frame of a delivery cut into pieces


# The frame header that names the bundle a gateway call runs under (schemas/bundles.py): the
# adapters, pure, read it from the frame and put it on the call's run.started.
BUNDLE_FRAME_HEADER = "x-modelevents-bundle"

_new = object.__new__
# The decimal text of the first indices, made once: every frame id and event id holds one, and
# formatting an int costs several times a look-up here.
INDEXED = 1024
INDEX_TEXT: tuple[str, ...] = tuple(str(index) for index in range(INDEXED))


def stream_frames(messages: Iterable[tuple[str | None, bytes, str | None, Any]],
                  first_index: int, stream_id: str, run_key: str, provider: str, api: str,
                  transport: Transport, received_at: int, tenant: str) -> list[ProviderFrame]:
    """The frames of one SSE stream's decoded messages, (event, data, id, retry) tuples,
    numbered from ``first_index`` (``frame_id`` ``f"{stream_id}:{index}"``, content type
    ``text/event-stream``): what ``ProviderFrame(...)`` would build for each, field for field.

    Built by ``object.__new__`` and one store per field, not by calling the class: CPython 3.11
    calls a dataclass of this many fields through a tuple of its arguments and a C-level call of
    ``__init__`` (about a third of a frame's making, ~0.1 µs). A field added
    to ProviderFrame must be set here too (tests/schemas/test_fast_records.py checks it)."""
    frames: list[ProviderFrame] = []
    append = frames.append
    index = first_index
    for event, data, cursor, _ in messages:
        frame = _new(ProviderFrame)
        frame.frame_id = f"{stream_id}:{INDEX_TEXT[index] if index < INDEXED else index}"
        frame.run_key = run_key
        frame.provider = provider
        frame.api = api
        frame.transport = transport
        frame.received_at = received_at
        frame.content_type = "text/event-stream"
        frame.body = data
        frame.tenant = tenant
        frame.stream_id = stream_id
        frame.index = index
        frame.sse_event = event
        frame.cursor = cursor
        frame.headers = {}
        frame.http_status = None
        frame.piece = None
        append(frame)
        index += 1
    return frames
