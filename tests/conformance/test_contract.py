"""The contract over everything the adapters produce from the whole corpus and the project's own
fixtures: every event's payload is the record its kind names, every event round-trips through
the Avro codec unchanged, event ids are unique and deterministic, and the run state machine
accepts every sequence."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelevents.adapters.registry import normalize_bytes
from modelevents.schemas import codec
from modelevents.schemas.errors import DetectionError
from modelevents.schemas.events import KIND_PAYLOAD
from modelevents.services.run_logic.run_machine import Outcome, RunMachine
from tests.corpus import corpus_files, corpus_id, require_corpus
from tests.paths import FIXTURES

OWN_FIXTURES = sorted(p for p in FIXTURES.rglob("*")
                      if p.is_file())
# Not provider output: a transcribed Standard Webhooks test vector (secret, headers, payload).
NOT_PROVIDER_OUTPUT = {"webhook-test-vector.json"}
CORPUS = [p for p in corpus_files("") if p.name not in NOT_PROVIDER_OUTPUT]


def _normalized(path: Path):
    try:
        return normalize_bytes(path.read_bytes(), source_name=path.name).events
    except DetectionError:
        pytest.fail(f"{path}: no adapter recognizes it")


def _check(events):
    assert events, "no events"
    ids = [e.event_id for e in events]
    assert len(set(ids)) == len(ids), "event ids must be unique within a run"
    machine = RunMachine.new(events[0].run_id)
    for event in events:
        assert type(event.payload) is KIND_PAYLOAD[event.kind], (event.kind, event.payload)
        assert codec.decode(codec.encode(event)) == event
        assert machine.apply(event) is not Outcome.DUPLICATE


@pytest.mark.corpus
@pytest.mark.parametrize("path", CORPUS, ids=corpus_id)
def test_corpus_events_keep_the_contract(path):
    require_corpus()
    events = _normalized(path)
    _check(events)
    again = _normalized(path)
    assert [e.event_id for e in again] == [e.event_id for e in events], "ids are deterministic"


def test_the_corpus_is_there_when_ci_runs():
    require_corpus()
    assert len(CORPUS) > 100


@pytest.mark.parametrize("path", OWN_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_own_fixtures_keep_the_contract(path):
    _check(_normalized(path))
