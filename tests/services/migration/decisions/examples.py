"""A bundle and eval results as the bundle and eval commands would give them, for the decision
tests: the target is the OpenAI Responses fixture's model, the adapters and event schema are the
installed ones, the capability entry is the shipped manifest's."""

from __future__ import annotations

from typing import Any

from modelevents.adapters.registry import ADAPTERS
from modelevents.schemas.bundles import Bundle
from modelevents.services.gateway.calls.capabilities import load_manifest
from modelevents.services.migration.decisions.eval_results import EvalSummary
from modelevents.services.migration.decisions.triggers import current_event_schema

API = "openai-responses"


def adapter_id(api: str = API) -> str:
    cls = ADAPTERS[api]
    return f"{cls.name}@{cls.revision}"


def manifest_entry(model: str) -> dict[str, Any]:
    found = load_manifest().lookup("openai", API, model)
    assert found is not None
    return {"manifest_version": 1, "capabilities": found.capabilities.model_dump(mode="json")}


def bundle(snapshot: str = "gpt-4o-2024-08-06", model: str = "gpt-4o", **overrides: Any
           ) -> Bundle:
    doc: dict[str, Any] = {
        "name": "support-answers",
        "instruction": {"text": "Answer the customer's question.", "version": "3"},
        "target": {"provider": "openai", "api": API, "model": model, "snapshot": snapshot},
        "request_adapter": "openai_responses_request@1",
        "event_adapters": {API: adapter_id()},
        "event_schema": current_event_schema(),
        "tools": [{"declaration": {"name": "get_weather",
                                   "parameters": {"type": "object", "properties": {}}},
                   "schema_version": "2"}],
        "capabilities": manifest_entry(model),
    }
    doc.update(overrides)
    return Bundle.model_validate(doc)


def result(bundle_id: str, result_id: str = "evr-1", runs: int = 40, **fields: Any
           ) -> EvalSummary:
    values: dict[str, Any] = {"rejected": 2, "errors": 1, "refusals": 2,
                              "unknown_event_rate": 0.0, "needs_reconciliation_rate": 0.05}
    values.update(fields)
    return EvalSummary(result_id=result_id, bundle_id=bundle_id, runs=runs, **values)
