"""Eval runs built from real adapter output: a recording normalized by the adapters, with the
input packet and receipts the gateway and the tool executor would have written."""

from __future__ import annotations

from pathlib import Path

from modelevents.adapters.registry import normalize_file
from modelevents.consumers.audit.writer import AuditWriter
from modelevents.consumers.tools.receipts import ToolReceipt, encode_receipt
from modelevents.schemas import codec
from modelevents.schemas.bundles import Bundle
from modelevents.schemas.run_input import (
    RedactionPolicy,
    RunInput,
    canonical_request,
    request_fingerprint,
)
from modelevents.schemas.run_input import encode as encode_run_input
from modelevents.services.migration.eval.corpus import EXAMPLE_CORPUS, Corpus
from modelevents.services.migration.eval.evidence import RunEvidence, eval_run_id
from modelevents.services.simulator.scenarios import ScenarioRegistry

REGISTRY = ScenarioRegistry.default([EXAMPLE_CORPUS / "recordings"], with_corpus=False)
T0 = 1_767_225_600_000


def packet(run_id: str, the_bundle: Bundle, provider: str | None = None) -> RunInput:
    """The input packet the gateway writes for the run (the request names its bundle)."""
    request = canonical_request({"bundle": the_bundle.bundle_id})
    return RunInput(run_id=run_id, tenant="default", origin="gateway", call="c1", revision=1,
                    recorded_at=T0, request=request, fingerprint=request_fingerprint(request),
                    adapter=the_bundle.request_adapter,
                    provider=provider or the_bundle.target.provider, api=the_bundle.target.api,
                    model=the_bundle.target.model,
                    redaction=RedactionPolicy("none", [], [], "none"))


def write_archive(root: Path, runs: list[RunEvidence]) -> Path:
    """An audit archive of the runs' events, input packets and receipts, as `audit run` keeps
    them from the topics."""
    writer = AuditWriter(root)
    offsets: dict[str, int] = {}

    def add(topic: str, key: str, value: bytes) -> None:
        offset = offsets.get(topic, 0)
        offsets[topic] = offset + 1
        writer.add(topic, 0, offset, T0 + offset, key.encode(), value)

    for run in runs:
        for packet_ in run.inputs:
            add("run-inputs", run.run_id, encode_run_input(packet_))
        for event in run.events:
            add("events", run.run_id, codec.encode(event))
        for receipt_ in run.receipts:
            add("receipts", run.run_id, encode_receipt(receipt_))
    writer.close()
    return root


def bundle(name: str, provider: str, api: str, model: str, tools: list | None = None) -> Bundle:
    return Bundle.model_validate({
        "name": name, "instruction": {"text": "Answer briefly.", "version": "1"},
        "target": {"provider": provider, "api": api, "model": model},
        "request_adapter": f"{api}@1", "event_adapters": {api: f"{api}@1"},
        "event_schema": "ModelEvent@4", "capabilities": {"api": api},
        "tools": [{"declaration": t.model_dump(mode="json"), "schema_version": "1"}
                  for t in tools or ()]})


def run_of(task_id: str, scenario: str, the_bundle: Bundle, repeat: int = 0,
           provider: str | None = None, receipts: list[ToolReceipt] | None = None,
           nonce: str = "n0") -> RunEvidence:
    """The run of ``task_id`` under ``the_bundle`` as the simulator's ``scenario`` answers it."""
    run_id = eval_run_id(task_id, repeat, nonce)
    sc = REGISTRY.resolve(scenario, the_bundle.target.api)
    result = normalize_file(Path(sc.path), api=sc.api or "auto", run_id=run_id)
    events = result.events
    for i, event in enumerate(events):
        event.received_at = T0 + 100 + 10 * i
    return RunEvidence(run_id, events, None, [packet(run_id, the_bundle, provider)],
                       receipts or [])


def receipt(run_id: str, call_id: str, tool: str, outcome: str, op: str = "op1",
            postcondition: str | None = "confirmed", error_class: str | None = None,
            cost: float = 0.0) -> ToolReceipt:
    return ToolReceipt(op, f"k-{op}", run_id, "default", tool, call_id, "1", 1, "finished",
                       T0 + 500, T0 + 900, outcome, postcondition=postcondition,
                       error_class=error_class, cost=cost)


def runs_for(corpus: Corpus, the_bundle: Bundle, repeat: int = 0) -> list[RunEvidence]:
    """Every task of the corpus that names a scenario for the bundle's API, run once."""
    api = the_bundle.target.api
    return [run_of(t.id, t.simulator[api], the_bundle, repeat, nonce=the_bundle.name)
            for t in corpus.tasks if api in t.simulator]
