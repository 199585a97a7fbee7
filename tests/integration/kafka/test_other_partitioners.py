"""Frames produced by a client nobody here wrote, partitioning as librdkafka does (issue #11 §4).

librdkafka's default partitioner (``consistent_random``: CRC32 of the key) — what kcat and
confluent-kafka use — puts a run's frames on other partitions than Kafka's Java client and
aiokafka (murmur2), which the worker's run state is partitioned by. Before, such a run's frames
were processed by whichever worker held the partition they landed on: a run split over two
workers, events numbered twice from 0. Here confluent-kafka produces every own recording's frames
with its default partitioner, two workers share the partitions, and each run must come out
exactly as ``modelevents normalize`` gives it, nothing lost or doubled. An ``ingest`` record on
the wrong partition cannot be moved without losing its dedupe by offset: it is dead-lettered
with the fix (``PartitionMismatch``), never applied to a second copy of the run.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from modelevents.schemas import codec
from modelevents.schemas.events import Envelope, EventSource, ModelEvent, ToolResult
from modelevents.services.kafka.clients import partition_for_key
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import internal_topics
from tests.integration.conftest import broker_fixture
from tests.integration.pipeline import (
    ONE_PER_API,
    assert_run_as_normalized,
    collect,
    expected_counts,
    feed,
    halves,
    processed_to_end,
    run,
)

pytestmark = pytest.mark.kafka

kafka_broker = broker_fixture(base_port=19900, scope="module")


def _produce_with_librdkafka(settings: PipelineSettings, topic: str,
                             records: list[tuple[bytes, bytes]]) -> list[int]:
    """Records produced by confluent-kafka with its default partitioner; their partitions."""
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers,
                         "enable.idempotence": True, "linger.ms": 5})
    partitions: list[int] = []

    def delivered(error, message) -> None:
        assert error is None, error
        partitions.append(message.partition())

    for key, value in records:
        producer.produce(settings.topic(topic), value=value, key=key, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(60) == 0
    return partitions


def test_frames_from_librdkafkas_partitioner_reach_their_runs_with_two_workers(
        settings: PipelineSettings, start_worker) -> None:
    start_worker("first")
    start_worker("second")
    # Each run's first half from a librdkafka client (an application teeing its stream with
    # kcat), its second half from modelevents' own producer (the gateway): one run, two
    # partitioners.
    first, second = halves(ONE_PER_API)
    keys = [f.run_key.encode() for f in first]
    landed = _produce_with_librdkafka(settings, "frames",
                                      [(k, codec.encode(f)) for k, f in zip(keys, first)])
    # The premise: many frames are not where murmur2 (the run state's partitioning) puts them.
    misplaced = sum(p != partition_for_key(k, settings.partitions) for k, p in zip(keys, landed))
    assert misplaced > len(first) // 4
    # A run's frames are applied in the order they reach its partition: the second half goes
    # out once the first is through (rerouted to its run's partition where it landed elsewhere).
    run(processed_to_end(settings, settings.topic("frames")))
    run(processed_to_end(settings, internal_topics(settings)["rerouted"]))
    run(feed(settings, second))
    counts = expected_counts(ONE_PER_API)
    published = run(collect(settings, lambda p: all(p.complete(r, n) for r, n in counts.items())))
    for path in ONE_PER_API:
        assert_run_as_normalized(published, path)
    assert published.dead == []


def test_an_ingest_record_on_another_partition_is_dead_lettered_with_the_fix(
        settings: PipelineSettings, start_worker) -> None:
    start_worker()
    run_id = next(r for r in (f"run-{i}" for i in range(100))
                  if partition_for_key(r.encode(), settings.partitions) != 0)
    result = ModelEvent(f"{run_id}:tool:0", run_id, "default", "openai", "openai-responses", None,
                        "tool.result", EventSource("tool", 0, "executor"), 1, "executor@1",
                        Envelope("application/json", b"{}"), ToolResult("f", "call_1", "42"))
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers})
    producer.produce(settings.topic("ingest"), value=codec.encode(result), key=run_id.encode(),
                     partition=0)  # where murmur2 would not put it
    assert producer.flush(30) == 0
    published = run(collect(settings, lambda p: bool(p.dead)))
    (letter,) = published.dead
    assert letter.error_type == "PartitionMismatch" and "murmur2" in letter.reason
    assert letter.record == codec.encode(result)  # nothing lost: the record is in the letter
    assert not published.events.get(run_id)
