"""Records from the consumer to an agent in batches, and the producer's buffer: :func:`transport`
(:class:`BatchingConsumer`, its consumer thread, :class:`UnthreadedProducerBuffer`) and
:func:`take_batches`.

On the pipeline bench (2 cores), faust-streaming 0.15.3's own path from the fetched records to
an agent costs the worker more than its work (decoding, adapters, sequencing, encoding) and
leaves it waiting for records a third of the time: tasks and a wait per record in
``Consumer._drain_messages``, an event-loop turn per record in a stream's iterator, fetches held
1.5 s at the broker, a settings lookup per record in the producer buffer. Each is fixed where it
happens — in Faust's aiokafka driver (``faust.transport.drivers.aiokafka``), its conductor's
index and an agent's channel queue — since Faust offers no hook for any of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import faust
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from faust.transport import consumer as faust_consumer
from faust.transport import producer as faust_producer
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP

__all__ = ["BatchingConsumer", "UnthreadedProducerBuffer", "take_batches", "transport"]

log = logging.getLogger("modelevents.processor")


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
