"""Which decision a live run falls under and which retest trigger fires (consumers/decisions/
checks.py), on real ModelEvents as the adapters write them."""

from __future__ import annotations

import dataclasses

import pytest

from modelevents.consumers.decisions.checks import Checker, Where, model_matches
from modelevents.consumers.tools.receipts import ToolReceipt
from modelevents.schemas import codec
from modelevents.schemas.events import ModelEvent, RunStarted
from modelevents.schemas.run_state import RunState
from modelevents.services.migration.decisions.make import new_decision
from tests.schemas.sample_records import model_event
from tests.services.migration.decisions import examples

HERE = Where("p.events", 1, 7)


def _checker(**result_fields) -> tuple[Checker, str]:
    bundle = examples.bundle()
    decision = new_decision(bundle, [examples.result(bundle.bundle_id, **result_fields)],
                            owner="platform")
    checker = Checker(window=4)
    checker.update(decision)
    return checker, decision.decision_id


def _event(kind: str, run_id: str = "run_1", model: str | None = "gpt-4o-2024-08-06",
           **changes) -> tuple[ModelEvent, bytes]:
    fields = {"run_id": run_id, "provider": "openai", "api": "openai-responses",
              "model": model, "adapter": examples.adapter_id(), **changes}
    event = dataclasses.replace(model_event(kind, seq=0), **fields)
    if isinstance(event.payload, RunStarted) and "payload" not in changes:
        # The sample names a bundle of its own; these runs name none unless a test says so.
        event = dataclasses.replace(event, payload=dataclasses.replace(event.payload,
                                                                       bundle=None))
    return event, codec.encode(event)


@pytest.mark.parametrize("reported, matches", [
    ("gpt-4o", True), ("gpt-4o-2024-08-06", True), ("gpt-4o-2024-11-20", True),
    ("gpt-4o-mini", False), ("gpt-4o-mini-2024-07-18", False), ("gpt-4.1", False)])
def test_a_run_without_a_bundle_falls_under_its_model_and_its_dated_snapshots(reported, matches):
    assert model_matches("gpt-4o", "gpt-4o-2024-08-06", reported) is matches


def test_events_matching_the_bundle_fire_nothing():
    checker, _ = _checker()
    for kind in ("run.started", "text.delta", "usage", "run.finished"):
        assert checker.on_event(*_event(kind), HERE) == []


def test_another_snapshot_fires_with_the_event_as_evidence():
    checker, decision_id = _checker()
    event, raw = _event("text.delta", model="gpt-4o-2024-11-20")
    [fired] = checker.on_event(event, raw, HERE)
    assert fired.decision_id == decision_id
    d = fired.demotion
    assert (d.trigger, d.expected, d.observed) == ("model_snapshot", "gpt-4o-2024-08-06",
                                                   "gpt-4o-2024-11-20")
    assert (d.run_id, d.event_id, d.topic, d.partition, d.offset) == \
        ("run_1", event.event_id, "p.events", 1, 7)


def test_another_adapter_revision_fires():
    checker, _ = _checker()
    [fired] = checker.on_event(*_event("text.delta", adapter="openai_responses@99"), HERE)
    assert fired.demotion.trigger == "event_adapter"
    assert fired.demotion.observed == "openai_responses@99"


def test_another_event_schema_fires():
    checker, _ = _checker()
    event, raw = _event("text.delta")
    old = b"\xc3\x01" + bytes(8) + raw[10:]  # a writer this installation does not know
    [fired] = checker.on_event(event, old, HERE)
    assert fired.demotion.trigger == "event_schema"


def test_a_run_under_another_model_is_not_checked():
    checker, _ = _checker()
    assert checker.on_event(*_event("text.delta", model="gpt-4o-mini-2024-07-18"), HERE) == []


def _started(bundle: str, run_id: str = "run_1") -> tuple[ModelEvent, bytes]:
    event, _ = _event("run.started", run_id, model=None)
    event = dataclasses.replace(event, payload=RunStarted("in_progress", bundle=bundle))
    return event, codec.encode(event)


def test_a_run_naming_another_bundle_is_not_checked_whatever_its_model():
    checker, _ = _checker()
    checker.on_event(*_started("bnd-other"), HERE)
    assert checker.on_event(*_event("text.delta", model="gpt-4o-2024-11-20"), HERE) == []


def test_a_run_naming_the_bundle_is_checked_whatever_model_it_reports():
    checker, decision_id = _checker()
    checker.on_event(*_started(checker.decisions[decision_id].bundle_id), HERE)
    [fired] = checker.on_event(*_event("text.delta", model="gpt-5-2025-08-07"), HERE)
    assert fired.demotion.observed == "gpt-5-2025-08-07"


def test_a_receipt_of_another_tool_contract_version_fires():
    checker, _ = _checker()
    checker.on_event(*_event("run.started"), HERE)
    receipt = ToolReceipt("op", "k", "run_1", "acme", "get_weather", "c1", "3", 1, "started", 1)
    [fired] = checker.on_receipt(receipt, Where("p.receipts", 0, 3))
    assert fired.demotion.trigger == "tool_contract"
    assert (fired.demotion.expected, fired.demotion.observed) == ("get_weather@2",
                                                                  "get_weather@3")
    same = dataclasses.replace(receipt, schema_version="2")
    assert checker.on_receipt(same, Where("p.receipts", 0, 4)) == []


def test_the_unknown_event_rate_fires_only_over_a_full_window_above_the_recorded():
    checker, _ = _checker(unknown_event_rate=0.25)
    fired = []
    for i, unknown in enumerate([True, False, False, False]):  # 1 in 4: not above 0.25
        run = f"run_{i}"
        checker.on_event(*_event("run.started", run), HERE)
        if unknown:
            checker.on_event(*_event("unknown", run), HERE)
        fired += checker.on_event(*_event("run.finished", run), HERE)
    assert fired == []
    for run in ("run_8", "run_9"):  # the last 4: F F F T, then F F T T
        checker.on_event(*_event("unknown", run), HERE)
        fired += checker.on_event(*_event("run.finished", run), HERE)
    [found] = fired
    assert found.demotion.trigger == "unknown_event_rate"
    assert (found.demotion.expected, found.demotion.observed) == ("0.2500", "0.5000")


def test_the_needs_reconciliation_rate_reads_terminal_run_states():
    checker, _ = _checker(needs_reconciliation_rate=0.0)
    states = [RunState(f"run_{i}", "acme", status="completed", provider="openai",
                       api="openai-responses", model="gpt-4o-2024-08-06",
                       needs_reconciliation=(i == 3)) for i in range(4)]
    fired = [f for s in states for f in checker.on_run_state(s, Where("p.runs", 0, 1))]
    [found] = fired
    assert found.demotion.trigger == "needs_reconciliation_rate"
    assert found.demotion.run_id == "run_3" and found.demotion.topic == "p.runs"


def test_a_changed_capability_entry_fires_and_an_equal_one_does_not():
    checker, _ = _checker()
    entry = examples.manifest_entry("gpt-4o")["capabilities"]
    assert checker.check_capabilities(lambda p, a, m: entry) == []
    [fired] = checker.check_capabilities(lambda p, a, m: {**entry, "tools": False})
    assert fired.demotion.trigger == "capabilities"
    assert fired.demotion.topic is None
