"""The events the executor writes to ``ingest``: tool.result, approval.requested and
approval.resolved, keyed by run id. They are built in ``services/run_logic/executor_events.py``,
which the gateway shares (its approvals route writes the same ``approval.resolved``); this module
names them, and what binds a decision to its call, for the executor's code.
"""

from __future__ import annotations

from modelevents.services.run_logic.executor_events import (
    ADAPTER,
    GRANTED,
    HASH_FIELD,
    RunOf,
    approval_event,
    approval_resolution,
    arguments_hash,
    decides_executor_approvals,
    decision_hash,
    executor_event,
    hash_of_approval,
    new_approval_id,
    tool_result_event,
)

__all__ = ["tool_result_event", "approval_event", "approval_resolution", "executor_event",
           "ADAPTER", "RunOf", "GRANTED", "HASH_FIELD", "arguments_hash", "new_approval_id",
           "hash_of_approval", "decides_executor_approvals", "decision_hash"]
