"""The closed vocabulary (schemas/vocabulary.py) over every event the adapters produce from the
whole recorded corpus and the project's own fixtures, and check_event itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelevents.adapters.base import HOSTILE_INPUT_ERRORS as BASE_TAXONOMY
from modelevents.adapters.registry import normalize_bytes
from modelevents.schemas import vocabulary as v
from modelevents.schemas.errors import DetectionError
from modelevents.schemas.events import AWAITING_REASONS as EVENTS_AWAITING
from modelevents.schemas.events import (
    TERMINAL_STATUSES,
    Citation,
    Envelope,
    Error,
    EventSource,
    Hosted,
    ModelEvent,
    RunFinished,
    Text,
)
from modelevents.schemas.events import TRANSPORTS as EVENTS_TRANSPORTS
from modelevents.schemas.vocabulary_check import check_event
from tests.corpus import corpus_files, corpus_id, require_corpus
from tests.paths import FIXTURES

OWN_FIXTURES = sorted(p for p in FIXTURES.rglob("*")
                      if p.is_file())
NOT_PROVIDER_OUTPUT = {"webhook-test-vector.json"}
CORPUS = [p for p in corpus_files("") if p.name not in NOT_PROVIDER_OUTPUT]

# The payload fields check_event looks at, to name a violation as (adapter, kind.field, value).
_FIELD = {"run.started": "status", "run.status": "status", "run.awaiting": "reason",
          "message.started": "role", "message.finished": "role", "hosted.call": "tool_type",
          "hosted.result": "tool_type", "citation": "source_type", "error": "error_type"}


def _violations(path: Path) -> set[tuple[str, str, object]]:
    try:
        events = normalize_bytes(path.read_bytes(), source_name=path.name).events
    except DetectionError:
        pytest.fail(f"{path}: no adapter recognizes it")
    found: set[tuple[str, str, object]] = set()
    for event in events:
        adapter = event.adapter.split("@")[0]
        for line in check_event(event):
            found.add(_named(adapter, event, line))
    return found


def _named(adapter: str, event: ModelEvent, line: str) -> tuple[str, str, object]:
    # The (kind.field, value) a check_event line is about, so the list above can name it.
    for name in ("status", "reason", "role", "form", "tool_type", "executor", "source_type",
                 "error_type"):
        if line.startswith(f"{event.kind}.{name} "):
            return adapter, f"{event.kind}.{name}", getattr(event.payload, name)
    return adapter, line, None


# --- every event of the corpus and the fixtures -------------------------------------------------


@pytest.mark.corpus
@pytest.mark.parametrize("path", CORPUS, ids=corpus_id)
def test_corpus_events_keep_the_closed_vocabulary(path: Path) -> None:
    require_corpus()
    assert _violations(path) == set()


@pytest.mark.parametrize("path", OWN_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_own_fixture_events_keep_the_closed_vocabulary(path: Path) -> None:
    assert _violations(path) == set()


# --- the vocabulary itself ----------------------------------------------------------------------


def test_tuples_and_literals_agree_with_what_events_and_base_already_name() -> None:
    assert v.TERMINAL_STATUSES == TERMINAL_STATUSES
    assert v.AWAITING_REASONS == EVENTS_AWAITING
    assert v.TRANSPORTS == EVENTS_TRANSPORTS
    assert v.HOSTILE_INPUT_ERRORS == BASE_TAXONOMY
    assert set(v.HOSTILE_INPUT_ERRORS) <= set(v.ADAPTER_ERROR_TYPES)
    for values in (v.FINISH_REASONS, v.HOSTED_TOOL_TYPES, v.SOURCE_TYPES, v.ERROR_TYPES):
        assert len(set(values)) == len(values), "a value listed twice"
    # The named fallbacks exist.
    assert "other" in v.FINISH_REASONS and "other" in v.HOSTED_TOOL_TYPES
    assert "other" in v.SOURCE_TYPES and "provider_error" in v.PROVIDER_ERROR_TYPES


def _event(kind: str, payload, transport: str = "sse") -> ModelEvent:
    return ModelEvent("e", "r", "t", "p", "api", None, kind, EventSource("f", 0, transport),
                      0, "a@1", Envelope("application/json", b""), payload)


def test_check_event_passes_vocabulary_values() -> None:
    assert check_event(_event("run.finished", RunFinished("completed", "end_turn", "STOP"))) == []
    assert check_event(_event("hosted.call", Hosted(0, "c", "maps_search", "provider"))) == []
    assert check_event(_event("citation", Citation(0, "place"))) == []
    assert check_event(_event("error", Error("unexpected_shape", "m"))) == []


def test_check_event_names_every_value_off() -> None:
    off = check_event(_event("run.finished", RunFinished("done", "solar_flare", None),
                               transport="carrier_pigeon"))
    assert len(off) == 3
    assert any("'done'" in line for line in off) and any("'solar_flare'" in line for line in off)
    assert any("carrier_pigeon" in line for line in off)
    assert check_event(_event("hosted.call", Hosted(0, "c", "maps", "provider"))) != []
    assert check_event(_event("citation", Citation(0, "maps"))) != []
    assert check_event(_event("error", Error("RESOURCE_EXHAUSTED", "m"))) != []


def test_check_event_names_a_payload_of_the_wrong_record() -> None:
    (line,) = check_event(_event("run.finished", Text(0, 0, "x")))
    assert "payload is Text, not RunFinished" in line
