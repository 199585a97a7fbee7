"""What the stream processor needs from faust-streaming 0.15.3 beyond its public API, in one place.

Each piece names the Faust behaviour it works around, and reaches into Faust only as far as that
needs (the consumer's committed offsets, the recovery's progress). Seeks go through
``Consumer.seek_wait``, which runs in the consumer's own thread (``Consumer.seek`` touches
aiokafka's fetcher from the event loop's thread and can break a fetch in progress):

- :class:`RunTable`: a table whose changelog partition for a key is the key's own partition,
  and whose in-memory store its agent reads and sets directly;
- :class:`PartitionOrder`: each source partition processed in offset order without holes, and
  what the consumer dropped (around rebalances, at start-up) fetched again (faust-streaming#596);
- :class:`RecoveryWatch`: a table recovery that stopped receiving its changelog helped along;
- :class:`QuietMonitor`: Faust's default monitor without its per-record bookkeeping;
- :class:`RawRecords`: an agent's records as bytes, without Faust's per-record codec calls;
- :func:`transport` (:class:`BatchingConsumer`) and :func:`take_batches`: records from the
  consumer to an agent without a task, a wait or an event-loop turn per record, and fetches
  that do not sit at the broker while records wait; :class:`UnthreadedProducerBuffer`: the
  producer buffer's size without a settings lookup per record.

A newer faust-streaming may make some of them unnecessary; the processor's rebalance and
SIGKILL tests say whether they still hold.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import faust
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.errors import KafkaError
from faust.sensors.monitor import Monitor
from faust.transport import consumer as faust_consumer
from faust.transport import producer as faust_producer
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

from modelevents.services.kafka.clients import make_consumer, partition_for_key, start_client
from modelevents.services.kafka.settings import PipelineSettings

# Faust's private internals reached below (a store's _key_partition, the consumer's unacked
# set and committed offsets, the table manager's recovery, the conductor's index) belong to
# its concrete classes, not to the interfaces it types app, table and consumer with: they are
# read through names typed Any, which is what they are to the type checker.

__all__ = ["RunTable", "PartitionOrder", "LogStarts", "RecoveryWatch", "QuietMonitor",
           "RawRecords", "BatchingConsumer", "UnthreadedProducerBuffer", "transport",
           "take_batches"]

log = logging.getLogger("modelevents.processor")


class RawRecords(faust.Schema):
    """A topic schema that hands an agent each record's key and value as the bytes they are.

    With the ``raw`` serializers Faust returns them unchanged too, but through two serializer
    lookups and calls per record (~5 % of a busy worker's time); the processor decodes values
    itself, so the event is made from the message directly. Only for topics an agent reads."""

    def compile(self, app: Any, **kwargs: Any) -> Any:
        create_event = app.create_event

        async def decode(message: Any, *, propagate: bool = False) -> Any:
            return create_event(message.key, message.value, message.headers, message)

        return decode


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

    # The processor's agents write the changelog records themselves, with their batches' outputs
    # (services/processor/app.py, "Delivery"), and read and set the in-memory store (``memory://``)
    # directly:

    def lookup(self, key: bytes) -> Any:
        """The in-memory value of ``key``, or None: the store's dict read directly. Through the
        table a missing key costs a KeyError raised and caught in Faust's mapping layers
        (~1.5 µs; the common case: every frame looks up its key's alias, every new run its
        state)."""
        return self.data.data.get(key)

    def store_written(self, key: bytes, value: Any) -> None:
        """Set (None: delete) the in-memory value of ``key`` whose changelog record the caller
        wrote, without Faust's own changelog write.

        The key's partition is noted as Faust's memory store notes it for what it recovers, so
        that when a rebalance took the partition away, the store drops the key
        (``on_recovery_completed``) instead of keeping a value another worker now writes."""
        store: Any = self.data  # faust.stores.memory.Store
        if value is None:
            store.data.pop(key, None)
            store._key_partition.pop(key, None)
        else:
            store.data[key] = value
            store._key_partition[key] = self.partition_for_key(key)


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
        tables: Any = self.app.tables
        recovery = tables.recovery
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
                except Exception as exc:
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


# --- from the consumer to an agent, in batches ---------------------------------------------------
#
# Measured on the pipeline bench (2 cores): Faust's own path from the fetched records to an agent
# cost the worker more than its work (decoding, adapters, sequencing, encoding) and let it wait
# for records a third of the time. Three things, each fixed where it happens:


class BatchingConsumer(faust_aiokafka.Consumer):
    """Faust's aiokafka consumer, with two differences.

    **Delivery without a task per record.** ``Consumer._drain_messages`` hands every record to
    the conductor through ``Service.wait_first(callback(message), suspend_flow.wait())``: four
    tasks and an ``asyncio.wait`` per record, so that a delivery that blocks (a full stream
    buffer, flow control, a full producer buffer, the conductor's lock) can be abandoned when a
    rebalance suspends the flow. Here a record whose delivery cannot block — none of those
    conditions holds, which :meth:`_may_block` checks the way the conductor's handler tests them
    — is delivered without it: a record of a partition whose one subscriber is a channel that
    :func:`take_batches` reads is put in that channel's queue directly, as the conductor's
    handler would put it there but without its per-record awaits, lock, decoding and Event (the
    agents use only the message; measured A/B on the pipeline bench: ~10% less worker CPU per
    event), with the conductor's flow control (past the queue's pressure mark the partition's
    fetching pauses until the queue drained); any other record by a plain ``await`` of the
    conductor's handler (which then runs to its end without suspending). A record that may
    block takes Faust's ``wait_first`` as before. Everything else in the loop (read
    offsets, gaps, commits every ``broker_commit_every`` acks, a yield every 100 records) is
    Faust 0.15.3's.

    **Fetches that are not held back.** Faust creates the aiokafka consumer with
    ``fetch_max_wait_ms=1500``. aiokafka keeps one fetch in flight per broker, and leaves out of
    it every partition that still has records waiting to be consumed; so with one broker, a
    fetch sent while the frames partitions still had records held only partitions with nothing
    new (changelogs, ``ingest``, the internal topics), and the broker held it 1.5 s — during
    which the frames partitions, consumed meanwhile, could not be fetched. Seen as a one-second
    stall every few thousand records under load, and as added latency at any load.
    ``fetch_max_wait_ms`` bounds that wait (the cost is one empty fetch per interval when idle).
    And a partition Faust leaves out of its fetches is paused in aiokafka too (see
    ``_ConsumerThread._pause_as_faust_does``).
    """

    fetch_max_wait_ms = 1500  # the transport's subclass sets the value the processor chose

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # tp → (the conductor's channel set for it when looked at, the direct target or None)
        self._direct: dict[Any, tuple[Any, tuple[Any, Any, Any] | None]] = {}

    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return _ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    def _may_block(self, tp: Any) -> bool:
        app = self.app
        buffer = app.producer.buffer
        conductor: Any = app.topics
        return (self.suspend_flow.is_set() or not app.flow_control.is_active()
                or conductor._tp_to_callback_lock.locked()
                or buffer.size > buffer.max_messages
                or any(channel.queue.full() for channel in conductor._tp_index.get(tp, ())))

    def _direct_target(self, tp: Any) -> tuple[Any, Any, Any] | None:
        """(queue, pressure callbacks) of the one channel subscribed to ``tp`` when that channel
        is read by :func:`take_batches`, else None (the conductor delivers)."""
        conductor: Any = self.app.topics
        channels = conductor._tp_index.get(tp)
        cached = self._direct.get(tp)
        # (The conductor rebuilds its index on a resubscription, or adds to a partition's set.)
        if cached is not None and cached[0] is channels and (cached[1] is None
                                                             or len(channels) == 1):
            return cached[1]
        target = None
        if channels is not None and len(channels) == 1:
            [channel] = channels
            if getattr(channel, "delivered_directly", False):
                target = (channel.queue, *self._pressure_callbacks(tp))
        self._direct[tp] = (channels, target)
        return target

    def _pressure_callbacks(self, tp: Any) -> tuple[Any, Any]:
        # As the conductor's handler for ``tp`` makes them (faust/transport/conductor.py): a queue
        # past its pressure mark stops the fetching of ``tp`` until it drained to 40%. Faust's
        # bookkeeping of paused partitions wants its own TP type (the fetched records carry
        # aiokafka's).
        app = self.app
        tp = TP(tp.topic, tp.partition)

        def on_pressure_high() -> None:
            app.sensors.on_topic_buffer_full(tp)
            self.on_buffer_full(tp)

        def on_pressure_drop() -> None:
            self.on_buffer_drop(tp)

        return on_pressure_high, on_pressure_drop

    async def _drain_messages(self, fetcher: Any) -> None:  # pragma: no cover - a worker's loop
        # Faust 0.15.3's Consumer._drain_messages; only the delivery differs (see the class).
        callback = self.callback
        getmany = self.getmany
        consumer_should_stop = self._stopped.is_set
        fetcher_should_stop = fetcher._stopped.is_set
        get_read_offset = self._read_offset.__getitem__
        set_read_offset = self._read_offset.__setitem__
        set_flag = self.diag.set_flag
        unset_flag = self.diag.unset_flag
        commit_every = self._commit_every
        acks_enabled_for = self.app.topics.acks_enabled_for
        may_block = self._may_block
        direct_target = self._direct_target
        suspend_flow = self.suspend_flow
        yield_every = 100
        num_since_yield = 0
        sleep = asyncio.sleep
        try:
            while not (consumer_should_stop() or fetcher_should_stop()):
                set_flag(faust_consumer.CONSUMER_FETCHING)
                ait = getmany(timeout=1.0)
                await self.sleep(0)
                if not self.should_stop:
                    async for tp, message in ait:
                        num_since_yield += 1
                        if num_since_yield > yield_every:
                            await sleep(0)
                            num_since_yield = 0
                        offset = message.offset
                        r_offset = get_read_offset(tp)
                        if r_offset is None or offset >= r_offset:
                            gap = offset - (r_offset or 0)
                            if gap > 1 and r_offset and acks_enabled_for(message.topic):
                                await self._add_gap(tp, r_offset + 1, offset)
                            if commit_every is not None and self._n_acked >= commit_every:
                                self._n_acked = 0
                                await self.commit()
                            if may_block(tp):
                                await self.wait_first(callback(message), suspend_flow.wait())
                            else:
                                target = direct_target(tp)
                                if target is None:
                                    await callback(message)
                                else:
                                    queue, on_high, on_drop = target
                                    message.incref(1)
                                    queue.put_nowait_enhanced(_Delivered(message),
                                                              on_pressure_high=on_high,
                                                              on_pressure_drop=on_drop)
                            set_read_offset(tp, offset)
                    unset_flag(faust_consumer.CONSUMER_FETCHING)
        except self.consumer_stopped_errors:
            if self.transport.app.should_stop:
                self.log.info("Broker stopped consumer, shutting down...")
                return
            raise
        except asyncio.CancelledError:
            if self.transport.app.should_stop:
                self.log.info("Consumer shutting down for user cancel.")
                return
            raise
        except Exception as exc:
            self.log.exception("Drain messages raised: %r", exc)
            raise
        finally:
            unset_flag(faust_consumer.CONSUMER_FETCHING)


class _Delivered:
    """A record :class:`BatchingConsumer` put in an agent's queue itself: its message, which
    is all of Faust's Event that the agents use (``take_batches``)."""

    __slots__ = ("message",)

    def __init__(self, message: Any) -> None:
        self.message = message


class _ConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        # Read by AIOKafkaConsumer.start() when it creates its fetcher; Faust passes no setting.
        owner = self.consumer
        assert isinstance(owner, BatchingConsumer), "made by BatchingConsumer, whose thread it is"
        consumer._fetch_max_wait_ms = owner.fetch_max_wait_ms
        return consumer

    async def _fetch_records(self, consumer: AIOKafkaConsumer, active_partitions: Any,
                             timeout: float | None = None, max_records: int | None = None) -> Any:
        if self.consumer.flow_active:
            await self._pause_as_faust_does(consumer)
        return await super()._fetch_records(consumer, active_partitions, timeout=timeout,
                                            max_records=max_records)

    async def _pause_as_faust_does(self, consumer: AIOKafkaConsumer) -> None:
        # Faust pauses a partition (a changelog once its table is recovered, every source
        # partition while tables recover) only in its own bookkeeping: it leaves the partition
        # out of what it asks aiokafka for. aiokafka goes on fetching it and keeps what it
        # fetched — and while a partition holds fetched records nobody takes, aiokafka sends no
        # fetch to that broker for 100 ms (its prefetch backoff). Seen as ~100 ms stalls after
        # every start: the worker's own changelog writes, fetched and never consumed. So what
        # Faust pauses is paused in aiokafka too, and what aiokafka holds for it dropped (its
        # position did not move: resumed, it is fetched again from there). A partition Faust
        # only stops asking for because its stream buffer is full keeps its fetched records:
        # Faust takes them once the buffer drains.
        paused_here = set(self.consumer._paused_partitions)  # Faust's TPs: (topic, partition)
        paused = consumer.paused()
        resumed = [tp for tp in paused if tp not in paused_here]
        if resumed:
            consumer.resume(*resumed)
        idle = [tp for tp in consumer.assignment() if tp in paused_here and tp not in paused]
        if idle:
            consumer.pause(*idle)
            try:  # a paused partition's fetched records are dropped when asked for
                await consumer._fetcher.fetched_records(idle, timeout=0)
            except KafkaError as exc:  # an error fetched for it: it comes again when resumed
                log.debug("dropped the fetch error of paused partitions %s: %r", idle, exc)


class UnthreadedProducerBuffer(faust_producer.ProducerBuffer):
    """Faust's producer buffer, for a producer that is not threaded (``producer_threaded`` off,
    Faust's default and the processor's choice).

    Faust's ``size`` and ``put`` read that setting each time, a settings-registry lookup of about
    a microsecond; the conductor takes the size once per record delivered, and the consumer's
    delivery (``BatchingConsumer._may_block``) once more. Here they go to the pending queue
    directly."""

    @property
    def size(self) -> int:
        return self.pending.qsize()

    def put(self, fut: Any) -> None:
        self.pending.put_nowait(fut)


class _Producer(faust_aiokafka.Producer):
    """Faust's aiokafka producer with an :class:`UnthreadedProducerBuffer` (Faust creates its
    buffer in the constructor and offers no hook to choose its class)."""

    def __init__(self, transport: Any, **kwargs: Any) -> None:
        super().__init__(transport, **kwargs)
        if not self.app.conf.producer_threaded:
            self.buffer.__class__ = UnthreadedProducerBuffer


def transport(app: faust.App, fetch_max_wait: float) -> faust_aiokafka.Transport:
    """The aiokafka transport of ``app`` with :class:`BatchingConsumer` as its consumer and
    :class:`UnthreadedProducerBuffer` as its producer's buffer; assign it to ``app.transport``
    before anything uses the app's consumer or producer."""
    consumer = type("BatchingConsumer", (BatchingConsumer,),
                    {"fetch_max_wait_ms": max(1, round(fetch_max_wait * 1000))})
    cls = type("BatchingTransport", (faust_aiokafka.Transport,),
               {"Consumer": consumer, "Producer": _Producer})
    return cls(app.conf.broker_consumer, app)


def take_batches(stream: Any, max_records: int, within: float) -> AsyncIterator[list[Any]]:
    """The events of an agent's stream in batches of up to ``max_records``: what is waiting is
    taken at once, and a batch waits at most ``within`` seconds after its first event for more.

    For ``stream.noack_take``, which hands each event through the stream's iterator — a
    processor, sensors, a context variable and an ``asyncio.sleep(0)`` (an event-loop turn) per
    event — and waits ``within`` after each batch even when records are waiting. Here the events
    are taken from the channel's queue directly and prepared as the stream's iterator prepares
    them (``faust/_cython/streams.pyx``, ``_prepare_event``): an event delivered before the
    current consumer generation, or while flow control is suspended (a rebalance), is left out —
    neither processed nor acked; its partition's next session reads it again from the committed
    offset — and every other event's message is tracked as unacked, so that Faust waits for its
    ack before it commits or hands its partition over. Acks stay the caller's
    (``event.message.ack(consumer)``), as with ``noack_take``. What the batches hold are Faust
    Events, or — for the records :class:`BatchingConsumer` puts in the queue itself — objects
    with only their ``message``: callers use nothing else.

    The stream's channel is subscribed here, at the call, as iterating the stream would: call
    it before the agent's first ``await``, so that the consumer's first subscription includes
    the agent's topics (Faust subscribes once the agents started; a topic added later waits for
    a resubscription 45 s on).
    """
    channel = aiter(stream.channel)  # registers the topic with the conductor
    channel.delivered_directly = True  # BatchingConsumer puts its records in its queue itself
    return _take(stream, channel.queue, max_records, within)


async def _take(stream: Any, queue: Any, max_records: int, within: float,
                ) -> AsyncIterator[list[Any]]:
    app = stream.app
    track = app.consumer._unacked_messages.add
    acking_topics = app.topics._acking_topics
    flow_control = app.flow_control
    loop = asyncio.get_running_loop()
    while not stream.should_stop:
        try:
            events = [await queue.get()]
        except StopAsyncIteration:  # Faust ends a channel this way when it stops
            return
        deadline = loop.time() + within
        while True:
            while len(events) < max_records and not queue.empty():
                events.append(queue.get_nowait())
            remaining = deadline - loop.time()
            if len(events) >= max_records or remaining <= 0:
                break
            try:
                async with asyncio.timeout(remaining):
                    events.append(await queue.get())
            except (TimeoutError, StopAsyncIteration):
                break
        generation = app.consumer_generation_id
        active = flow_control.is_active()
        batch = []
        for event in events:
            message = event.message
            if not active or message.generation_id != generation:
                continue
            if not message.tracked and message.topic in acking_topics:
                message.tracked = True
                track(message)
            batch.append(event)
        if batch:
            yield batch
