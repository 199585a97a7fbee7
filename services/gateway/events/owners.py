"""Which tenant owns a run id: one durable claim per run id, on ``<prefix>run-owners``.

A run id is claimed once, by one tenant, before anything of the run is sent to a provider or
written (``POST /v1/runs``, ``POST /v1/runs/{id}/frames``); a request of another tenant naming
an owned id is refused as 404, as for a run it cannot see, and every read (``GET /v1/runs/{id}``,
``/events``, ``/messages``, cancel, reconcile) is answered for the owner only. The claim holds
while a run has no state on ``runs`` yet (the worker lagging, a gateway just restarted) and
after its retention, so no other tenant can take an id over and read what is there.

More on this module: docs/architecture.md, ``services/gateway/events/owners.py``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from modelevents.services.gateway.events.topic_view import TopicView
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["RunOwners", "encode_claim", "decode_claim", "claim_document", "CLAIM_VERSION"]

CLAIM_VERSION = 1

# Write one claim and wait for its acknowledgement: (run_id, value) → RecordMetadata.
PublishClaim = Callable[[str, bytes], Awaitable[Any]]


def encode_claim(run_id: str, tenant: str) -> bytes:
    return orjson.dumps({"v": CLAIM_VERSION, "run_id": run_id, "tenant": tenant,
                         "claimed_at": int(time.time() * 1000)})


def decode_claim(raw: bytes | None) -> tuple[str, str] | None:
    """``(run_id, tenant)`` of a claim; None for what is not one (skipped, never an owner)."""
    doc = claim_document(raw)
    return (doc["run_id"], doc["tenant"]) if doc is not None else None


def claim_document(raw: bytes | None) -> dict[str, Any] | None:
    """The whole JSON object of a claim (``modelevents tail --topic run-owners`` prints it);
    None for what is not one: not JSON, not an object, or no non-empty ``run_id`` and
    ``tenant`` strings."""
    try:
        doc = orjson.loads(raw or b"")
    except orjson.JSONDecodeError:
        return None
    if not isinstance(doc, dict):
        return None
    run_id, tenant = doc.get("run_id"), doc.get("tenant")
    if isinstance(run_id, str) and isinstance(tenant, str) and run_id and tenant:
        return doc
    return None


class RunOwners(TopicView):
    """The first claim of every run id on ``run-owners`` (see the module docstring)."""

    def __init__(self, settings: PipelineSettings) -> None:
        super().__init__(settings, "run-owners")
        self.owners: dict[str, str] = {}

    def apply(self, message: Any) -> bool:
        claim = decode_claim(message.value)
        # The key decides the partition, so a claim whose key is not its run id is not one.
        if claim is None or message.key != claim[0].encode():
            return False
        run_id, tenant = claim
        if run_id in self.owners:
            return False  # a later claim (a lost race, or a re-read): the first one stands
        self.owners[run_id] = sys.intern(tenant)
        return True

    def owner(self, run_id: str) -> str | None:
        return self.owners.get(run_id)

    async def claim(self, run_id: str, tenant: str, publish: PublishClaim,
                    timeout: float) -> str | None:
        """The owner of ``run_id`` once ``tenant`` claimed it: ``tenant`` when the claim won (or
        the id was the tenant's already), the winner's tenant when another claim came first.
        None when the view did not read back the claim in ``timeout`` (the caller answers 503;
        the same request again finds out who won)."""
        known = self.owners.get(run_id)
        if known is not None:
            return known
        written = await publish(run_id, encode_claim(run_id, tenant))
        if not await self.wait_read(written.partition, written.offset, timeout):
            return None
        return self.owners.get(run_id)
