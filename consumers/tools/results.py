"""The events the executor writes to ``ingest``: tool.result, approval.requested and
approval.resolved, keyed by run id. They are built in ``services/run_logic/executor_events.py``,
which the gateway shares (its approvals route writes the same ``approval.resolved``); this module
names them for the executor's code.
"""

from __future__ import annotations

from modelevents.services.run_logic.executor_events import (
    ADAPTER,
    RunOf,
    approval_event,
    approval_resolution,
    executor_event,
    tool_result_event,
)

__all__ = ["tool_result_event", "approval_event", "approval_resolution", "executor_event",
           "ADAPTER", "RunOf"]
