"""One run's evidence, as the topics hold it: its events (``events``), its latest state (``runs``,
or rebuilt from the events by the run machine when an archive has none), its input packets
(``run-inputs``) and the tool executor's receipts (``receipts``). Nothing else is read.

Which task and bundle a run belongs to is on the record too: the eval starts every run with a
run id ``eval.<task>.<repeat>.<nonce>`` and the bundle id inside its request (the input packet's
``request`` JSON, ``NeutralRequest.bundle``; ``run.started`` carries it as well once the gateway
writes it). ``digest`` reads what the gates, the checkers and the comparison need in one pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

from modelevents.schemas.events import ModelEvent, Structured, Text, ToolCall, Usage
from modelevents.schemas.run_state import RunState
from modelevents.services.run_logic.run_machine import RunMachine

RUN_ID_PREFIX = "eval."


class Receipt(Protocol):
    """The fields of a tool executor's receipt (consumers/tools/receipts.py ToolReceipt) read."""

    operation_id: str
    tool_name: str
    tool_call_id: str
    phase: str
    outcome: str | None
    postcondition: str | None
    error_class: str | None
    error: str | None
    cost: float
    attempt: int
    started_at: int
    finished_at: int | None


class InputPacket(Protocol):
    """The fields of a run's input packet (schemas/run_input.py RunInput) read."""

    provider: str
    api: str
    model: str
    request: str
    recorded_at: int


def eval_run_id(task_id: str, repeat: int, nonce: str) -> str:
    return f"{RUN_ID_PREFIX}{task_id}.{repeat}.{nonce}"


def task_of(run_id: str) -> tuple[str, int] | None:
    """(task id, repeat) of an eval run id; None for any other run."""
    if not run_id.startswith(RUN_ID_PREFIX):
        return None
    parts = run_id[len(RUN_ID_PREFIX):].split(".")
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1])


@dataclass
class RunEvidence:
    run_id: str
    events: list[ModelEvent] = field(default_factory=list)
    state: RunState | None = None
    inputs: list[Any] = field(default_factory=list)  # InputPacket
    receipts: list[Any] = field(default_factory=list)  # Receipt

    def final_state(self) -> RunState:
        """The ``runs`` record, or the state the run machine folds from the events."""
        if self.state is not None:
            return self.state
        first = self.events[0] if self.events else None
        machine = RunMachine.new(self.run_id, first.tenant if first else "default")
        for event in sorted(self.events, key=lambda e: e.seq):
            machine.apply(event)
        self.state = machine.state
        return self.state


@dataclass
class Digest:
    """What one run did, read from its evidence."""

    run_id: str
    bundle: str | None
    status: str
    needs_reconciliation: bool
    texts: list[str]
    structured: list[tuple[str, bool]]  # (json, valid)
    tool_calls: list[tuple[str, str, str, bool | None]]  # (name, call id, arguments, valid)
    refusals: int
    citations: int
    hosted_evidence: int
    approvals: int
    errors: int
    unknown_events: int
    models: list[str]
    adapters: list[str]
    apis: list[str]
    providers_sent: list[str]  # the providers its input packets went to
    usage: Usage | None
    started_at: int | None
    finished_at: int | None
    receipts: list[Any]


# A packet's request is canonical JSON (keys sorted): its top-level "bundle" comes first, after
# "background" alone, so the id is read without parsing the whole request (which may be large).
_CANONICAL_BUNDLE = re.compile(r'\{(?:"background":(?:true|false),)?"bundle":"(bnd-[0-9a-f]{64})"')


def _bundle_of(evidence: RunEvidence) -> str | None:
    for event in evidence.events:
        if event.kind == "run.started":
            bundle = getattr(event.payload, "bundle", None)
            if bundle:
                return str(bundle)
    for packet in evidence.inputs:
        if found := _CANONICAL_BUNDLE.match(packet.request):
            return found.group(1)
        if '"bundle"' not in packet.request:
            continue
        try:
            request = orjson.loads(packet.request)
        except orjson.JSONDecodeError:
            continue
        if isinstance(request, dict) and isinstance(request.get("bundle"), str):
            return str(request["bundle"])
    return None


_COUNTED = ("refusal", "citation", "hosted.result", "approval.requested", "error", "unknown")
_READ = frozenset((*_COUNTED, "text.done", "structured.done", "tool.call"))


def digest(evidence: RunEvidence) -> Digest:
    state = evidence.final_state()
    texts: list[str] = []
    structured: list[tuple[str, bool]] = []
    calls: list[tuple[str, str, str, bool | None]] = []
    counts = dict.fromkeys(_COUNTED, 0)
    events = evidence.events
    for event in events:
        kind = event.kind
        if kind not in _READ:
            continue
        payload = event.payload
        if kind in counts:
            counts[kind] += 1
        elif isinstance(payload, Text):
            texts.append(payload.text)
        elif isinstance(payload, Structured):
            structured.append((payload.json, payload.valid))
        elif isinstance(payload, ToolCall):
            calls.append((payload.tool_name, payload.tool_call_id, payload.arguments,
                          payload.arguments_valid))
    models = {e.model for e in events if e.model}
    times = [e.received_at for e in events]
    first, last = (min(times), max(times)) if times else (None, None)
    return Digest(
        run_id=evidence.run_id, bundle=_bundle_of(evidence), status=state.status,
        needs_reconciliation=state.needs_reconciliation, texts=texts, structured=structured,
        tool_calls=calls, refusals=counts["refusal"], citations=counts["citation"],
        hosted_evidence=counts["hosted.result"], approvals=counts["approval.requested"],
        errors=counts["error"], unknown_events=counts["unknown"],
        models=sorted(models), adapters=sorted({e.adapter for e in events}),
        apis=sorted({e.api for e in events}),
        providers_sent=sorted({p.provider for p in evidence.inputs}),
        usage=state.usage,
        # The request's time: the gateway records the packet before it calls the provider.
        started_at=min((p.recorded_at for p in evidence.inputs), default=None)
        or state.started_at or first,
        finished_at=state.finished_at or last,
        receipts=list(evidence.receipts))
