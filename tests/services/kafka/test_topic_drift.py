"""The replication steps of ``topics apply`` (services/kafka/topic_drift.py): the reassignment
plan keeps each partition's current replicas (the first stays the preferred leader), adds the
least loaded brokers, drops extra replicas from the end, and the printed steps are the JSON and
the kafka-reassign-partitions.sh commands for it. The broker-facing part is tested against the
real broker in tests/integration/kafka/test_topics_check_apply.py."""

from __future__ import annotations

import json

from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topic_drift import Applied, reassignment_plan, reassignment_steps


def test_missing_replicas_go_to_the_least_loaded_brokers() -> None:
    current = {0: [1], 1: [2], 2: [3], 3: [1]}
    plan = reassignment_plan(current, 3, [1, 2, 3])
    assert all(plan[p][0] == current[p][0] for p in current)  # leaders stay
    assert all(sorted(replicas) == [1, 2, 3] for replicas in plan.values())
    spread = reassignment_plan({0: [1], 1: [1], 2: [1], 3: [1]}, 2, [1, 2, 3])
    assert sorted(r[1] for r in spread.values()) == [2, 2, 3, 3]


def test_extra_replicas_are_dropped_from_the_end_and_too_few_brokers_is_no_plan() -> None:
    assert reassignment_plan({0: [3, 1, 2]}, 2, [1, 2, 3]) == {0: [3, 1]}
    assert reassignment_plan({0: [1]}, 3, [1, 2]) == {}


def test_the_steps_are_the_json_and_the_commands() -> None:
    settings = PipelineSettings(bootstrap_servers="k1:9092", replication_factor=2)
    done = Applied(reassignments={"modelevents.events": {0: [1, 2], 1: [2, 1]}}, brokers=[1, 2])
    lines = reassignment_steps(settings, done)
    text = "\n".join(lines)
    start, end = lines.index("  cat > reassignment.json <<'EOF'"), lines.index("  EOF")
    document = json.loads("\n".join(lines[start + 1:end]))
    assert document == {"version": 1, "partitions": [
        {"topic": "modelevents.events", "partition": 0, "replicas": [1, 2]},
        {"topic": "modelevents.events", "partition": 1, "replicas": [2, 1]}]}
    assert ("kafka-reassign-partitions.sh --bootstrap-server k1:9092 --reassignment-json-file "
            "reassignment.json --execute") in text
    assert "--verify" in text and "modelevents topics apply" in text
    impossible = reassignment_steps(settings, Applied(reassignments={"t": {}}, brokers=[1]))
    assert "cannot be reached: the cluster has 1 broker(s)" in impossible[0]
