"""Each source partition processed in offset order without holes: :class:`PartitionOrder`, with
the partitions' first offsets from :class:`LogStarts`.

faust-streaming 0.15.3 can drop records it fetched, around rebalances and at start-up
(faust-streaming#596). Noticing that needs what Faust keeps to itself: the consumer's committed
offsets (``_committed_offset``), its unacked set (``_unacked_messages``, for the records held
back) and its assignment and high-water marks; a hole is closed by ``Consumer.seek_wait``, which
seeks in the consumer's own thread (``Consumer.seek`` touches aiokafka's fetcher from the event
loop's thread and can break a fetch in progress). :class:`LogStarts` asks an aiokafka consumer of
its own, since Faust's ``Consumer.earliest_offsets`` waits behind the consumer thread's fetches.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any

import faust
from aiokafka import AIOKafkaConsumer, TopicPartition

from modelevents.services.kafka.clients import make_consumer, start_client
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["LogStarts", "PartitionOrder"]

log = logging.getLogger("modelevents.processor")


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
        # (topic, partition) -> the log's end minus the offset due, at the last check: the
        # consumer lag /metrics reports (what is on the log and not processed yet).
        self.lag: dict[tuple[str, int], int] = {}

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
        consumer: Any = self.app.consumer
        unacked = consumer._unacked_messages
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
        tables: Any = app.tables
        if app.rebalancing or tables.recovery.in_recovery:
            self.progress.clear()
            return
        consumer = app.consumer
        assigned = {tp for tp in consumer.assignment() if tp.topic in self.topics}
        missing = assigned - self.due.keys()
        if missing:
            await self._start(missing)
        lag: dict[tuple[str, int], int] = {}
        for tp in assigned:
            due = self.due[tp]
            end = consumer.highwater(tp)
            if end is not None:
                lag[(tp.topic, tp.partition)] = max(0, end - due)
            seen = self.progress.setdefault(tp, [])
            if end is None or end <= due:
                seen.clear()
                continue
            seen.append(due)
            if len(seen) >= self.STALL_CHECKS and len(set(seen[-self.STALL_CHECKS:])) == 1:
                seen.clear()
                await self._seek(tp, due, f"nothing arrives although the log ends at {end}")
        self.lag = lag

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
        except Exception as exc:
            log.info("could not seek %s[%d]: %r", tp.topic, tp.partition, exc)

    async def _start(self, tps: set[Any]) -> None:
        consumer: Any = self.app.consumer
        committed = consumer._committed_offset  # set by Faust's seek to committed offsets
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
        self._connecting: asyncio.Lock | None = None

    async def connect(self, topics: Iterable[str] = ()) -> None:
        """Connect now, and look up the first offsets of ``topics`` once: a worker does it while
        it starts, so that its first batch does not wait for the connection, nor for the
        metadata of topics the lookup does not know yet (aiokafka fetches it and retries after
        its 100 ms retry backoff). Several agents may call it at once: one connects."""
        await self._connected()
        partitions = range(self.settings.partitions)
        await self([(topic, partition) for topic in topics for partition in partitions])

    async def _connected(self) -> AIOKafkaConsumer:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self.consumer is None:
                consumer = make_consumer(self.settings)
                await start_client(consumer, self.settings)
                self.consumer = consumer
            return self.consumer

    async def __call__(self, tps: Iterable[Any]) -> dict[Any, int]:
        tps = [TopicPartition(*tp) for tp in tps]  # Faust's TP: a (topic, partition) tuple too
        if not tps:
            return {}
        consumer = self.consumer
        if consumer is None:
            consumer = await self._connected()
        found = await consumer.beginning_offsets(tps)
        return {(tp.topic, tp.partition): offset for tp, offset in found.items()}

    async def close(self) -> None:
        if self.consumer is not None:
            consumer, self.consumer = self.consumer, None
            await consumer.stop()
