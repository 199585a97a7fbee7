"""Eval runs built from real adapter output: a recording normalized by the adapters, with the
input packet and receipts the gateway and the tool executor would have written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson

from modelevents.adapters.registry import normalize_file
from modelevents.consumers.tools.receipts import ToolReceipt
from modelevents.schemas.bundles import Bundle
from modelevents.services.migration.eval.corpus import EXAMPLE_CORPUS, Corpus
from modelevents.services.migration.eval.evidence import RunEvidence, eval_run_id
from modelevents.services.simulator.scenarios import ScenarioRegistry

REGISTRY = ScenarioRegistry.default([EXAMPLE_CORPUS / "recordings"], with_corpus=False)
T0 = 1_767_225_600_000


@dataclass
class Packet:
    provider: str
    api: str
    model: str
    request: str
    recorded_at: int


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
    request = orjson.dumps({"bundle": the_bundle.bundle_id}).decode()
    packet = Packet(provider or the_bundle.target.provider, the_bundle.target.api,
                    the_bundle.target.model, request, T0)
    return RunEvidence(run_id, events, None, [packet], receipts or [])


def receipt(run_id: str, call_id: str, tool: str, outcome: str, op: str = "op1",
            postcondition: str | None = "confirmed", error_class: str | None = None,
            cost: float = 0.0) -> ToolReceipt:
    return ToolReceipt(op, f"k-{op}", run_id, "default", tool, call_id, "1", 1, "finished",
                       T0 + 500, T0 + 900, outcome, postcondition=postcondition,
                       error_class=error_class, cost=cost)


def runs_for(corpus: Corpus, the_bundle: Bundle, repeat: int = 0) -> list[RunEvidence]:
    """Every task of the corpus that names a scenario for the bundle's API, run once."""
    api = the_bundle.target.api
    return [run_of(t.id, t.simulator[api], the_bundle, repeat, nonce=f"r{repeat}")
            for t in corpus.tasks if api in t.simulator]
