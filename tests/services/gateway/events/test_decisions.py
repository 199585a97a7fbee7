"""The gateway's view of ``decisions`` (``services/gateway/events/decisions.py``) over records
encoded by the decisions' own codec: the latest revision of each decision, whatever order they
are read in; a tombstone removes it; anything else on the topic is skipped."""

from __future__ import annotations

import time
from dataclasses import dataclass

from modelevents.schemas.decision_record import Demotion, encode_decision
from modelevents.services.gateway.events.decisions import DecisionRecords, decision_row
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.migration.decisions.make import demoted, new_decision
from tests.services.migration.decisions import examples


@dataclass
class Consumed:  # the fields of aiokafka's ConsumerRecord the view reads
    key: bytes | None
    value: bytes | None


BUNDLE = examples.bundle()
DECISION = new_decision(BUNDLE, [examples.result(BUNDLE.bundle_id)], owner="platform")
DEMOTED = demoted(DECISION, Demotion(trigger="event_adapter", reason="another revision",
                                     at=int(time.time() * 1000), expected="a@1", observed="a@2",
                                     run_id="run_x", event_id="run_x:3", topic="events",
                                     partition=1, offset=7))


def consumed(decision) -> Consumed:
    return Consumed(decision.decision_id.encode(), encode_decision(decision))


def test_the_latest_revision_wins_whatever_order_it_is_read_in() -> None:
    view = DecisionRecords(PipelineSettings())
    assert view.apply(consumed(DECISION))
    assert view.apply(consumed(DEMOTED))
    assert not view.apply(consumed(DECISION))  # an older revision read later changes nothing
    assert view.decisions == {DECISION.decision_id: DEMOTED}


def test_a_tombstone_removes_and_other_values_are_skipped() -> None:
    view = DecisionRecords(PipelineSettings())
    view.apply(consumed(DECISION))
    assert not view.apply(Consumed(b"dec-x", b'{"not": "a decision"}'))
    assert not view.apply(Consumed(b"dec-x", encode_decision(DECISION)[:14]))  # cut short
    assert view.apply(Consumed(DECISION.decision_id.encode(), None))
    assert view.decisions == {}


def test_a_row_says_when_and_why_a_decision_was_demoted() -> None:
    assert decision_row(DECISION)["demoted_at"] is None
    row = decision_row(DEMOTED)
    assert (row["status"], row["revision"], row["trigger"]) == ("historical", 1, "event_adapter")
    assert row["demoted_at"] == DEMOTED.demotion.at
    assert row["target"]["snapshot"] == BUNDLE.target.snapshot
