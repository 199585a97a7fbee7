"""The five hard gates, per run, each verdict with its evidence. A run that fails any is rejected,
whatever its score: the comparison (compare.py) counts it beside every figure and uses none of it.

    data_policy          an input packet went to a provider the task's data policy does not
                         allow, or the output carries a pattern the policy forbids
    unauthorized_action  a tool call of a tool the run was not granted (the task's tools that the
                         bundle declares), or one the tool executor's policy denied (receipt)
    invalid_schema       structured output or tool arguments that do not parse or fail their
                         JSON Schema (the task's structured_output, the tool's parameters)
    missing_evidence     the task needs citations or hosted-tool evidence and the run has none
    duplicated_effect    the receipts show one operation executed (succeeded) more than once
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jsonschema
import orjson

from modelevents.schemas.transcript import ToolDeclaration
from modelevents.services.migration.eval.corpus import Task
from modelevents.services.migration.eval.evidence import Digest

GATES = ("data_policy", "unauthorized_action", "invalid_schema", "missing_evidence",
         "duplicated_effect")


@dataclass(frozen=True)
class GateFailure:
    gate: str
    evidence: str  # what was seen, naming the record (tool call id, provider, pattern …)


@lru_cache(maxsize=256)
def _validator(schema_json: bytes) -> Any:
    # One validator per distinct schema: building one costs far more than a validation.
    return jsonschema.Draft202012Validator(orjson.loads(schema_json))


def _schema_problem(text: str, schema: dict[str, Any] | None) -> str | None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        return f"not JSON ({exc})"
    if schema is None:
        return None
    validator = _validator(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS))
    if validator.is_valid(value):
        return None
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    return f"{error.message} at /{'/'.join(map(str, error.path))}"


def _data_policy(task: Task, run: Digest) -> list[GateFailure]:
    out: list[GateFailure] = []
    allowed = task.data_policy.providers
    for provider in run.providers_sent:
        if allowed and provider not in allowed:
            out.append(GateFailure("data_policy", f"input packet sent to {provider}; the task "
                                                  f"allows {', '.join(allowed)}"))
    outputs = run.texts + [j for j, _ in run.structured] + [c[2] for c in run.tool_calls]
    for pattern in task.data_policy.forbid_output:
        regex = re.compile(pattern.regex)
        for text in outputs:
            if regex.search(text):
                out.append(GateFailure("data_policy", f"output carries {pattern.name} "
                                                      f"(/{pattern.regex}/)"))
                break
    return out


def _unauthorized(run: Digest, granted: dict[str, ToolDeclaration]) -> list[GateFailure]:
    out = [GateFailure("unauthorized_action", f"tool call {call_id} to {name}, which the run "
                                              f"was not granted ({', '.join(granted) or 'none'})")
           for name, call_id, _, _ in run.tool_calls if name not in granted]
    out += [GateFailure("unauthorized_action", f"the tool executor denied {r.tool_name} "
                                               f"({r.tool_call_id}): {r.error or 'denied'}")
            for r in run.receipts if r.error_class == "denied"]
    return out


def _invalid_schema(task: Task, run: Digest,
                    granted: dict[str, ToolDeclaration]) -> list[GateFailure]:
    out: list[GateFailure] = []
    schema = task.structured_output.json_schema if task.structured_output else None
    answers = [j for j, _ in run.structured]
    if task.structured_output and not answers and run.texts:
        answers = [run.texts[-1]]  # an API without a structured event answers in text
    for text in answers:
        if problem := _schema_problem(text, schema):
            out.append(GateFailure("invalid_schema", f"structured output: {problem}"))
    for name, call_id, arguments, _ in run.tool_calls:
        declaration = granted.get(name)
        if declaration is None:
            continue  # unauthorized already
        if problem := _schema_problem(arguments or "{}", declaration.parameters):
            out.append(GateFailure("invalid_schema", f"tool call {call_id} to {name}: {problem}"))
    return out


def _missing_evidence(task: Task, run: Digest) -> list[GateFailure]:
    if task.expect.citations and not (run.citations or run.hosted_evidence):
        return [GateFailure("missing_evidence", "the task needs citations or hosted-tool "
                                                "evidence; the run has no citation and no "
                                                "hosted.result")]
    return []


def _duplicated(run: Digest) -> list[GateFailure]:
    done = Counter(r.operation_id for r in run.receipts
                   if r.phase == "finished" and r.outcome == "succeeded")
    return [GateFailure("duplicated_effect", f"operation {op} executed {n} times (receipts)")
            for op, n in sorted(done.items()) if n > 1]


def check_gates(task: Task, run: Digest,
                bundle_tools: dict[str, ToolDeclaration] | None) -> list[GateFailure]:
    """Every gate the run fails, with its evidence; empty: the run is accepted. Granted: the
    task's tools that the bundle declares (``None``: the bundle is not known, e.g. a frozen
    re-score of an archive alone — the task's tools)."""
    tools = {t.name: t for t in task.tools} if bundle_tools is None else bundle_tools
    granted = {t.name: tools.get(t.name, t) for t in task.tools if t.name in tools}
    return (_data_policy(task, run) + _unauthorized(run, granted)
            + _invalid_schema(task, run, granted) + _missing_evidence(task, run)
            + _duplicated(run))
