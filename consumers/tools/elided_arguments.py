"""The arguments of a ``tool.call`` too large to be carried on it (``elided``: README "How big
payloads travel"), rebuilt from the run's ``tool.call.delta`` events on ``events``.

Only such a call pays for it: the run's partition is read once, up to the call (its deltas
come before it), its events joined from their pieces and deduplicated by ``seq``.
"""

from __future__ import annotations

from typing import cast

from modelevents.consumers.client import rebuild_elided
from modelevents.schemas.events import ModelEvent, ToolCall
from modelevents.schemas.pieces import PieceAssembler
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["rebuilt_arguments"]


async def rebuilt_arguments(settings: PipelineSettings, call: ModelEvent) -> str:
    """``call``'s arguments, whole. Raises ValueError (or IncompletePieces, a SchemaError) when
    the deltas read do not add up to the elided size."""
    payload = cast(ToolCall, call.payload)
    assembler = PieceAssembler()
    seen: set[int] = set()
    deltas: list[ModelEvent] = []
    async for record in clients.read_records(settings, "events", run_id=call.run_id,
                                             to_end=True, timeout=2.0):
        event = record.value if record is not None else None
        if not isinstance(event, ModelEvent) or event.seq in seen:
            continue
        if call.seq >= 0 and event.seq >= call.seq:
            break
        seen.add(event.seq)
        whole = assembler.feed(event)
        if (whole is not None and whole.kind == "tool.call.delta"
                and getattr(whole.payload, "tool_call_id", None) == payload.tool_call_id):
            deltas.append(whole)
    return str(rebuild_elided(call, deltas))
