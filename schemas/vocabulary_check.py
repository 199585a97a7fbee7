"""Checks one ModelEvent against the closed vocabulary (``schemas/vocabulary.py``).

``check_event(event)`` returns what in the event is outside the vocabulary (empty: all in).
tests/schemas/test_vocabulary.py runs it over every event of the corpus and the fixtures.
"""

from __future__ import annotations

from typing import Any

from modelevents.schemas import events as e
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.vocabulary import (
    AWAITING_REASONS,
    ERROR_TYPES,
    EXECUTORS,
    FINISH_REASONS,
    HOSTED_STATUSES,
    HOSTED_TOOL_TYPES,
    POLICY_VIOLATIONS,
    REASONING_FORMS,
    ROLES,
    RUN_STARTED_STATUSES,
    RUN_STATUSES,
    SOURCE_TRUSTS,
    SOURCE_TYPES,
    TERMINAL_STATUSES,
    TRANSPORTS,
)

__all__ = ["check_event"]

# Payload record -> (field, the values it may hold); a field that may be None says so by
# containing None.
_CLOSED_FIELDS: dict[type, tuple[tuple[str, tuple[Any, ...]], ...]] = {
    e.RunStarted: (("status", RUN_STARTED_STATUSES),),
    e.RunStatus: (("status", RUN_STATUSES),),
    e.RunAwaiting: (("reason", AWAITING_REASONS),),
    e.RunFinished: (("status", TERMINAL_STATUSES), ("reason", FINISH_REASONS)),
    e.Message: (("role", ROLES),),
    e.Reasoning: (("form", REASONING_FORMS),),
    e.Hosted: (("tool_type", HOSTED_TOOL_TYPES), ("executor", EXECUTORS),
               ("status", HOSTED_STATUSES + (None,)), ("trust", SOURCE_TRUSTS)),
    e.Citation: (("source_type", SOURCE_TYPES), ("trust", SOURCE_TRUSTS)),
    e.PolicyViolation: (("violation", POLICY_VIOLATIONS),),
    e.Error: (("error_type", ERROR_TYPES),),
}


def check_event(event: ModelEvent) -> list[str]:
    """What in ``event`` is outside the closed vocabulary: one line per value off, [] if none."""
    off: list[str] = []
    kind = event.kind
    expected = e.KIND_PAYLOAD.get(kind)
    if expected is None:
        off.append(f"kind {kind!r} is not a ModelEvent kind")
    elif type(event.payload) is not expected:
        off.append(f"{kind}: payload is {type(event.payload).__name__}, not {expected.__name__}")
    for name, allowed in _CLOSED_FIELDS.get(type(event.payload), ()):
        value = getattr(event.payload, name)
        if value not in allowed:
            off.append(f"{kind}.{name} {value!r} is not in the vocabulary")
    if isinstance(event.payload, e.Hosted):
        off += [f"{kind}.source_trust[{source!r}] {value!r} is not in the vocabulary"
                for source, value in event.payload.source_trust.items()
                if value not in SOURCE_TRUSTS]
    if event.source.transport not in TRANSPORTS:
        off.append(f"source.transport {event.source.transport!r} is not a transport")
    return off
