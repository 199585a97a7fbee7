"""Whether a run did its task: the checker its ``expect`` names, over the run's digest.

    text_contains    every expected string in the answer text (case-insensitive)
    json_fields      the structured answer (or the answer text) is a JSON object with these values
    tool_calls       the run called exactly these tools (names, any order, repeats allowed)
    refusal          the run refused (a refusal event, or finished for a refusal/content filter)
    terminal_status  the run ended in this status
    tool_outcomes    every tool call has a finished receipt whose outcome is one of these

Each returns (passed, why): ``why`` says what was expected and what was seen.
"""

from __future__ import annotations

from collections.abc import Callable

import orjson

from modelevents.services.migration.eval.corpus import Expectation
from modelevents.services.migration.eval.evidence import Digest

Check = Callable[[Expectation, Digest], tuple[bool, str]]


def _text_contains(expect: Expectation, run: Digest) -> tuple[bool, str]:
    answer = " ".join(run.texts).lower()
    missing = [t for t in expect.text if t.lower() not in answer]
    return not missing, (f"the answer lacks {missing}" if missing else "the answer has them all")


def _json_fields(expect: Expectation, run: Digest) -> tuple[bool, str]:
    candidates = [j for j, _ in run.structured] or run.texts[-1:]
    for text in candidates:
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        if isinstance(value, dict):
            wrong = {k: value.get(k) for k, v in expect.fields.items() if value.get(k) != v}
            return not wrong, (f"fields differ: {wrong}" if wrong else "every field matches")
    return False, "no JSON object in the answer"


def _tool_calls(expect: Expectation, run: Digest) -> tuple[bool, str]:
    called = {name for name, _, _, _ in run.tool_calls}
    wanted = set(expect.tools)
    return called == wanted, f"called {sorted(called)}, expected {sorted(wanted)}"


def _refusal(expect: Expectation, run: Digest) -> tuple[bool, str]:
    refused = run.refusals > 0
    return refused, "refused" if refused else "answered instead of refusing"


def _terminal_status(expect: Expectation, run: Digest) -> tuple[bool, str]:
    return run.status == expect.status, f"ended {run.status}, expected {expect.status}"


def _tool_outcomes(expect: Expectation, run: Digest) -> tuple[bool, str]:
    if not run.tool_calls:
        return False, "no tool call"
    finished = {r.tool_call_id: r.outcome for r in run.receipts if r.phase == "finished"}
    seen = {call_id: finished.get(call_id) for _, call_id, _, _ in run.tool_calls}
    bad = {c: o for c, o in seen.items() if o not in expect.outcomes}
    return not bad, (f"outcomes {bad} not in {expect.outcomes}" if bad
                     else f"outcomes {sorted(set(seen.values()), key=str)}")


CHECKS: dict[str, Check] = {
    "text_contains": _text_contains, "json_fields": _json_fields, "tool_calls": _tool_calls,
    "refusal": _refusal, "terminal_status": _terminal_status, "tool_outcomes": _tool_outcomes,
}


def check_task(expect: Expectation, run: Digest) -> tuple[bool, str]:
    return CHECKS[expect.checker](expect, run)
