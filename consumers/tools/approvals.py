"""Deciding an approval the executor asked for (``approval.requested``): the decision goes to
``ingest`` as ``approval.resolved``, the same event the gateway's
``POST /v1/runs/{run_id}/approvals/{approval_id}`` writes; the executor reads it on ``events``
and runs (granted) or refuses (denied) the call — only the call of that tenant and run waiting
for that approval id (the id ``approval.requested`` carries: random, never derived). The decision
names the arguments' hash the id was made for (``arguments_sha256`` in its envelope).

    await resolve_approval(run_id, approval_id, granted=True, decided_by="alice",
                           reason="checked the amount", tenant="default")
"""

from __future__ import annotations

from modelevents.consumers.tools.receipts import now_ms
from modelevents.consumers.tools.results import approval_resolution
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.run_logic.executor_events import DENIED, GRANTED

__all__ = ["resolve_approval", "GRANTED", "DENIED"]


async def resolve_approval(run_id: str, approval_id: str, granted: bool, decided_by: str,
                           reason: str = "", *, tenant: str = "default",
                           settings: PipelineSettings | None = None) -> None:
    """Write the decision and wait for Kafka's acknowledgement (acks=all)."""
    settings = settings or PipelineSettings()
    event = approval_resolution(run_id, tenant, approval_id, granted, decided_by, reason,
                                now_ms())
    producer = await clients.start_producer(settings)
    try:
        await clients.await_acks(settings, [await clients.send_record(
            producer, settings, "ingest", run_id, event)])
    finally:
        await producer.stop()
