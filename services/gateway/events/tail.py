"""One consumer of ``events`` for every run this gateway follows live: :class:`EventsTail`.

The gateway tails ``events`` once — every partition, from its end — and hands each record,
decoded once, to the :class:`Subscription` of its run key. One tail rather than a consumer per
followed run: 20 runs over 4 partitions would fetch each record five times and wake 20 fetch
loops, and on a machine with no core to spare every wake-up waits for a core — most of an
event's way to the page (docs/performance.md, "The UI").

A subscription gets every record of its key the tail reads after :meth:`EventsTail.subscribe`
returned; what the topic held before, the subscriber reads on its own (``reads.
live_run_events`` reads the run's history to the end offsets it finds after subscribing, and
drops the overlap by ``seq``). The tail never waits for a subscriber: a subscription that holds
more than ``inbox_limit`` records its reader did not take (a reader held back by a stalled
follower for long) fails, as does every subscription when the tail's consumer fails (a broker
gone); their readers end and their followers reconnect with ``Last-Event-ID``. The consumer
starts with the first subscription and stops ``linger_s`` after the last one left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import AsyncIterator

from aiokafka.errors import KafkaError

from modelevents.services.errors import KafkaUnavailable
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["EventsTail", "Subscription", "InboxOverflow"]

log = logging.getLogger("modelevents.gateway.events_tail")


class InboxOverflow(Exception):
    """A subscription's reader fell more than ``inbox_limit`` records behind the tail."""


class Subscription:
    """The records of one run key the tail read since :meth:`EventsTail.subscribe`."""

    def __init__(self, tail: EventsTail, key: bytes) -> None:
        self.key = key
        self._tail = tail
        self._items: deque[clients.Record] = deque()
        self._wake = asyncio.Event()
        self._error: BaseException | None = None

    def put(self, record: clients.Record) -> None:
        if len(self._items) >= self._tail.inbox_limit:
            self.fail(InboxOverflow(f"{len(self._items)} records of {self.key!r} not taken"))
            return
        self._items.append(record)
        self._wake.set()

    def fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._wake.set()
        self._tail.discard(self)

    def close(self) -> None:
        self._tail.discard(self)

    async def records(self, idle_tick: float) -> AsyncIterator[clients.Record | None]:
        """The records as they come; ``None`` after each ``idle_tick`` s without one. Raises
        what made the subscription fail (after the records it got before)."""
        while True:
            while self._items:
                yield self._items.popleft()
            if self._error is not None:
                raise self._error
            self._wake.clear()
            try:
                async with asyncio.timeout(idle_tick):
                    await self._wake.wait()
            except TimeoutError:
                yield None


class EventsTail:
    """The gateway's one live reader of ``events`` (module docstring)."""

    def __init__(self, settings: PipelineSettings, *, inbox_limit: int = 20_000,
                 linger_s: float = 5.0) -> None:
        self.settings = settings
        self.inbox_limit = inbox_limit
        self.linger_s = linger_s
        self._subscriptions: dict[bytes, set[Subscription]] = {}
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._subscribed = asyncio.Event()  # set while anyone subscribes
        self._stopping = False  # the running tail decided to stop (nobody subscribed)

    @property
    def running(self) -> bool:
        """Whether the tail's consumer runs and goes on (it does while anyone subscribes)."""
        return self._task is not None and not self._task.done() and not self._stopping

    async def subscribe(self, run_id: str) -> Subscription:
        """A subscription to the records keyed ``run_id`` from now on: once this returns, the
        tail's position is fixed, so every later record of the key reaches it. Raises
        KafkaUnavailable when the tail cannot start."""
        if not self.running:
            loop = asyncio.get_running_loop()
            self._ready = loop.create_future()
            self._stopping = False
            self._task = asyncio.create_task(self._run(self._ready), name="events-tail")
        assert self._ready is not None
        await asyncio.shield(self._ready)
        key = clients.run_key_bytes(run_id)
        subscription = Subscription(self, key)
        self._subscriptions.setdefault(key, set()).add(subscription)
        self._subscribed.set()
        return subscription

    def discard(self, subscription: Subscription) -> None:
        subscriptions = self._subscriptions.get(subscription.key)
        if subscriptions is None:
            return
        subscriptions.discard(subscription)
        if not subscriptions:
            del self._subscriptions[subscription.key]
        if not self._subscriptions:
            self._subscribed.clear()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
            self._task = None

    async def _run(self, ready: asyncio.Future[None]) -> None:
        settings = self.settings
        consumer = None
        try:
            # Every partition: a short fetch wait (clients.LIVE_FETCH_MAX_WAIT_MS says why).
            consumer = clients.make_consumer(settings,
                                             fetch_max_wait_ms=clients.LIVE_FETCH_MAX_WAIT_MS)
            await clients.start_client(consumer, settings)
            assigned = await clients.assign_partitions(consumer, settings, "events")
            await consumer.seek_to_end(*assigned)
            for tp in assigned:
                await consumer.position(tp)  # resolved now: what comes later is read
            ready.set_result(None)
            await self._dispatch(consumer)
        except asyncio.CancelledError:
            self._fail_all(KafkaUnavailable(settings.bootstrap_servers, "the gateway stopped"))
            raise
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            log.warning("tailing %s failed: %r; its followers reconnect", settings.topic("events"),
                        exc)
            self._fail_all(exc)
        finally:
            if not ready.done():
                ready.cancel()
            if consumer is not None:
                await consumer.stop()

    async def _dispatch(self, consumer: object) -> None:
        """Hand every record to its key's subscriptions until none is left for ``linger_s``."""
        subscriptions = self._subscriptions
        while True:
            if not subscriptions:
                try:
                    async with asyncio.timeout(self.linger_s):
                        await self._subscribed.wait()
                except TimeoutError:
                    self._stopping = True  # before any await: a subscriber now starts another
                    return
            try:
                batches = await consumer.getmany(timeout_ms=1000)  # type: ignore[attr-defined]
            except KafkaError as exc:
                raise KafkaUnavailable(self.settings.bootstrap_servers, str(exc)) from exc
            for messages in batches.values():
                for message in messages:
                    wanted = subscriptions.get(message.key)
                    if wanted:
                        record = clients.decode_record(message)
                        for subscription in list(wanted):
                            subscription.put(record)

    def _fail_all(self, error: BaseException) -> None:
        for subscriptions in list(self._subscriptions.values()):
            for subscription in list(subscriptions):
                subscription.fail(error)
