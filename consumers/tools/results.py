"""The events the executor writes to ``ingest``: tool.result, approval.requested and
approval.resolved, keyed by run id (services/kafka/clients.py sends them acks=all).

Their ids are deterministic (the operation id, the approval id), so a result written again after
a restart is deduped by the processor like any repeated event.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from modelevents.schemas.events import Approval, Envelope, EventSource, ModelEvent, ToolResult
from modelevents.schemas.events import Payload as EventPayload

__all__ = ["tool_result_event", "approval_event", "executor_event", "ADAPTER", "RunOf"]

ADAPTER = "modelevents-tool-executor/1"


@dataclass(frozen=True)
class RunOf:
    """The run an event belongs to, when no event of it is at hand (an approval decision)."""

    run_id: str
    tenant: str
    provider: str = "modelevents"
    api: str = "tools"
    model: str | None = None


def _event_id(run_id: str, kind: str, key: str) -> str:
    return "ex_" + hashlib.sha256(f"{run_id}\x00{kind}\x00{key}".encode()).hexdigest()[:32]


def executor_event(call: ModelEvent | RunOf, kind: str, key: str, payload: EventPayload,
                   envelope: bytes, content_type: str, received_at: int) -> ModelEvent:
    """An event of ``call``'s run (tenant, provider, api, model as the call's)."""
    event_id = _event_id(call.run_id, kind, key)
    return ModelEvent(event_id=event_id, run_id=call.run_id, tenant=call.tenant,
                      provider=call.provider, api=call.api, model=call.model, kind=kind,
                      source=EventSource(frame_id=event_id, index=0, transport="executor"),
                      received_at=received_at, adapter=ADAPTER,
                      envelope=Envelope(content_type=content_type, body=envelope),
                      payload=payload)


def tool_result_event(call: ModelEvent, tool_name: str, tool_call_id: str, output: str,
                      is_error: bool, envelope: bytes, content_type: str,
                      received_at: int) -> ModelEvent:
    return executor_event(call, "tool.result", tool_call_id,
                          ToolResult(tool_name=tool_name, tool_call_id=tool_call_id,
                                     output=output, is_error=is_error),
                          envelope, content_type, received_at)


def approval_event(call: ModelEvent | RunOf, kind: str, approval: Approval, envelope: bytes,
                   received_at: int) -> ModelEvent:
    return executor_event(call, kind, approval.approval_id, approval, envelope,
                          "application/json", received_at)
