"""The executor's scheduling: calls of different runs at once, one run's events in order,
tenants in turn, offsets committed only past what finished.

    lanes = Lanes(executor.handle, max_concurrent=16)
    await lanes.feed(subscription)   # until the subscription ends; raises what handling raised

Each event read goes to its run's lane; a lane holds its run's events not started yet and runs
them one after another (a run's second call starts only once its first was handled). At most
``max_concurrent`` events are handled at a time (``tools.max_concurrent_calls``). The next to
start is taken from the tenants in turn (round-robin), and within a tenant from its runs in the
order they became ready: a tenant with thousands of queued calls takes one slot in its turn,
not all of them. Up to
``max_queued`` events (10,000) are read ahead and wait in lanes; the turns are fair among those
(a tenant's call further behind in the topic waits until the reading reaches it).

Every event is taken with :meth:`Subscription.hold`: it counts as processed — and the group's
offset may pass it — only when its handling returned, whatever finished after it. An event whose
handling raises stops the lanes: :meth:`feed` raises it once the others are cancelled, and that
event and every unfinished one are left to the next consumer of the group. An event whose payload
does not decode (:class:`UndecodableEvent`) is skipped, logged, as the consumer API skips it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from functools import partial

from modelevents.consumers.client import Subscription
from modelevents.schemas.errors import ConfigError, UndecodableEvent
from modelevents.schemas.events import ModelEvent

__all__ = ["Lanes", "DEFAULT_MAX_CONCURRENT", "DEFAULT_MAX_QUEUED"]

log = logging.getLogger(__name__)

DEFAULT_MAX_CONCURRENT = 16
# Events read ahead, waiting in lanes: what the tenants' turns choose from. A few MB of events;
# the consumer API's commit walks them once a second.
DEFAULT_MAX_QUEUED = 10_000

Release = Callable[[], None]
_Lane = tuple[str, str]  # (tenant, run id)


class Lanes:
    """Calls of different runs concurrently, bounded; see the module docstring."""

    def __init__(self, handle: Callable[[ModelEvent], Awaitable[None]], *,
                 max_concurrent: int = DEFAULT_MAX_CONCURRENT,
                 max_queued: int = DEFAULT_MAX_QUEUED) -> None:
        if max_concurrent < 1:
            raise ConfigError(f"max_concurrent_calls is 1 or more, not {max_concurrent}")
        self._handle = handle
        self.max_concurrent = max_concurrent
        self.max_queued = max(max_queued, 1)
        self._lanes: dict[_Lane, deque[tuple[ModelEvent, Release]]] = {}
        # tenant → its lanes whose next event may start (none of theirs running); a tenant
        # moves to the end when one of its events starts.
        self._turns: OrderedDict[str, deque[_Lane]] = OrderedDict()
        self._running: set[asyncio.Task[None]] = set()
        self.queued = 0  # events read and not started
        self.peak = 0  # the most handled at once
        self._room = asyncio.Event()
        self._failed: asyncio.Future[None] | None = None

    @property
    def running(self) -> int:
        return len(self._running)

    async def feed(self, events: Subscription[ModelEvent]) -> None:
        """Hand every event of ``events`` to its lane until the subscription ends, then wait for
        what is in the lanes. Cancelled or failing, it cancels what is being handled."""
        self._failed = asyncio.get_running_loop().create_future()
        reader = asyncio.ensure_future(self._read(events))
        try:
            await asyncio.wait({reader, self._failed}, return_when=asyncio.FIRST_COMPLETED)
            if self._failed.done():
                reader.cancel()
                self._failed.result()  # raises what the handling raised
            reader.result()
            while self._running and not self._failed.done():
                await asyncio.wait({self._failed, *self._running},
                                   return_when=asyncio.FIRST_COMPLETED)
            if self._failed.done():
                self._failed.result()
        finally:
            reader.cancel()
            await self.close()

    async def _read(self, events: Subscription[ModelEvent]) -> None:
        async for event in events:
            await self.put(event, events.hold())

    async def put(self, event: ModelEvent, release: Release) -> None:
        """Queue ``event`` in its run's lane (waiting while ``max_queued`` events wait);
        ``release`` is called when its handling returned."""
        while self.queued >= self.max_queued:
            self._room.clear()
            await self._room.wait()
        key = (event.tenant, event.run_id)
        lane = self._lanes.get(key)
        if lane is None:  # else the lane is running an event or waiting for its turn
            lane = self._lanes[key] = deque()
            self._turns.setdefault(event.tenant, deque()).append(key)
        lane.append((event, release))
        self.queued += 1
        self._start()

    def _start(self) -> None:
        turns = self._turns
        while turns and len(self._running) < self.max_concurrent:
            tenant, ready = next(iter(turns.items()))
            key = ready.popleft()
            if ready:
                turns.move_to_end(tenant)
            else:
                del turns[tenant]
            event, release = self._lanes[key].popleft()
            self.queued -= 1
            task = asyncio.ensure_future(self._handle(event))
            self._running.add(task)
            task.add_done_callback(partial(self._finished, key, release))
        self.peak = max(self.peak, len(self._running))
        if self.queued < self.max_queued:
            self._room.set()

    def _finished(self, key: _Lane, release: Release, task: asyncio.Task[None]) -> None:
        self._running.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, UndecodableEvent):
            log.warning("skipping an event whose handler could not read it: %s", exc)
        elif exc is not None:
            if self._failed is not None and not self._failed.done():
                self._failed.set_exception(exc)
            return
        release()
        if self._lanes[key]:
            self._turns.setdefault(key[0], deque()).append(key)
        else:
            del self._lanes[key]
        if self._failed is None or not self._failed.done():
            self._start()

    async def close(self) -> None:
        """Cancel what is being handled (its events stay unprocessed) and wait for it."""
        running = list(self._running)
        for task in running:
            task.cancel()
        if running:
            await asyncio.gather(*running, return_exceptions=True)
