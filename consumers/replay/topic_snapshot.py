"""Read a bounded snapshot of a topic: from a start point up to the end offsets seen when reading
began. Replay and export need a log that holds still while they read it: a reader that waits for
"no record for a while" (an idle timeout) would give different answers on a busy and an idle
pipeline, and would never finish on a busy one.

    start = Start.offset(0) | Start.time(epoch_ms) | Start.beginning()
    async for rec in read_snapshot(settings, "events", start=start, key=b"run-1"):
        rec.partition, rec.offset, rec.timestamp, rec.key, rec.value   # raw bytes

Records come in offset order per partition (all records of a run share a partition, so per run
they come in log order); partitions are read side by side. No consumer group is joined and
nothing is committed: a snapshot read leaves no trace on the cluster.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from modelevents.consumers.errors import MissingTopic
from modelevents.schemas.errors import ConfigError
from modelevents.services.errors import KafkaUnavailable
from modelevents.services.kafka.clients import (
    make_consumer,
    partition_for_key,
    start_client,
    topic_name,
)
from modelevents.services.kafka.settings import PipelineSettings

# A partition whose position does not move for this long while records remain below the end
# offset means the broker stopped serving it: say so instead of waiting forever.
STALL_SECONDS = 60.0
_POLL_MS = 500


@dataclass(frozen=True, slots=True)
class Start:
    """Where a snapshot read begins on every partition: the beginning, an offset, or a time."""

    offset: int | None = None  # the same offset on every partition (clamped to what exists)
    time_ms: int | None = None  # the first record whose timestamp is at or after this time

    @classmethod
    def beginning(cls) -> Start:
        return cls()

    @classmethod
    def at_offset(cls, offset: int) -> Start:
        if offset < 0:
            raise ConfigError(f"an offset is 0 or more, not {offset}")
        return cls(offset=offset)

    @classmethod
    def at_time(cls, time_ms: int) -> Start:
        return cls(time_ms=time_ms)

    def describe(self) -> str:
        if self.offset is not None:
            return f"from offset {self.offset}"
        if self.time_ms is not None:
            return f"from {format_ms(self.time_ms)}"
        return "from the beginning"


@dataclass(frozen=True, slots=True)
class RawRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int  # epoch ms: the record's timestamp in the log (CreateTime by default)
    key: bytes | None
    value: bytes | None  # None: a tombstone


def format_ms(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


async def read_snapshot(settings: PipelineSettings, topic: str, *, start: Start = Start(),
                        key: bytes | None = None,
                        stall_seconds: float = STALL_SECONDS) -> AsyncIterator[RawRecord]:
    """Yield the records of ``topic`` (logical or full name) between ``start`` and the end offsets
    at the time of the call.

    ``key``: only records with this key, and only the partition the default partitioner maps it
    to is read.
    Raises MissingTopic (a ConfigError) when the topic does not exist, KafkaUnavailable when the
    broker is gone.
    """
    full = topic_name(settings, topic)
    consumer = make_consumer(settings, from_beginning=True)
    await start_client(consumer, settings)
    try:
        # consumer.topics() does not keep the partition map; read the metadata it fetches.
        cluster = await consumer._client.fetch_all_metadata()
        partitions = cluster.partitions_for_topic(full)
        if not partitions:
            raise MissingTopic(
                f"topic {full} does not exist on {settings.bootstrap_servers}; check the topic "
                f"prefix ({settings.topic_prefix!r}, --prefix or $MODELEVENTS_TOPIC_PREFIX) or "
                f"create the topics with `modelevents topics create`")
        if key is not None:
            partitions = {partition_for_key(key, len(partitions))}
        tps = [TopicPartition(full, p) for p in sorted(partitions)]
        consumer.assign(tps)
        first = await consumer.beginning_offsets(tps)
        end = await consumer.end_offsets(tps)
        begin = dict(first)
        if start.offset is not None:
            begin = {tp: min(max(start.offset, first[tp]), end[tp]) for tp in tps}
        elif start.time_ms is not None:
            found = await consumer.offsets_for_times({tp: start.time_ms for tp in tps})
            # None: no record at or after that time on this partition → nothing to read there.
            begin = {tp: end[tp] if found[tp] is None else found[tp].offset for tp in tps}
        pending = []
        for tp in tps:
            if begin[tp] < end[tp]:
                consumer.seek(tp, begin[tp])
                pending.append(tp)
            else:
                consumer.pause(tp)
        moved_at = time.monotonic()
        while pending:
            try:
                batches = await consumer.getmany(*pending, timeout_ms=_POLL_MS)
            except KafkaError as exc:
                raise KafkaUnavailable(settings.bootstrap_servers, str(exc)) from exc
            for tp, messages in batches.items():
                for msg in messages:
                    if msg.offset >= end[tp]:
                        break  # arrived after the snapshot began
                    if key is not None and msg.key != key:
                        continue
                    yield RawRecord(full, msg.partition, msg.offset, msg.timestamp, msg.key,
                                    msg.value)
            if batches:
                moved_at = time.monotonic()
            still = []
            for tp in pending:
                # Compaction and transaction markers leave holes: the position, not the last
                # offset seen, says whether a partition is done.
                if await consumer.position(tp) >= end[tp]:
                    consumer.pause(tp)
                else:
                    still.append(tp)
            pending = still
            if pending and time.monotonic() - moved_at > stall_seconds:
                where = ", ".join([f"{tp.partition}@{await consumer.position(tp)}/{end[tp]}"
                                   for tp in pending])
                raise KafkaUnavailable(
                    settings.bootstrap_servers,
                    f"reading {full} stalled for {stall_seconds:.0f}s at partition@position/end "
                    f"{where}")
    finally:
        await consumer.stop()
