"""Which decision a live run falls under, and which retest trigger a record of it fires — the
watcher's logic without Kafka (consumers/decisions/watcher.py feeds it).

A run falls under every current decision on the bundle its ``run.started`` names (the
``bundle`` field, read with getattr: events written before it existed have none). A run that
names no bundle falls under the decisions whose target has its provider and API and whose model
is the run's reported model, or that model's dated snapshot (``claude-sonnet-4-5`` covers
``claude-sonnet-4-5-20250929``, not ``gpt-4o`` ``gpt-4o-mini``: after the model's name and a
dash a snapshot goes on with a digit).

Triggers, checked on each record of a run under a decision:

    model_snapshot             an event reports a model other than the recorded snapshot
    event_adapter              an event was written by another adapter revision for its API
    event_schema               an event was written with another ModelEvent schema version
    tool_contract              a receipt names another schema version of a recorded tool
    unknown_event_rate         over the last ``window`` finished runs, the share with an
                               ``unknown`` event is above the recorded rate (+ ``margin``)
    needs_reconciliation_rate  the same for terminal RunStates needing reconciliation
    capabilities               (checked by the watcher at start and periodically)

Each demotion carries the record that showed it: run, event id, topic, partition, offset.
"""

from __future__ import annotations

import time
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from modelevents.schemas.decision_record import Decision, Demotion
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.run_state import RunState
from modelevents.services.migration.decisions.triggers import (
    capability_difference,
    event_schema_of,
    same_event_schema,
)

__all__ = ["Checker", "Where", "Fired", "model_matches", "DEFAULT_WINDOW", "MAX_RUNS"]

DEFAULT_WINDOW = 20
# Runs remembered (which decisions each falls under); the oldest is forgotten beyond this.
MAX_RUNS = 200_000


@dataclass(frozen=True)
class Where:
    """The record a check read: its topic, partition and offset."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class Fired:
    decision_id: str
    demotion: Demotion


@dataclass
class _Run:
    bundle: str | None = None
    decisions: tuple[str, ...] | None = None  # None: not matched yet (no model reported)
    unknown: bool = False
    finished: bool = False
    reconciled: bool = False  # its terminal RunState was counted


@dataclass
class _Window:
    unknown: deque[bool] = field(default_factory=deque)
    reconciliation: deque[bool] = field(default_factory=deque)


def model_matches(target_model: str, snapshot: str | None, reported: str) -> bool:
    if reported in (target_model, snapshot):
        return True
    rest = reported.removeprefix(target_model + "-")
    return rest != reported and rest[:1].isdigit()


def _now_ms() -> int:
    return int(time.time() * 1000)


class Checker:
    """The current decisions and what live traffic showed of them so far."""

    def __init__(self, window: int = DEFAULT_WINDOW, margin: float = 0.0) -> None:
        self.window = window
        self.margin = margin
        self.decisions: dict[str, Decision] = {}
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._windows: dict[str, _Window] = {}
        # Runs found under each decision: what says the watcher sees the decision's traffic.
        self.runs_matched: Counter[str] = Counter()

    # --- decisions ------------------------------------------------------------------------

    def update(self, decision: Decision) -> None:
        """A revision read from the decisions topic (a higher revision replaces a lower)."""
        known = self.decisions.get(decision.decision_id)
        if known is None or decision.revision >= known.revision:
            self.decisions[decision.decision_id] = decision

    def current(self) -> list[Decision]:
        return [d for d in self.decisions.values() if d.current]

    # --- runs -----------------------------------------------------------------------------

    def _run(self, run_id: str) -> _Run:
        run = self._runs.get(run_id)
        if run is None:
            run = self._runs[run_id] = _Run()
            if len(self._runs) > MAX_RUNS:
                self._runs.popitem(last=False)
        return run

    def _match(self, run: _Run, provider: str | None, api: str | None, model: str | None
               ) -> tuple[str, ...]:
        if run.decisions is not None:
            return run.decisions
        if run.bundle is not None:
            run.decisions = tuple(d.decision_id for d in self.current()
                                  if d.bundle_id == run.bundle)
        elif model is not None:
            run.decisions = tuple(
                d.decision_id for d in self.current()
                if d.target.provider == provider and d.target.api == api
                and model_matches(d.target.model, d.target.snapshot, model))
        self.runs_matched.update(run.decisions or ())
        return run.decisions or ()

    def _under(self, ids: tuple[str, ...]) -> list[Decision]:
        return [d for i in ids if (d := self.decisions.get(i)) is not None and d.current]

    # --- records --------------------------------------------------------------------------

    def on_event(self, event: ModelEvent, raw: bytes, where: Where) -> list[Fired]:
        run = self._run(event.run_id)
        if event.kind == "run.started" and run.decisions is None:
            run.bundle = getattr(event.payload, "bundle", None)
        fired = []
        for decision in self._under(self._match(run, event.provider, event.api, event.model)):
            found = self._event_trigger(decision, event, raw)
            if found is not None:
                fired.append(self._fire(decision, *found, event.run_id, event.event_id, where))
        if event.kind == "unknown":
            run.unknown = True
        if event.kind == "run.finished" and not run.finished:
            run.finished = True
            for decision in self._under(run.decisions or ()):
                fired += self._count(decision, "unknown_event_rate", run.unknown,
                                     event.run_id, event.event_id, where)
        return fired

    def _event_trigger(self, decision: Decision, event: ModelEvent, raw: bytes
                       ) -> tuple[str, str, str | None, str] | None:
        triggers = decision.triggers
        if (triggers.model_snapshot is not None and event.model is not None
                and event.model != triggers.model_snapshot):
            return ("model_snapshot", triggers.model_snapshot, event.model,
                    f"the provider reported model {event.model}, not the decided snapshot "
                    f"{triggers.model_snapshot}")
        adapter = triggers.event_adapters.get(event.api)
        if adapter is not None and event.adapter != adapter:
            return ("event_adapter", adapter, event.adapter,
                    f"events of {event.api} written by adapter {event.adapter}, not {adapter}")
        if triggers.event_schema is not None:
            schema = event_schema_of(raw)
            if not same_event_schema(triggers.event_schema, schema):
                return ("event_schema", triggers.event_schema, schema,
                        f"an event written with {schema}, not {triggers.event_schema}")
        return None

    def on_run_state(self, state: RunState, where: Where) -> list[Fired]:
        if not state.terminal:
            return []
        run = self._run(state.run_id)
        if run.reconciled:
            return []
        run.reconciled = True
        fired: list[Fired] = []
        for decision in self._under(self._match(run, state.provider, state.api, state.model)):
            fired += self._count(decision, "needs_reconciliation_rate",
                                 state.needs_reconciliation, state.run_id, None, where)
        return fired

    def on_receipt(self, receipt: Any, where: Where) -> list[Fired]:
        """A ToolReceipt (consumers/tools/receipts.py) of a run already seen on events."""
        run = self._runs.get(receipt.run_id)
        if run is None or not run.decisions:
            return []
        fired = []
        for decision in self._under(run.decisions):
            version = decision.triggers.tool_contracts.get(receipt.tool_name)
            if version is not None and receipt.schema_version != version:
                fired.append(self._fire(
                    decision, "tool_contract", f"{receipt.tool_name}@{version}",
                    f"{receipt.tool_name}@{receipt.schema_version}",
                    f"tool {receipt.tool_name} ran under contract schema version "
                    f"{receipt.schema_version}, not {version}", receipt.run_id, None, where))
        return fired

    def check_capabilities(self, resolve: Any) -> list[Fired]:
        """``resolve(provider, api, model)`` → the manifest's entry now (a dict) or None."""
        fired = []
        for decision in self.current():
            if decision.triggers.capabilities is None:
                continue
            t = decision.target
            difference = capability_difference(decision.triggers.capabilities,
                                               resolve(t.provider, t.api, t.model))
            if difference is not None:
                fired.append(self._fire(
                    decision, "capabilities", *difference,
                    f"the capability manifest entry of {t.provider}/{t.api}/{t.model} changed",
                    None, None, None))
        return fired

    # --- rates and demotions --------------------------------------------------------------

    def _count(self, decision: Decision, trigger: str, hit: bool, run_id: str,
               event_id: str | None, where: Where) -> list[Fired]:
        recorded = getattr(decision.triggers, trigger)
        if recorded is None:
            return []
        window = self._windows.setdefault(decision.decision_id, _Window())
        seen = window.unknown if trigger == "unknown_event_rate" else window.reconciliation
        seen.append(hit)
        if len(seen) > self.window:
            seen.popleft()
        rate = sum(seen) / len(seen)
        if len(seen) < self.window or rate <= recorded + self.margin:
            return []
        what = "an unknown event" if trigger == "unknown_event_rate" else \
            "needs_reconciliation"
        return [self._fire(decision, trigger, f"{recorded:.4f}", f"{rate:.4f}",
                           f"{rate:.1%} of the last {len(seen)} runs had {what}, above the "
                           f"recorded {recorded:.1%}", run_id, event_id, where)]

    def _fire(self, decision: Decision, trigger: str, expected: str | None,
              observed: str | None, reason: str, run_id: str | None, event_id: str | None,
              where: Where | None) -> Fired:
        demotion = Demotion(
            trigger=trigger, reason=reason, at=_now_ms(), expected=expected, observed=observed,
            run_id=run_id, event_id=event_id,
            topic=where.topic if where else None, partition=where.partition if where else None,
            offset=where.offset if where else None)
        return Fired(decision.decision_id, demotion)
