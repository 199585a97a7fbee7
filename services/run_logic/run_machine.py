"""The run state machine: ordered, deduplicated ModelEvents in, RunState out. Pure.

    created → queued → in_progress ⇄ waiting_for_tool | waiting_for_approval
                                   → completed | incomplete | failed | cancelled

A run spans a whole agentic turn, which may take several provider calls: a provider response that
ends asking for tool results leaves the run ``waiting_for_tool`` (Claude ``pause_turn`` too, with
reason ``continuation``: the application must act before the run goes on), and the next
``run.started`` brings it back to ``in_progress``. Only ``run.finished`` ends a run.

Illegal transitions never raise: the run is flagged ``needs_reconciliation`` with a note and the
caller learns the outcome (``Outcome.ILLEGAL``) so that a stream processor can route the event to
the dead-letter topic. Likewise a truncated stream, an ``unknown`` provider event and a tool
result whose outcome is unknown (the executor could not tell whether the call acted) flag the
run: a run whose full story we do not know must not look clean.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import Any

from modelevents.schemas.events import (
    Approval,
    Citation,
    Error,
    Hosted,
    ModelEvent,
    PolicyViolation,
    RunAwaiting,
    RunFinished,
    RunStarted,
    RunStatus,
    ToolCall,
    ToolResult,
    Unknown,
    Usage,
)
from modelevents.schemas.run_state import TERMINAL_RUN_STATES, RunState
from modelevents.services.run_logic.executor_events import outcome_unknown

# Awaiting reason → the state the run waits in.
AWAITING_STATE = {
    "tool_results": "waiting_for_tool",
    "continuation": "waiting_for_tool",
    "approval": "waiting_for_approval",
}
# Provider-level status (run.started / run.status payloads) → run state.
STATUS_STATE = {
    "queued": "queued",
    "in_progress": "in_progress",
    "requires_action": "waiting_for_tool",
}
LIVE_STATES = frozenset({"created", "queued", "in_progress", "waiting_for_tool",
                         "waiting_for_approval"})
MAX_NOTES = 20  # bounded: a pathological run must not grow its state without limit


class Outcome(enum.Enum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"  # seq already applied; nothing changed
    ILLEGAL = "illegal"  # applied as far as sensible, run flagged needs_reconciliation


class RunMachine:
    def __init__(self, state: RunState) -> None:
        self.state = state

    @classmethod
    def new(cls, run_id: str, tenant: str = "default") -> RunMachine:
        return cls(RunState(run_id=run_id, tenant=tenant))

    def apply(self, event: ModelEvent) -> Outcome:
        st = self.state
        if event.seq >= 0:
            if event.seq <= st.last_seq:
                return Outcome.DUPLICATE
            if event.seq != st.last_seq + 1:
                self._flag(f"seq gap: expected {st.last_seq + 1}, got {event.seq}")
            st.last_seq = event.seq
        st.event_count += 1
        st.updated_at = event.received_at
        if st.provider is None:
            st.provider, st.api = event.provider, event.api
        if event.model:
            st.model = event.model
        if event.piece is not None and event.piece.index:
            return Outcome.APPLIED  # the rest of an event cut into pieces: applied at piece 0
        handler = _HANDLERS.get(event.kind)
        # The payload goes to the handler as its own argument, typed there as the record its
        # kind carries (KIND_PAYLOAD): narrowing for the type checker at no cost per event.
        legal = handler(self, event, event.payload) if handler else True
        return Outcome.APPLIED if legal is not False else Outcome.ILLEGAL

    # --- transitions ------------------------------------------------------------------------

    def _move(self, target: str, event: ModelEvent) -> bool:
        st = self.state
        if st.status in TERMINAL_RUN_STATES:
            if target == st.status:
                return True  # the same terminal signal again (e.g. webhook after stream)
            self._flag(f"{event.kind} → {target} after the run ended {st.status} "
                       f"(event {event.event_id})")
            return False
        if target in TERMINAL_RUN_STATES:
            st.finished_at = event.received_at
        st.status = target
        return True

    def _on_started(self, event: ModelEvent, payload: RunStarted) -> bool:
        oid = payload.provider_object_id
        if oid and oid not in self.state.provider_object_ids:
            self.state.provider_object_ids.append(oid)
        if self.state.started_at is None:
            self.state.started_at = event.received_at
        # A new provider call within the run: bank the usage so far; the new call reports its
        # own usage from zero (every provider reports per call).
        self.state.prior_calls_usage = self.state.usage
        self.state.reason = None
        return self._move(STATUS_STATE.get(payload.status, "in_progress"), event)

    def _on_status(self, event: ModelEvent, payload: RunStatus) -> bool:
        target = STATUS_STATE.get(payload.status)
        if target is None:
            return True  # a provider status with no run-level meaning; kept in the event log
        return self._move(target, event)

    def _on_awaiting(self, event: ModelEvent, payload: RunAwaiting) -> bool:
        reason = payload.reason
        target = AWAITING_STATE.get(reason)
        if target is None:
            self._flag(f"unknown awaiting reason {reason!r}")
            return False
        ok = self._move(target, event)
        if ok:
            self.state.reason = reason
            self.state.raw_reason = payload.raw_reason
        return ok

    def _on_finished(self, event: ModelEvent, payload: RunFinished) -> bool:
        if payload.status not in TERMINAL_RUN_STATES:
            self._flag(f"run.finished with non-terminal status {payload.status!r}")
            return False
        ok = self._move(payload.status, event)
        if ok:
            self.state.reason = payload.reason
            self.state.raw_reason = payload.raw_reason
        return ok

    def _on_tool_call(self, event: ModelEvent, payload: ToolCall) -> bool:
        call_id = payload.tool_call_id
        if call_id not in self.state.open_tool_calls:
            self.state.open_tool_calls.append(call_id)
        return True

    def _on_tool_result(self, event: ModelEvent, payload: ToolResult) -> bool:
        call_id = payload.tool_call_id
        if outcome_unknown(event):
            self._flag(f"tool call {call_id}: its outcome is unknown (it may have acted and was "
                       "not retried); reconcile it before the run goes on")
        if call_id in self.state.open_tool_calls:
            self.state.open_tool_calls.remove(call_id)
            return True
        self._flag(f"tool.result for {call_id}, which no tool.call in this run proposed")
        return False

    def _on_approval_requested(self, event: ModelEvent, payload: Approval) -> bool:
        if payload.approval_id not in self.state.pending_approvals:
            self.state.pending_approvals.append(payload.approval_id)
        return True

    def _on_approval_resolved(self, event: ModelEvent, payload: Approval) -> bool:
        if payload.approval_id in self.state.pending_approvals:
            self.state.pending_approvals.remove(payload.approval_id)
        return True

    def _on_usage(self, event: ModelEvent, payload: Usage) -> bool:
        prior = self.state.prior_calls_usage
        self.state.usage = payload if prior is None else add_usage(prior, payload)
        return True

    def _on_error(self, event: ModelEvent, payload: Error) -> bool:
        self.state.last_error = f"{payload.error_type}: {payload.message}"
        if payload.error_type == "stream_truncated" and self.state.status in LIVE_STATES:
            self._flag("stream ended before the provider's terminal event")
        elif payload.error_type == "sequence_gap":
            self._flag(f"provider frames missing: {payload.message}")
        return True

    def _on_unknown(self, event: ModelEvent, payload: Unknown) -> bool:
        self._flag(f"unknown provider event {payload.provider_type!r}")
        return True

    # The worker's trust verdicts (services/run_logic/source_trust.py), counted for gates on
    # evidence: each citation, and each source of a hosted result's evidence.
    def _on_citation(self, event: ModelEvent, payload: Citation) -> bool:
        self._count_trust((payload.trust,))
        return True

    def _on_hosted_result(self, event: ModelEvent, payload: Hosted) -> bool:
        self._count_trust(payload.source_trust.values())
        return True

    def _on_policy_violation(self, event: ModelEvent, payload: PolicyViolation) -> bool:
        # Fail-safe: a run that did what its tenant forbids must not look clean.
        self.state.policy_violations += 1
        self._flag(f"policy violation {payload.violation}: {payload.note}")
        return True

    def _count_trust(self, verdicts: Iterable[str]) -> None:
        for verdict in verdicts:
            if verdict == "untrusted":
                self.state.untrusted_sources += 1
            elif verdict == "blocked":
                self.state.blocked_sources += 1

    # --- helpers ----------------------------------------------------------------------------

    def flag(self, note: str) -> None:
        """Mark the run ``needs_reconciliation`` with why (what the log cannot show by itself)."""
        self._flag(note)

    def _flag(self, note: str) -> None:
        self.state.needs_reconciliation = True
        notes = self.state.reconciliation_notes
        if len(notes) < MAX_NOTES:
            notes.append(note)


def add_usage(a: Usage, b: Usage) -> Usage:
    def plus(x: int | None, y: int | None) -> int | None:
        return y if x is None else x if y is None else x + y

    units = dict(a.server_tool_units)
    for name, count in b.server_tool_units.items():
        units[name] = units.get(name, 0) + count
    return Usage(
        input_tokens=plus(a.input_tokens, b.input_tokens),
        output_tokens=plus(a.output_tokens, b.output_tokens),
        cache_read_tokens=plus(a.cache_read_tokens, b.cache_read_tokens),
        cache_write_tokens=plus(a.cache_write_tokens, b.cache_write_tokens),
        reasoning_tokens=plus(a.reasoning_tokens, b.reasoning_tokens),
        total_tokens=plus(a.total_tokens, b.total_tokens),
        server_tool_units=units,
    )


# kind → handler. Each handler names the payload record of its kind (KIND_PAYLOAD); the table
# takes any payload because the kind, not the type, is what apply dispatches on (a test holds
# every handler's payload annotation to KIND_PAYLOAD).
_HANDLERS: dict[str, Callable[[RunMachine, ModelEvent, Any], bool]] = {
    "run.started": RunMachine._on_started,
    "run.status": RunMachine._on_status,
    "run.awaiting": RunMachine._on_awaiting,
    "run.finished": RunMachine._on_finished,
    "tool.call": RunMachine._on_tool_call,
    "tool.result": RunMachine._on_tool_result,
    "approval.requested": RunMachine._on_approval_requested,
    "approval.resolved": RunMachine._on_approval_resolved,
    "usage": RunMachine._on_usage,
    "error": RunMachine._on_error,
    "unknown": RunMachine._on_unknown,
    "citation": RunMachine._on_citation,
    "hosted.result": RunMachine._on_hosted_result,
    "policy.violation": RunMachine._on_policy_violation,
}


def run_state_of(events: list[ModelEvent], run_id: str | None = None,
                 tenant: str = "default") -> RunState:
    """Fold a run's events into its final state (the CLI's --state, replay, tests)."""
    machine = RunMachine.new(run_id or (events[0].run_id if events else "(empty)"), tenant)
    for event in events:
        machine.apply(event)
    return machine.state
