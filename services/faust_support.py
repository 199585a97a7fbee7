"""What the stream processor needs from faust-streaming 0.15.3 beyond its public API, in one place.

Each piece names the Faust behaviour it works around, and reaches into Faust only as far as that
needs (the consumer's committed offsets, the recovery's progress). Seeks go through
``Consumer.seek_wait``, which runs in the consumer's own thread (``Consumer.seek`` touches
aiokafka's fetcher from the event loop's thread and can break a fetch in progress):

- :class:`RunTable`: a table whose changelog partition for a key is the key's own partition;
- :class:`PartitionOrder`: each source partition processed in offset order without holes, and
  what the consumer dropped (around rebalances, at start-up) fetched again (faust-streaming#596);
- :class:`RecoveryWatch`: a table recovery that stopped receiving its changelog helped along;
- :class:`QuietMonitor`: Faust's default monitor without its per-record bookkeeping.

A newer faust-streaming may make some of them unnecessary; the processor's rebalance and
SIGKILL tests say whether they still hold.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

import faust
from aiokafka import AIOKafkaConsumer, TopicPartition
from faust.sensors.monitor import Monitor

from modelevents.services.kafka_io import make_consumer, partition_for_key, start_client
from modelevents.services.settings import PipelineSettings

__all__ = ["RunTable", "PartitionOrder", "LogStarts", "RecoveryWatch", "QuietMonitor"]

log = logging.getLogger("modelevents.processor")


class RunTable(faust.Table):
    """A table whose changelog partition for a key is the partition the default partitioner
    gives that key — the partition of the source records keyed by it.

    Faust's own choice is the partition of the record being processed (wrong for a batch that
    spans partitions) or, with ``use_partitioner``, the producer's partitioner, which fails on a
    changelog whose metadata the producer has not fetched yet. The hash needs neither.
    """

    # Faust narrates table starts and stops; keep this subclass's narration under "faust" too
    # (a logger mode has not claimed for another class, or mode would replace it).
    logger = logging.getLogger("faust.tables.modelevents")

    def partition_for_key(self, key: Any) -> int:
        return partition_for_key(key, self.partitions or self.app.conf.topic_partitions)


class PartitionOrder:
    """Hands an agent the records of each source partition strictly in offset order, and gets
    Faust to deliver again what it lost.

    Everything that makes outputs idempotent (a run's applied offset, the normalizer's event
    positions) rests on processing a partition in order without holes. faust-streaming 0.15.3
    does not guarantee that around rebalances and at start-up: it can drop records it fetched
    (they are meant to be fetched again by a seek to the committed offsets, but a partition
    never committed is not sought, and a stale record can move the consumer's read offset past
    the ones fetched again; upstream issue faust-streaming#596). Seen here: a second worker
    joining within the first commit interval lost records on the partitions it kept; a fresh
    worker lost the first records of ``ingest``. Dropped records are neither processed nor
    acked, and no offset of their partition can be committed after them.

    So per partition the next offset due is kept (from the committed offset where a session
    starts, or the log start if nothing was ever committed). A record below it was processed in
    this session already (delivered again after a seek): it is only acked. A record above it
    means records were dropped: it and everything after it in the batch are held back — not
    processed, not acked — and the partition is sought back to the offset due, so they come
    again, in order. A partition whose log goes beyond the offset due while nothing arrives for
    a few seconds (the dropped records were the last ones) is sought back likewise.
    """

    RESEEK_AFTER_S = 2.0  # a seek still unanswered after this long is repeated
    STALL_CHECK_S = 1.0  # how often partitions are checked for a stall
    STALL_CHECKS = 3  # this many checks without progress while records wait: a stall

    def __init__(self, app: faust.App, topics: Iterable[str], log_starts: LogStarts) -> None:
        self.app = app
        self.topics = frozenset(topics)
        self.log_starts = log_starts
        self.due: dict[Any, int] = {}
        self.gaps: dict[Any, int] = {}
        self.sought: dict[Any, tuple[int, float]] = {}
        self.progress: dict[Any, list[int]] = {}

    async def split(self, batch: Sequence[Any]) -> tuple[list[Any], list[Any], list[Any]]:
        """The records of a batch to process, those processed before (to ack only), and those
        held back (to :meth:`abandon`)."""
        unknown = {event.message.tp for event in batch} - self.due.keys()
        if unknown and not self.app.rebalancing:
            await self._start(unknown)
        fresh: list[Any] = []
        again: list[Any] = []
        held: list[Any] = []
        for event in batch:
            message = event.message
            tp = message.tp
            if tp in self.gaps or tp not in self.due:
                # A partition with a hole is read again from it; one that has not started yet
                # (the consumer is rebalancing: no calls into it, they can stall its recovery)
                # is delivered again in its next session, from the committed offset.
                held.append(event)
                continue
            due = self.due[tp]
            if message.offset < due:
                again.append(event)
            elif message.offset == due:
                fresh.append(event)
                self.due[tp] = due + 1
            else:
                self.gaps[tp] = due
                held.append(event)
        return fresh, again, held

    def abandon(self, held: Iterable[Any]) -> None:
        """Give up records held back, without acking them: they are delivered again.

        Faust waits (without a time limit) for every record it handed out to be acked before
        it hands partitions over or stops. A held record is marked acked on its own message only,
        so Faust stops waiting for it, but its offset is not recorded as processed, so no commit
        passes it; the copy delivered again is processed and acked as usual.
        """
        unacked = self.app.consumer._unacked_messages
        for event in held:
            event.message.acked = True
            unacked.discard(event.message)

    async def seek_gaps(self) -> None:
        if self.app.rebalancing:
            # The next session of each partition starts at its committed offset anyway.
            self.gaps.clear()
            return
        now = time.monotonic()
        for tp, due in self.gaps.items():
            last = self.sought.get(tp)
            if last is not None and last[0] == due and now - last[1] < self.RESEEK_AFTER_S:
                continue
            self.sought[tp] = (due, now)
            await self._seek(tp, due, "the records from there came with a hole")
        self.gaps.clear()

    async def check_stalled(self) -> None:
        app = self.app
        if app.rebalancing or app.tables.recovery.in_recovery:
            self.progress.clear()
            return
        consumer = app.consumer
        assigned = {tp for tp in consumer.assignment() if tp.topic in self.topics}
        missing = assigned - self.due.keys()
        if missing:
            await self._start(missing)
        for tp in assigned:
            due = self.due[tp]
            end = consumer.highwater(tp)
            seen = self.progress.setdefault(tp, [])
            if end is None or end <= due:
                seen.clear()
                continue
            seen.append(due)
            if len(seen) >= self.STALL_CHECKS and len(set(seen[-self.STALL_CHECKS:])) == 1:
                seen.clear()
                await self._seek(tp, due, f"nothing arrives although the log ends at {end}")

    def forget(self, tps: Iterable[Any]) -> None:
        for tp in tps:
            self.due.pop(tp, None)
            self.sought.pop(tp, None)
            self.progress.pop(tp, None)

    async def _seek(self, tp: Any, offset: int, why: str) -> None:
        log.warning("%s[%d]: record %d was dropped by the consumer (%s; faust-streaming#596): "
                    "reading the partition again from it", tp.topic, tp.partition, offset, why)
        try:
            await self.app.consumer.seek_wait({tp: offset})
        except Exception as exc:  # noqa: BLE001 - revoked meanwhile: its next owner reads it
            log.info("could not seek %s[%d]: %r", tp.topic, tp.partition, exc)

    async def _start(self, tps: set[Any]) -> None:
        committed = self.app.consumer._committed_offset  # set by Faust's seek to committed offsets
        never = [tp for tp in tps if not committed.get(tp)]
        earliest = await self.log_starts(never) if never else {}
        for tp in tps:
            self.due[tp] = committed.get(tp) or earliest.get(tp) or 0


class LogStarts:
    """The first offset of partitions, looked up with a consumer of its own (no group).

    Faust's ``Consumer.earliest_offsets`` queues the request behind the consumer thread's
    fetches and took seconds here, which delayed every partition's first check.
    """

    def __init__(self, settings: PipelineSettings) -> None:
        self.settings = settings
        self.consumer: AIOKafkaConsumer | None = None

    async def __call__(self, tps: Iterable[Any]) -> dict[Any, int]:
        if self.consumer is None:
            consumer = make_consumer(self.settings)
            await start_client(consumer, self.settings)
            self.consumer = consumer
        # Faust's TP and aiokafka's TopicPartition are both (topic, partition) tuples.
        found = await self.consumer.beginning_offsets([TopicPartition(*tp) for tp in tps])
        return {(tp.topic, tp.partition): offset for tp, offset in found.items()}

    async def close(self) -> None:
        if self.consumer is not None:
            consumer, self.consumer = self.consumer, None
            await consumer.stop()


class RecoveryWatch:
    """Helps a table recovery along that stopped receiving its changelog records.

    Now and then (a few rebalances in a hundred here) faust-streaming 0.15.3's recovery after a
    rebalance waits for ever: the consumer fetched the changelog records (its positions are at
    the end) but they never reached the recovery, which keeps logging "No event received for
    active tp". When recovery has made no progress for ``STALL_S`` seconds, the changelog
    partitions it still needs are sought back to where it is, which delivers the records again
    (the recovery applies each offset once).
    """

    STALL_S = 5.0
    CHECK_S = 1.0

    def __init__(self, app: faust.App) -> None:
        self.app = app
        self.watching: tuple[dict[Any, int], float] | None = None

    async def check(self) -> None:
        recovery = self.app.tables.recovery
        if not recovery.in_recovery or not recovery.need_recovery():
            self.watching = None
            return
        now = time.monotonic()
        offsets = dict(recovery.active_offsets)
        if self.watching is None or self.watching[0] != offsets:
            self.watching = (offsets, now)
            return
        if now - self.watching[1] < self.STALL_S:
            return
        self.watching = (offsets, now)
        for tp, remaining in recovery.active_remaining().items():
            if remaining > 0:
                position = max(offsets.get(tp, -1), -1) + 1
                log.warning("table recovery has not progressed for %.0f s on %s[%d] (%d records "
                            "to go): reading the changelog again from offset %d",
                            self.STALL_S, tp.topic, tp.partition, remaining, position)
                try:
                    await self.app.consumer.seek_wait({tp: position})
                except Exception as exc:  # noqa: BLE001 - a new rebalance took it away
                    log.info("could not seek %s[%d]: %r", tp.topic, tp.partition, exc)


class QuietMonitor(Monitor):
    """Faust's monitor (every app has one: the consumer reports commits and end offsets to it)
    without the statistics it keeps per record, per table access and per send.

    Those feed Faust's web views, which the worker does not serve (``web_enabled=False``), and
    cost the worker a few percent of its time at every record in and out.
    """

    def on_message_in(self, tp: Any, offset: int, message: Any) -> None:
        return None

    def on_stream_event_in(self, tp: Any, offset: int, stream: Any, event: Any) -> None:
        return None

    def on_stream_event_out(self, tp: Any, offset: int, stream: Any, event: Any,
                            state: Any = None) -> None:
        return None

    def on_message_out(self, tp: Any, offset: int, message: Any) -> None:
        return None

    def on_table_get(self, table: Any, key: Any) -> None:
        return None

    def on_table_set(self, table: Any, key: Any, value: Any) -> None:
        return None

    def on_table_del(self, table: Any, key: Any) -> None:
        return None

    def on_send_initiated(self, producer: Any, topic: str, message: Any, keysize: int,
                          valsize: int) -> None:
        return None

    def on_send_completed(self, producer: Any, state: Any, metadata: Any) -> None:
        return None
