"""RunState and DeadLetter as Python types (mirror avro/run_state.avsc and dead_letter.avsc)."""

from __future__ import annotations

from dataclasses import dataclass, field

from modelevents.schemas.events import Usage

RUN_STATES = (
    "created", "queued", "in_progress", "waiting_for_tool", "waiting_for_approval",
    "completed", "incomplete", "failed", "cancelled",
)
TERMINAL_RUN_STATES = frozenset({"completed", "incomplete", "failed", "cancelled"})


@dataclass(slots=True)
class RunState:
    run_id: str
    tenant: str
    status: str = "created"
    provider: str | None = None
    api: str | None = None
    model: str | None = None
    provider_object_ids: list[str] = field(default_factory=list)
    reason: str | None = None
    raw_reason: str | None = None
    needs_reconciliation: bool = False
    reconciliation_notes: list[str] = field(default_factory=list)
    open_tool_calls: list[str] = field(default_factory=list)
    pending_approvals: list[str] = field(default_factory=list)
    last_seq: int = -1
    event_count: int = 0
    started_at: int | None = None
    updated_at: int | None = None
    finished_at: int | None = None
    usage: Usage | None = None  # total over the run's provider calls
    prior_calls_usage: Usage | None = None  # total of the calls before the current one
    last_error: str | None = None
    # Counted from the events' trust verdicts (schema v4): what a gate on evidence reads.
    untrusted_sources: int = 0
    blocked_sources: int = 0
    policy_violations: int = 0

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_RUN_STATES


@dataclass(slots=True)
class DeadLetter:
    stage: str  # decode | translate | sequence | apply | resolve
    reason: str
    error_type: str
    at: int  # epoch milliseconds
    run_key: str | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    record: bytes | None = None
