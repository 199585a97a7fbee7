"""Deciding an approval the executor asked for (``approval.requested``): the decision goes to
``ingest`` as ``approval.resolved``, the same event the gateway's
``POST /v1/runs/{run_id}/approvals/{approval_id}`` writes; the executor reads it on ``events``
and runs (granted) or refuses (denied) the call.

    await resolve_approval(run_id, approval_id, granted=True, decided_by="alice",
                           reason="checked the amount", tenant="default")
"""

from __future__ import annotations

import orjson

from modelevents.consumers.tools.receipts import now_ms
from modelevents.consumers.tools.results import RunOf, approval_event
from modelevents.schemas.events import Approval
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["resolve_approval", "GRANTED", "DENIED"]

GRANTED, DENIED = "granted", "denied"


async def resolve_approval(run_id: str, approval_id: str, granted: bool, decided_by: str,
                           reason: str = "", *, tenant: str = "default",
                           settings: PipelineSettings | None = None) -> None:
    """Write the decision and wait for Kafka's acknowledgement (acks=all)."""
    settings = settings or PipelineSettings()
    decision = GRANTED if granted else DENIED
    event = approval_event(
        RunOf(run_id=run_id, tenant=tenant), "approval.resolved",
        Approval(approval_id=approval_id, decision=decision, decider=decided_by),
        orjson.dumps({"decision": decision, "decided_by": decided_by, "reason": reason}),
        now_ms())
    producer = await clients.start_producer(settings)
    try:
        await clients.await_acks(settings, [await clients.send_record(
            producer, settings, "ingest", run_id, event)])
    finally:
        await producer.stop()
