"""ToolContract: what one application tool promises the executor.

A contract is data about a tool, not a grant: what the model may do with it is the policy's
decision (policy.py). Arguments are validated with the ``jsonschema`` library (Draft 2020-12;
the schema itself is checked when the contract is made), never by syntax alone.

Error taxonomy: a tool raises :class:`ToolError` with ``kind``

    retryable   nothing happened, trying again may work (a 429, a 503 from its backend)
    permanent   nothing happened and trying again will not help (a 4xx, a missing object)
    unknown     something may have happened (a lost connection after the write was sent)

Any other exception is ``permanent``; a timeout is ``unknown`` for a write tool (the side effect
may have happened) and ``retryable`` for a read tool.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema
import orjson

from modelevents.consumers.tools import arguments as argument_limits

__all__ = ["ToolContract", "ToolError", "ToolOutcome", "ErrorKind", "Earlier", "canonical_json"]

ErrorKind = Literal["retryable", "permanent", "unknown"]


class ToolError(Exception):
    """A tool's own failure, classified (see the module docstring)."""

    def __init__(self, kind: ErrorKind, message: str, *, retry_after_s: float | None = None
                 ) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.retry_after_s = retry_after_s


@dataclass(frozen=True)
class ToolOutcome:
    """What a tool returns when it wants to name what it did in the system of record."""

    output: Any  # JSON-serialisable
    external_id: str | None = None
    cost: float = 0.0


@dataclass(frozen=True)
class Earlier:
    """An earlier attempt's outcome read back by a reconcile hook."""

    output: Any
    external_id: str | None = None


def canonical_json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def default_idempotency_key(run_id: str, tool_call_id: str, arguments: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    for part in (run_id.encode(), tool_call_id.encode(), canonical_json(arguments)):
        digest.update(len(part).to_bytes(4, "big") + part)
    return digest.hexdigest()[:32]


@dataclass(frozen=True)
class ToolContract:
    """One application tool.

    ``run(arguments, context)`` does the work (sync: run in a thread, bounded by ``timeout_s``);
    ``context`` is a :class:`~modelevents.consumers.tools.executor.CallContext` (operation id,
    idempotency key, attempt, tenant, run id). ``postcondition(arguments, output)`` confirms
    in the system of record that the call did what it says (None: not checked).
    ``reconcile(operation_id, idempotency_key)`` looks up an earlier attempt's outcome and returns
    :class:`Earlier` or None (nothing happened). ``scope(arguments)`` names the object the call
    touches, for the policy's object scope. ``max_argument_bytes`` and ``max_argument_depth``
    bound the arguments before anything else reads them (``arguments.py``).
    """

    name: str
    parameters: dict[str, Any]
    run: Callable[[dict[str, Any], Any], Any]
    description: str | None = None
    schema_version: str = "1"
    action: Literal["read", "write"] = "read"
    timeout_s: float = 10.0
    max_output_bytes: int = 16_384
    max_argument_bytes: int = argument_limits.MAX_BYTES
    max_argument_depth: int = argument_limits.MAX_DEPTH
    max_attempts: int = 3
    cost: float = 0.0
    output_schema: dict[str, Any] | None = None
    idempotency_key: Callable[[str, str, dict[str, Any]], str] = default_idempotency_key
    postcondition: Callable[[dict[str, Any], Any], bool] | None = None
    reconcile: Callable[[str, str], Earlier | None] | None = None
    scope: Callable[[dict[str, Any]], str | None] | None = None
    _validator: Any = field(default=None, init=False, repr=False, compare=False)
    _output_validator: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        jsonschema.Draft202012Validator.check_schema(self.parameters)
        object.__setattr__(self, "_validator", jsonschema.Draft202012Validator(self.parameters))
        if self.output_schema is not None:
            jsonschema.Draft202012Validator.check_schema(self.output_schema)
            object.__setattr__(self, "_output_validator",
                               jsonschema.Draft202012Validator(self.output_schema))

    def argument_errors(self, arguments: Any) -> list[str]:
        """Every way ``arguments`` breaks the schema, each naming where (empty: valid)."""
        return [f"{'/'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}"
                for e in sorted(self._validator.iter_errors(arguments), key=lambda e: e.path)]

    def output_errors(self, output: Any) -> list[str]:
        if self._output_validator is None:
            return []
        return [f"{'/'.join(str(p) for p in e.absolute_path) or '(output)'}: {e.message}"
                for e in self._output_validator.iter_errors(output)]

    def declaration(self) -> dict[str, Any]:
        """The neutral tool declaration the gateway sends the model (schemas/transcript.py)."""
        out: dict[str, Any] = {"name": self.name, "parameters": self.parameters}
        if self.description:
            out["description"] = self.description
        return out
