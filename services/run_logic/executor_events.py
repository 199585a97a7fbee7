"""The events the tool executor and the gateway write to ``ingest`` for a run: ``tool.result``,
``approval.requested`` and ``approval.resolved``, keyed by run id (services/kafka/clients.py
sends them acks=all).

Both the executor (``consumers/tools``) and the gateway (``POST /v1/runs/{id}/approvals/{id}``,
``services/gateway/routes/approvals.py``) build them here, so a decision made from the UI is the very
event the executor waits for. Their ids are deterministic (the operation id, the approval id):
a result written again after a restart, or a second decision of one approval, is deduped by the
processor like any repeated event — the first decision stands.

An approval id is unguessable and bound to the arguments it was asked for
(:func:`new_approval_id`): ``apr_`` + 128 random bits + ``.`` + the arguments' hash
(:func:`arguments_hash`, SHA-256 of their canonical JSON), so a decision names what was shown and
nobody can name an approval before it is asked. Both events carry the hash in their envelope
(``arguments_sha256``). Only events built here (transport ``executor``, adapter :data:`ADAPTER`)
decide an executor approval: a provider's own approval items (OpenAI ``mcp_approval_response``)
never do (:func:`decides_executor_approvals`).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

import orjson

from modelevents.schemas.events import Approval, Envelope, EventSource, ModelEvent, ToolResult
from modelevents.schemas.events import Payload as EventPayload
from modelevents.schemas.vocabulary import Transport

__all__ = ["tool_result_event", "approval_event", "approval_resolution", "executor_event",
           "ADAPTER", "TRANSPORT", "RunOf", "GRANTED", "DENIED", "HASH_FIELD", "arguments_hash",
           "new_approval_id", "hash_of_approval", "decides_executor_approvals",
           "decision_hash", "outcome_unknown"]

ADAPTER = "modelevents-tool-executor/1"
# The transport of every event built here: they come from no provider frame (audit verify's
# frames check passes over them; consumers/audit/verify.py).
TRANSPORT: Transport = "executor"
# Approval.decision of an approval.resolved: exactly one of these (the executor runs the call on
# GRANTED and refuses it on anything else).
GRANTED, DENIED = "granted", "denied"
# The envelope field of approval.requested and approval.resolved that names the arguments' hash.
HASH_FIELD = "arguments_sha256"


def arguments_hash(arguments: Any) -> str:
    """SHA-256 (hex) of ``arguments``' canonical JSON: keys sorted, no spaces, UTF-8."""
    canonical = orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()


def new_approval_id(hashed: str) -> str:
    """A fresh approval id for arguments of hash ``hashed``: nobody can derive or guess it."""
    return f"apr_{secrets.token_hex(16)}.{hashed}"


def hash_of_approval(approval_id: str) -> str | None:
    """The arguments' hash an approval id of :func:`new_approval_id` was made for, else None."""
    _, dot, hashed = approval_id.partition(".")
    if approval_id.startswith("apr_") and dot and len(hashed) == 64:
        return hashed
    return None


def decides_executor_approvals(event: ModelEvent) -> bool:
    """Whether ``event`` is a decision the executor may act on: built here (by the executor's
    ``resolve_approval`` or the gateway's approvals route), not a provider stream's item."""
    return event.source.transport == TRANSPORT and event.adapter == ADAPTER


def decision_hash(event: ModelEvent) -> str | None:
    """The arguments' hash an approval event's envelope names (None when it names none)."""
    try:
        body = orjson.loads(event.envelope.body)
    except orjson.JSONDecodeError:
        return None
    hashed = body.get(HASH_FIELD) if isinstance(body, dict) else None
    return hashed if isinstance(hashed, str) else None


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
                      source=EventSource(frame_id=event_id, index=0, transport=TRANSPORT),
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


def outcome_unknown(event: ModelEvent) -> bool:
    """Whether ``event`` is an executor's tool.result saying the call may or may not have acted
    (its envelope's ``outcome`` is ``unknown``): the application reconciles it, nobody retries."""
    if event.adapter != ADAPTER or not getattr(event.payload, "is_error", False):
        return False
    try:
        about = orjson.loads(event.envelope.body)
    except orjson.JSONDecodeError:
        return False
    return isinstance(about, dict) and about.get("outcome") == "unknown"


def approval_event(call: ModelEvent | RunOf, kind: str, approval: Approval, envelope: bytes,
                   received_at: int) -> ModelEvent:
    return executor_event(call, kind, approval.approval_id, approval, envelope,
                          "application/json", received_at)


def approval_resolution(run_id: str, tenant: str, approval_id: str, granted: bool,
                        decided_by: str, reason: str, received_at: int,
                        hashed: str | None = None) -> ModelEvent:
    """The ``approval.resolved`` of one decision: ``decision`` GRANTED or DENIED, ``decider``
    who decided; the envelope keeps the decision, the decider, the reason given and the hash of
    the arguments decided on (``hashed``, else the one the approval id was made for)."""
    decision = GRANTED if granted else DENIED
    return approval_event(
        RunOf(run_id=run_id, tenant=tenant), "approval.resolved",
        Approval(approval_id=approval_id, decision=decision, decider=decided_by),
        orjson.dumps({"decision": decision, "decided_by": decided_by, "reason": reason,
                      HASH_FIELD: hashed or hash_of_approval(approval_id)}),
        received_at)
