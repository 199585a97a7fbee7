"""ProviderFrame: one verbatim delivery from a provider (mirrors avro/provider_frame.avsc)."""

from __future__ import annotations

from dataclasses import dataclass, field

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
