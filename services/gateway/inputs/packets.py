"""Input packets: what each call of a run was asked, on ``<prefix>run-inputs`` (compacted, key
run_id; the record: ``schemas/run_input.py``; a packet larger than a record goes as pieces keyed
``run_id``, ``run_id#1`` …: ``schemas/run_input_pieces.py``).

    packets = InputPackets(config)
    packet = packets.packet(neutral, run_id=…, tenant=…, call=…, target…)   # redacted
    await gateway.publish_input(packet)          # acknowledged before the call is sent
    await gateway.publish_input(packets.after_call(packet, object_id, cursor))
    latest = await latest_packet(settings, run_id, tenant)

**When.** ``POST /v1/runs`` writes the packet of the call (revision 0) after the run id is
claimed and before anything is sent to the provider: a call whose packet Kafka did not
acknowledge is never made (503, as for any write). When the call ends the packet is written
again (revision 1) with the provider object id and the last resume cursor it learned; that
second write is best effort (the run's state on ``runs`` has the object ids too). A forwarded
run supplies its packet with ``POST /v1/runs/{id}/input`` (``forwarded_input.py``).

**Why a topic of its own** rather than a ``run.request`` event on ``events``: ``events`` is the
worker's output — contiguous ``seq`` from 0 assigned by the sequencer, deduplicated and ordered
per run — and the gateway writes only ``frames``; a packet written by the gateway into that
sequence would need the worker to order it against the provider's output, and a transcript
(megabytes, with images) would travel through every consumer of ``events`` that wants only
deltas. On its own compacted topic the packet is written once by the one process that has the
request, keyed like every record of the run, the latest packet of each run is kept for as long
as the topic is (compaction, not time, removes the earlier revisions), and its schema evolves
apart from the events contract. ``GET /v1/runs/{id}/messages`` and the audit archive read it.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any, Literal, Protocol

from modelevents.adapters.registry import ADAPTERS, api_facts
from modelevents.schemas.run_input import RunInput, canonical_request, request_fingerprint
from modelevents.schemas.run_input_pieces import PacketAssembler, is_packet_key
from modelevents.schemas.transcript import NeutralRequest
from modelevents.services.gateway.inputs.redaction import RedactionConfig, Redactor
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["InputPackets", "latest_packet", "packet_summary", "TOPIC"]

TOPIC = "run-inputs"
Origin = Literal["gateway", "forwarded"]


def _now_ms() -> int:
    return int(time.time() * 1000)


class PacketPolicy(Protocol):
    """What a packet is built under (the gateway's ``GatewayConfig`` is one)."""

    @property
    def redaction(self) -> RedactionConfig: ...

    @property
    def terminal_timeout_s(self) -> float: ...

    def held_secrets(self) -> list[str]: ...


class InputPackets:
    """Builds redacted packets under the gateway's policy (one per gateway, built at start)."""

    def __init__(self, config: PacketPolicy) -> None:
        self.config = config
        self.redactor = Redactor(config.redaction, config.held_secrets())

    def packet(self, neutral: NeutralRequest, *, run_id: str, tenant: str, call: str,
               provider: str, api: str, model: str, origin: Origin = "gateway",
               correlation_id: str | None = None, provider_object_id: str | None = None,
               last_cursor: str | None = None) -> RunInput:
        doc = neutral.model_dump(mode="json", by_alias=True)
        clean, redactions = self.redactor.redact(doc)
        request = canonical_request(clean)
        now = _now_ms()
        adapter = ADAPTERS[api]
        cancellable = (origin == "gateway" and neutral.background
                       and api_facts(api).follow_up.cancel is not None)
        return RunInput(
            run_id=run_id, tenant=tenant, origin=origin, call=call, revision=0, recorded_at=now,
            request=request, fingerprint=request_fingerprint(request),
            adapter=f"{adapter.name}@{adapter.revision}", provider=provider, api=api,
            model=model, redaction=self.redactor.record(redactions),
            correlation_id=correlation_id or neutral.session_id,
            provider_object_id=provider_object_id, last_cursor=last_cursor,
            expires_at=(now + int(self.config.terminal_timeout_s * 1000)
                        if origin == "gateway" else None),
            cancellable_by=[tenant] if cancellable else [], bundle=neutral.bundle)

    def native_packet(self, native: dict[str, Any], *, run_id: str, tenant: str, call: str,
                      provider: str, api: str, model: str,
                      correlation_id: str | None = None, bundle: str | None = None) -> RunInput:
        """The packet of a proxied call: its request is the provider's own, redacted under the
        same policy and stored as ``{"native": {"method", "path", "body"}}`` (there is no
        neutral request: the application sent the provider's; readers tell it by ``native``)."""
        clean, redactions = self.redactor.redact({"native": native})
        request = canonical_request(clean)
        adapter = ADAPTERS[api]
        return RunInput(
            run_id=run_id, tenant=tenant, origin="gateway", call=call, revision=0,
            recorded_at=_now_ms(), request=request, fingerprint=request_fingerprint(request),
            adapter=f"{adapter.name}@{adapter.revision}", provider=provider, api=api,
            model=model, redaction=self.redactor.record(redactions),
            correlation_id=correlation_id, bundle=bundle)

    @staticmethod
    def after_call(packet: RunInput, object_id: str | None, cursor: str | None) -> RunInput:
        """The packet again, as its call ended: what the call learned, a new revision."""
        return replace(packet, revision=packet.revision + 1, recorded_at=_now_ms(),
                       provider_object_id=object_id or packet.provider_object_id,
                       last_cursor=cursor or packet.last_cursor)


async def latest_packet(settings: PipelineSettings, run_id: str, tenant: str) -> RunInput | None:
    """The run's latest packet of ``tenant`` on ``run-inputs`` (None: none recorded). Reads the
    run's partition from its start: compaction keeps it to about one packet per run (a packet
    too large for a record: its pieces, joined; ``schemas/run_input_pieces.py``)."""
    assembler = PacketAssembler()
    records = clients.read_records(settings, TOPIC, run_id=run_id, timeout=30.0, to_end=True,
                                    keys=lambda key: is_packet_key(key, run_id))
    async for record in records:
        raw = record.raw if record is not None else None
        if raw is not None and assembler.accepts(raw):
            assembler.feed(raw)  # later offsets are later revisions
    latest = assembler.latest(run_id)
    return latest if latest is not None and latest.tenant == tenant else None


def packet_summary(packet: RunInput) -> dict[str, Any]:
    """What ``/messages`` says of the packet besides its transcript."""
    summary = {"origin": packet.origin, "call": packet.call, "revision": packet.revision,
            "fingerprint": packet.fingerprint, "adapter": packet.adapter,
            "provider": packet.provider, "api": packet.api, "model": packet.model,
            "correlation_id": packet.correlation_id,
            "provider_object_id": packet.provider_object_id, "last_cursor": packet.last_cursor,
            "recorded_at": packet.recorded_at, "expires_at": packet.expires_at,
            "cancellable_by": packet.cancellable_by,
            "redaction": {"name": packet.redaction.name,
                          "fingerprint": packet.redaction.fingerprint,
                          "redactions": packet.redaction.redactions}}
    if packet.bundle is not None:
        summary["bundle"] = packet.bundle
    return summary
