"""The worker's outbox against the real broker: a producer the broker gives up on is replaced, and
what it had not got acknowledged is sent again — the batch goes on instead of failing.

The broker gives up on an idempotent producer whose record batches arrive with a gap in their
sequence numbers (OutOfOrderSequenceNumber; seen here when a retry after a leader change was
overtaken). The test makes the gap itself — it moves the producer's next sequence number of one
partition on — so the broker's own refusal is what the outbox meets.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import TopicPartition

from modelevents.services.kafka import clients
from modelevents.services.kafka.clients import partition_for_key
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.processor.outbox import Outbox, OutputProducer
from tests.integration.pipeline import run

pytestmark = pytest.mark.kafka


async def _values(settings: PipelineSettings, topic: str) -> list[bytes]:
    consumer = clients.make_consumer(settings, topic)
    await clients.start_client(consumer, settings)
    try:
        partitions = [TopicPartition(settings.topic(topic), p) for p in range(settings.partitions)]
        ends = await consumer.end_offsets(partitions)
        values: list[bytes] = []
        while [tp for tp in partitions if await consumer.position(tp) < ends[tp]]:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                values += [r.value for r in records]
        return values
    finally:
        await consumer.stop()


def test_a_producer_the_broker_gave_up_on_is_replaced_and_the_batch_still_arrives(
        settings: PipelineSettings) -> None:
    async def scenario() -> tuple[OutputProducer, list[bytes]]:
        output = OutputProducer(lambda: clients.start_producer(settings, linger_ms=0))
        await output.start()
        topic = settings.topic("events")
        try:
            first = Outbox(output, settings.partitions)
            first.add(topic, b"run-a", b"before")
            await first.send_all()
            # A gap in the numbering of run-a's partition: the broker refuses what comes next.
            tp = TopicPartition(topic, partition_for_key(b"run-a", settings.partitions))
            output.current._txn_manager.increment_sequence_number(tp, 7)
            second = Outbox(output, settings.partitions)
            for n in range(20):
                second.add(topic, b"run-a", b"after-%d" % n)
            second.add(topic, b"run-b", b"other partition")
            await asyncio.wait_for(second.send_all(), timeout=60)
            return output, await _values(settings, "events")
        finally:
            await output.stop()

    output, values = run(scenario())
    assert output.replaced == 1
    assert values.count(b"before") == 1
    # Everything of the refused batch arrived, in order within its partition; nothing lost.
    after = [v for v in values if v.startswith(b"after-")]
    assert sorted(set(after)) == sorted(b"after-%d" % n for n in range(20))
    assert [v for i, v in enumerate(after) if v not in after[:i]] == [b"after-%d" % n for n in range(20)]
    assert b"other partition" in values
