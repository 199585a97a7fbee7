"""The tool executor: the model proposes, the policy authorizes, the executor runs, the receipt
records (docs/tools.md).

    contract.py      ToolContract: what one application tool promises (schema, class, timeout,
                     idempotency, output cap, error taxonomy, postcondition, reconcile hook)
    registry.py      ToolRegistry and ``load_registry("package.module")``
    policy.py        who may call what, on which objects, within which budget, with whose approval
    receipts.py      ToolReceipt records on the ``receipts`` topic (Avro, single-object encoding)
    arguments.py     a call's arguments parsed under limits (size, depth, type) before all else
    elided_arguments.py  arguments too large for their tool.call, rebuilt from the run's deltas
    output.py        tool output as data: any value as text, capped, marked untrusted, prompt
                     injection flagged
    results.py       the events the executor writes to ``ingest`` (tool.result, approval.*)
    approvals.py     ``resolve_approval(...)``: an approval decision onto ``ingest``
    approval_book.py the calls waiting for an approval; a decision finds its call by one lookup
    continuation.py  the run's next call through the gateway once every result is in
    executor.py      the consumer of ``events`` that ties them together
    sqlite_tools.py  two example tools against a SQLite system of record
"""


from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from modelevents.consumers.tools.contract import ToolContract, ToolError
    from modelevents.consumers.tools.registry import ToolRegistry, load_registry

__all__ = ["ToolContract", "ToolError", "ToolRegistry", "load_registry"]

# Imported when first asked for: the audit archive and `tail` read receipts.py without the
# 'tools' extra (jsonschema), which contract.py needs.
_HOME = {"ToolContract": "contract", "ToolError": "contract", "ToolRegistry": "registry",
         "load_registry": "registry"}


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
