"""Followers of a run's events (``GET /v1/runs/{id}/events``) share one reader of the run.

One reader per followed run, whatever the number of its followers, and one Kafka consumer for
all of them (the gateway's tail of ``events``, events_tail.py): a :class:`_Reader` reads the
run's events of its owner (``reads.live_run_events``), encodes each
as SSE once, keeps the last :attr:`RunFollowers.buffer_events` of them for followers that join
late, and hands each to every follower's bounded queue (:attr:`RunFollowers.max_pending` events
it has not sent yet). When a queue is full the reader waits for it to have room, as long as
followers go on sending: a follower catching up on a backlog drains its queue as fast as its
client reads. When no follower sent anything for :attr:`RunFollowers.patience_s` while one's
queue is full, that one's client stalled: it is too far behind and is dropped from the fan-out.
It sends what it holds (a contiguous run of seqs) and a comment saying why, and its stream ends
cleanly; the client reconnects with ``Last-Event-ID`` (EventSource does) and goes on from there.
(So during a backlog the shared reader goes at the pace of its slowest follower that still
reads; a live run writes far slower than any client reads, and only stalled clients are
dropped.) So memory is one reader and a bounded buffer per followed run plus a bounded queue of
shared items per follower, and it is given back when they leave: the reader stops (its
subscription to the tail closed) with the last follower of its run, or after ``run.finished``;
the tail's consumer stops a few seconds after the last reader.

A follower that asks for events older than the reader's buffer (``Last-Event-ID`` far back,
joining a long run late) catches up on a read of its own up to what the buffer covers, then
joins the shared reader. What 200 followers of one run cost the gateway's memory:
bench/followers.py (docs/performance.md, "The gateway").
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass

import orjson

from modelevents.schemas.events import ModelEvent
from modelevents.services.gateway.events.reads import IDLE_TICK_S, live_run_events, run_history
from modelevents.services.gateway.events.tail import EventsTail
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["RunFollowers", "sse_event", "json_default", "KEEP_ALIVE", "LAGGED"]

log = logging.getLogger("modelevents.gateway.followers")

KEEP_ALIVE = b": waiting\n\n"
LAGGED = (b": this stream fell too far behind the run and ends here; reconnect with "
          b"Last-Event-ID to go on\n\n")


def sse_event(event: ModelEvent) -> bytes:
    """One event as SSE: ``id`` = seq, ``event`` = kind, ``data`` = the normalize projection."""
    data = orjson.dumps(event.projection(), default=json_default)
    return b"id: %d\nevent: %s\ndata: %s\n\n" % (event.seq, event.kind.encode(), data)


def json_default(value: object) -> object:
    """orjson's fallback for the values of events and states: bytes as base64."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(type(value).__name__)


@dataclass(frozen=True, slots=True)
class _Item:
    seq: int
    data: bytes  # the event as SSE, encoded once for every follower


class _Follower:
    """One follower's bounded queue of items not sent yet."""

    def __init__(self, next_seq: int, limit: int, room: asyncio.Event) -> None:
        self.next_seq = next_seq  # the seq it is to get next
        self.limit = limit
        self.pending: deque[_Item] = deque()
        self.lagged = self.ended = self.tick = False
        self.wake = asyncio.Event()
        self._room = room  # the reader's: set whenever a follower sent an item

    @property
    def full(self) -> bool:
        return len(self.pending) >= self.limit

    def offer(self, item: _Item) -> bool:
        """Queue ``item`` (if the follower wants it); False when the queue is full — the
        follower is then too far behind and ends after what it holds."""
        if item.seq < self.next_seq:
            return True
        if len(self.pending) >= self.limit:
            self.lagged = True
            self.wake.set()
            return False
        self.pending.append(item)
        self.next_seq = item.seq + 1
        self.wake.set()
        return True

    def ping(self) -> None:
        """A keep-alive, only for a follower with nothing else to send."""
        if not self.pending:
            self.tick = True
            self.wake.set()

    def end(self) -> None:
        self.ended = True
        self.wake.set()

    async def items(self) -> AsyncIterator[bytes]:
        while True:
            while self.pending:
                item = self.pending.popleft()
                self._room.set()
                yield item.data
            if self.lagged:
                yield LAGGED
                return
            if self.ended:
                return
            if self.tick:
                self.tick = False
                yield KEEP_ALIVE
                continue
            self.wake.clear()
            await self.wake.wait()


class _Reader:
    """The one reader of a followed run (see the module docstring)."""

    def __init__(self, hub: RunFollowers, run_id: str, tenant: str) -> None:
        self.hub = hub
        self.run_id = run_id
        self.tenant = tenant
        self.buffer: deque[_Item] = deque(maxlen=hub.buffer_events)
        self.next_seq = 0  # the seq of the next event it reads
        self.followers: set[_Follower] = set()
        self.room = asyncio.Event()
        self.task = asyncio.create_task(self._read(), name=f"follow-{run_id}")

    @property
    def first_seq(self) -> int:
        """The oldest seq a follower joining now can get from this reader."""
        return self.buffer[0].seq if self.buffer else self.next_seq

    def join(self, after_seq: int) -> _Follower | None:
        """A follower getting events after ``after_seq``; None when they are older than the
        buffer (the caller catches up first)."""
        if after_seq + 1 < self.first_seq:
            return None
        follower = _Follower(after_seq + 1, self.hub.max_pending, self.room)
        for item in self.buffer:
            follower.offer(item)
        self.followers.add(follower)
        return follower

    def leave(self, follower: _Follower) -> None:
        self.followers.discard(follower)
        if not self.followers:
            self.hub.drop(self, cancel=True)

    async def _read(self) -> None:
        try:
            async for event in live_run_events(self.hub.tail, self.hub.settings, self.run_id,
                                               self.tenant, idle_tick=self.hub.idle_tick):
                if event is None:
                    for follower in self.followers:
                        follower.ping()
                else:
                    await self._make_room()
                    self._fan_out(_Item(event.seq, sse_event(event)))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("following run %s failed: %r; its followers reconnect", self.run_id, exc)
        finally:
            self.hub.drop(self, cancel=False)
            for follower in self.followers:
                follower.end()

    async def _make_room(self) -> None:
        """Wait while a follower's queue is full, as long as followers go on sending: one
        catching up on a backlog (as fast as its client reads) is not taken for one that
        stalled. When no follower sent anything for ``patience_s``, the full ones stalled: the
        next offer drops them."""
        while any(f.full for f in self.followers):
            self.room.clear()
            try:
                async with asyncio.timeout(self.hub.patience_s):
                    await self.room.wait()
            except TimeoutError:
                return

    def _fan_out(self, item: _Item) -> None:
        self.buffer.append(item)
        self.next_seq = item.seq + 1
        for follower in [f for f in self.followers if not f.offer(item)]:
            self.followers.discard(follower)  # too far behind: it ends after what it holds


class RunFollowers:
    """The shared readers of this gateway's followed runs: :meth:`follow`."""

    def __init__(self, settings: PipelineSettings, *, buffer_events: int = 256,
                 max_pending: int = 1024, patience_s: float = 2.0,
                 idle_tick: float = IDLE_TICK_S) -> None:
        self.settings = settings
        self.buffer_events = buffer_events
        self.max_pending = max(max_pending, buffer_events)  # a joiner gets the whole buffer
        self.patience_s = patience_s
        self.idle_tick = idle_tick
        self.tail = EventsTail(settings)
        self._readers: dict[tuple[str, str], _Reader] = {}

    @property
    def readers(self) -> int:
        """Runs followed right now (all read from the one tail of ``events``)."""
        return len(self._readers)

    def followers_of(self, run_id: str, tenant: str) -> int:
        reader = self._readers.get((run_id, tenant))
        return len(reader.followers) if reader is not None else 0

    async def follow(self, run_id: str, tenant: str, after_seq: int = -1,
                     ) -> AsyncGenerator[bytes, None]:
        """SSE bytes of the run's events of ``tenant`` after ``after_seq`` (and keep-alive
        comments) until ``run.finished``, or the follower fell too far behind (``LAGGED``)."""
        while True:
            reader = self._reader(run_id, tenant)
            follower = reader.join(after_seq)
            if follower is not None:
                try:
                    async for data in follower.items():
                        yield data
                finally:
                    reader.leave(follower)
                return
            async for event in run_history(self.settings, run_id, tenant, after_seq=after_seq):
                yield sse_event(event)
                after_seq = event.seq
                if event.kind == "run.finished":
                    return
                if after_seq + 1 >= reader.first_seq:
                    break  # the shared reader holds the rest

    def _reader(self, run_id: str, tenant: str) -> _Reader:
        reader = self._readers.get((run_id, tenant))
        if reader is None:
            reader = self._readers[(run_id, tenant)] = _Reader(self, run_id, tenant)
        return reader

    def drop(self, reader: _Reader, *, cancel: bool) -> None:
        """Forget ``reader`` (the next follower of its run starts another) and stop it."""
        key = (reader.run_id, reader.tenant)
        if self._readers.get(key) is reader:
            del self._readers[key]
        if cancel:
            reader.task.cancel()

    async def close(self) -> None:
        readers = list(self._readers.values())
        for reader in readers:
            self.drop(reader, cancel=True)
        await asyncio.gather(*(r.task for r in readers), return_exceptions=True)
        await self.tail.close()
