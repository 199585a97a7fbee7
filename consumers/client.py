"""The consumer API: read ``events`` and ``runs`` as typed records, deduplicated, in seq order per
run, committed only after the caller processed them.

    from modelevents.consumers import subscribe

    with subscribe("events", group="billing", kinds={"usage"}) as events:
        for event in events:
            print(event.run_id, event.seq, event.payload)

Entry points (all re-exported from :mod:`modelevents.consumers`):

* :func:`subscribe` — a :class:`Subscription` of ``events`` (ModelEvents), ``runs`` (RunStates) or
  both; an async iterator (``async for``) and a sync one (``for``), plus ``await sub.consume(handler)``
  (one item at a time; a plain function is run over each fetch in one loop, the fastest way to
  read) and ``await sub.consume(handler, batch=True)`` (a list of items at a time).
* :func:`follow_run` — one run's events (and its states) until its terminal RunState.
* :func:`rebuild_elided` / :class:`ElidedRebuilder` — the value of a done event whose field was
  elided (docs/vocabulary.md "How big payloads travel"), from the run's deltas.
* :func:`at_offset` / :func:`at_time` — explicit start positions (``start=``).

More on this module: docs/consumer-api.md, ``consumers/client.py``.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import itertools
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Iterator
from dataclasses import dataclass, replace
from itertools import islice
from typing import Any, Generic, Literal, TypedDict, TypeGuard, TypeVar, Unpack, cast, overload

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import CommitFailedError, KafkaError

from modelevents.consumers.errors import MissingTopic
from modelevents.schemas import codec
from modelevents.schemas.errors import ConfigError, CorruptRecord, SchemaError, UndecodableEvent
from modelevents.schemas.events import KINDS, ModelEvent
from modelevents.schemas.lazy_event import NEITHER, header_reader, lazy_event
from modelevents.schemas.pieces import join_pieces
from modelevents.schemas.run_state import RunState
from modelevents.services.errors import KafkaUnavailable
from modelevents.services.kafka.clients import (
    make_consumer,
    partition_for_key,
    run_key_bytes,
    start_client,
    topic_name,
)
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.logs import event_fields

__all__ = [
    "subscribe", "follow_run", "Subscription", "Stats", "StartAt", "at_offset", "at_time",
    "rebuild_elided", "ElidedRebuilder", "MissingTopic", "KafkaUnavailable",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
Item = ModelEvent | RunState
Handler = Callable[[Any], Awaitable[object] | object]

DEFAULT_COMMIT_INTERVAL = 1.0
DEFAULT_MAX_RUNS = 100_000
DEFAULT_LOOKBACK = 1000
_POLL_MS = 200
_MAX_RECORDS = 5000
# Before its first assignment a subscription waits at least this long, whatever idle_timeout
# says: joining a group on a loaded broker can take seconds, and that is not idleness.
_JOIN_S = 30.0


# --- start positions ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StartAt:
    """An explicit start: an offset (the same on every partition, or per partition) or a time."""

    offset: int | dict[int, int] | None = None
    time_ms: int | None = None


def at_offset(offset: int | dict[int, int]) -> StartAt:
    """Start at ``offset`` on every partition (clamped to what the partition holds), or at
    ``{partition: offset}`` (partitions not named start at the beginning)."""
    values = offset.values() if isinstance(offset, dict) else [offset]
    if any(v < 0 for v in values):
        raise ConfigError(f"an offset is 0 or more, not {offset}")
    return StartAt(offset=offset)


def at_time(when: int | float | _dt.datetime) -> StartAt:
    """Start at the first record whose log timestamp is at or after ``when`` (epoch milliseconds,
    or a datetime; a naive datetime is taken as UTC)."""
    if isinstance(when, _dt.datetime):
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.UTC)
        return StartAt(time_ms=int(when.timestamp() * 1000))
    return StartAt(time_ms=int(when))


Start = Literal["earliest", "latest"] | StartAt


# --- elided values -----------------------------------------------------------------------------


def _block(event: ModelEvent) -> tuple[Any, ...]:
    """What ties a delta to its done event: the tool call id, else output and part index."""
    payload: Any = event.payload
    if event.kind.startswith("tool.call"):
        return (event.run_id, "tool.call.delta", payload.tool_call_id)
    return (event.run_id, event.kind.rsplit(".", 1)[0], getattr(payload, "output_index", None),
            getattr(payload, "part_index", None))


_DELTA_FIELD = {"text.delta": "text", "reasoning.delta": "text", "tool.call.delta": "arguments"}
_DONE_KINDS = frozenset({"text.done", "reasoning.done", "tool.call"})


def _size(value: str | bytes) -> int:
    return len(value) if isinstance(value, (bytes, bytearray)) else len(value.encode())


def rebuild_elided(done: ModelEvent, events: Iterable[ModelEvent]) -> str | bytes:
    """The value of ``done``'s elided field, from the run's ``events`` (its deltas, assembled or
    not, in seq order); the field itself when nothing was elided. Raises ValueError when the
    deltas given do not add up to ``elided.size`` (some are missing)."""
    if done.elided is None:
        return getattr(done.payload, _DELTA_FIELD.get(done.kind, "text"))
    name, from_kind = done.elided.field, done.elided.from_kind
    block = _block(done)
    parts = [getattr(e.payload, name) for e in events
             if e.kind == from_kind and e.run_id == done.run_id and _block(e) == block]
    value: str | bytes = (b"".join(parts) if parts and isinstance(parts[0], (bytes, bytearray))
                          else "".join(parts))
    if _size(value) != done.elided.size:
        raise ValueError(f"{done.kind} {done.event_id}: the {from_kind} events given hold "
                         f"{_size(value)} bytes of {name}, the value had {done.elided.size}")
    return value


class ElidedRebuilder:
    """Feeds on a stream of (whole) events and returns each one, a done event with an elided
    field with that field rebuilt from the deltas seen before it. Holds each open block's deltas
    until its done event. ``unrebuilt`` counts done events whose deltas were not all seen (they are
    returned as they are)."""

    def __init__(self) -> None:
        self._open: dict[tuple[Any, ...], list[Any]] = {}
        self.rebuilt = 0
        self.unrebuilt = 0

    def feed(self, event: ModelEvent) -> ModelEvent:
        kind = event.kind
        delta_field = _DELTA_FIELD.get(kind)
        if delta_field is not None:
            value = getattr(event.payload, delta_field)
            if value:
                self._open.setdefault(_block(event), []).append(value)
            return event
        if kind not in _DONE_KINDS:
            return event
        parts = self._open.pop(_block(event), None)
        elided = event.elided
        if elided is None:
            return event
        value = "".join(parts) if parts else ""
        if _size(value) != elided.size:
            self.unrebuilt += 1
            log.warning("%s %s: its elided %s could not be rebuilt (%d of %d bytes of deltas "
                        "seen); it is left empty", kind, event.event_id, elided.field,
                        _size(value), elided.size, extra=event_fields(event))
            return event
        self.rebuilt += 1
        payload: Any = event.payload
        return replace(event, payload=replace(payload, **{elided.field: value}))


# --- the subscription --------------------------------------------------------------------------


@dataclass
class Stats:
    """What a subscription read and what it did with it."""

    records: int = 0  # records read from Kafka (pieces count one each)
    yielded: int = 0
    duplicates: int = 0  # events/states dropped as already yielded
    filtered: int = 0  # records outside the tenant/kind/provider/run filters
    undecodable: int = 0  # records skipped because they do not decode
    broken_pieces: int = 0  # pieces that could not be joined (an event's start missing)
    primed: int = 0  # records read back before where a member resumed, to rebuild dedupe state
    commits: int = 0


# An item read and not processed yet: (value, its partition, the offset of its first record —
# a joined event's first piece). Queued in the order read, handed out in that order.
_Pending = tuple[Any, TopicPartition | None, int]
# What a handler returned that is to be awaited, and its item (None: a batch, held in _held).
_Awaiting = tuple[Awaitable[object], _Pending | None]


def _awaitable(result: object) -> TypeGuard[Awaitable[object]]:
    """What a handler returned is to be awaited (a coroutine function's coroutine, a future)."""
    return asyncio.iscoroutine(result) or isinstance(result, asyncio.Future)


class _Listener(ConsumerRebalanceListener):
    def __init__(self, sub: Subscription[Any]) -> None:
        self.sub = sub

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self.sub._revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        await self.sub._assigned(list(assigned))


class Subscription(Generic[T]):
    """Created by :func:`subscribe` / :func:`follow_run`; see the module docstring for the
    contract. Use it as ``async with`` / ``with`` (which closes it and commits what was
    processed), iterate it with ``async for`` / ``for``, or hand it a handler with
    :meth:`consume`."""

    def __init__(self, topics: list[str], *, settings: PipelineSettings | None, group: str | None,
                 start: Start, tenants: Collection[str] | None, kinds: Collection[str] | None,
                 providers: Collection[str] | None, run_ids: Collection[str] | None,
                 raw_pieces: bool, rebuild_elided: bool, on_undecodable: str,
                 commit_interval: float, max_runs: int, dedupe_lookback: int,
                 idle_timeout: float | None, consumer_options: dict[str, Any] | None = None,
                 follow: str | None = None, follow_timeout: float | None = None,
                 follow_states: bool = True) -> None:
        if on_undecodable not in ("skip", "raise"):
            raise ConfigError(f"on_undecodable is 'skip' or 'raise', not {on_undecodable!r}")
        if not (start in ("earliest", "latest") or isinstance(start, StartAt)):
            raise ConfigError(f"start is 'earliest', 'latest', at_offset(n) or at_time(t), "
                              f"not {start!r}")
        if kinds is not None:
            unknown = sorted(set(kinds) - KINDS)
            if unknown:
                raise ConfigError(f"unknown event kinds {unknown}; the kinds are "
                                  f"{', '.join(sorted(KINDS))}")
        self.settings = settings or PipelineSettings()
        self.topics = topics
        self._full = {topic_name(self.settings, t): t for t in topics}
        for full, logical in self._full.items():
            if logical not in ("events", "runs") and not full.endswith(("events", "runs")):
                raise ConfigError(f"subscribe reads the events and runs topics, not {logical!r}")
        self.group = group
        self.start = start
        self._tenants = frozenset(tenants) if tenants is not None else None
        self._kinds = frozenset(kinds) if kinds is not None else None
        self._providers = frozenset(providers) if providers is not None else None
        self._run_ids = frozenset(run_ids) if run_ids is not None else None
        self._raw_pieces = raw_pieces
        self._rebuilder = ElidedRebuilder() if rebuild_elided else None
        self._raise_undecodable = on_undecodable == "raise"
        self.commit_interval = commit_interval
        self.max_runs = max_runs
        self.dedupe_lookback = dedupe_lookback if group is not None else 0
        self.idle_timeout = idle_timeout
        self._options = consumer_options or {}
        self._follow = follow
        self._follow_deadline = (None if follow_timeout is None
                                 else time.monotonic() + follow_timeout)
        self._terminal: RunState | None = None
        self._follow_states = follow_states
        self.stats = Stats()
        self._consumer: AIOKafkaConsumer | None = None
        self._started = False
        self._closed = False
        self._queue: deque[_Pending] = deque()  # run states, a followed run's last state
        # The batches of events read and not all examined yet: each a generator that dedupes,
        # orders and filters its records one at a time as items are asked for, so that what
        # is handed out is built just before, and let go just after (a whole batch of queued
        # events outlived a garbage collection or more, and the collector walked them all).
        # With a third element True, the batch calls consume's handler itself (_events_of).
        self._batches: deque[tuple[TopicPartition, Iterator[Any], bool]] = deque()
        self._handler: Callable[[Any], object] | None = None  # consume's, while it runs
        self._last: _Pending | None = None  # the item handed out, not processed yet
        self._held: list[_Pending] = []  # the batch handed out (consume(batch=True)), the same
        self._holds: dict[int, _Pending] = {}  # items taken with hold(), not released yet
        self._hold_ids = itertools.count()
        self._seq: dict[str, int] = {}  # run id → highest seq passed on
        # run id → the seq of an event skipped as undecodable (consume): not in _seq, so that a
        # good copy read next is handed on, but reached as far as following the run goes.
        self._skipped: dict[str, int] = {}
        self._states: dict[str, RunState] = {}  # run id → last RunState yielded
        self._open_pieces: dict[str, list[tuple[ModelEvent, int]]] = {}
        self._open_tp: dict[str, TopicPartition] = {}  # the partition of a run's open pieces
        self._fetched: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._prime_until: dict[TopicPartition, int] = {}
        self._unprimed: set[TopicPartition] = set()  # assigned, to prime before the first batch
        self._seen: set[TopicPartition] = set()  # partitions ever assigned (start applied once)
        self._assignment: set[TopicPartition] = set()
        self._last_commit = time.monotonic()
        self._last_record = time.monotonic()
        self._loop: asyncio.AbstractEventLoop | None = None

    # --- lifecycle -----------------------------------------------------------------------------

    async def _start(self) -> None:
        self._started = True
        options: dict[str, Any] = {"max_partition_fetch_bytes": 4 << 20,
                                   "fetch_max_bytes": 16 << 20}
        options.update(self._options)
        consumer = make_consumer(self.settings, group_id=self.group,
                                 from_beginning=self.start != "latest", **options)
        await start_client(consumer, self.settings)
        self._consumer = consumer
        try:
            cluster = await consumer._client.fetch_all_metadata()
            partitions: dict[str, set[int]] = {}
            for full in self._full:
                found = cluster.partitions_for_topic(full)
                if not found:
                    raise MissingTopic(
                        f"topic {full} does not exist on {self.settings.bootstrap_servers}; "
                        f"check the topic prefix ({self.settings.topic_prefix!r}, "
                        f"$MODELEVENTS_TOPIC_PREFIX) or create the topics with "
                        f"`modelevents topics create --prefix {self.settings.topic_prefix}`")
                partitions[full] = set(found)
            if self.group is not None:
                consumer.subscribe(list(self._full), listener=_Listener(self))
            else:
                tps = []
                for full, found in partitions.items():
                    if self._follow is not None:
                        found = {partition_for_key(run_key_bytes(self._follow), len(found))}
                    tps += [TopicPartition(full, p) for p in sorted(found)]
                consumer.assign(tps)
                await self._assigned(tps)
        except BaseException:
            await consumer.stop()
            self._consumer = None
            raise

    async def _assigned(self, tps: list[TopicPartition]) -> None:
        consumer = self._consumer
        assert consumer is not None
        self._assignment.update(tps)
        self._last_record = time.monotonic()  # idle counts from here, not from a slow join
        fresh = [tp for tp in tps if tp not in self._seen]
        self._seen.update(tps)
        for tp in tps:
            self._fetched.pop(tp, None)
            self._committed.pop(tp, None)
        explicit = isinstance(self.start, StartAt) or self.group is None
        if fresh and explicit:
            await self._seek_start(fresh)
        if self.dedupe_lookback:
            # Primed when their first records arrive (_resumed): the offset of the first is
            # where the group resumed. (Fetched here, the committed offset could come back
            # empty while the group's coordinator was still loading — aiokafka reads no error
            # in that answer — and the copies straddling it were delivered again.)
            self._unprimed.update(tp for tp in tps if not (explicit and tp in fresh))

    async def _seek_start(self, tps: list[TopicPartition]) -> None:
        consumer = self._consumer
        assert consumer is not None
        start = self.start
        if start == "earliest":
            await consumer.seek_to_beginning(*tps)
        elif start == "latest":
            await consumer.seek_to_end(*tps)
        elif isinstance(start, StartAt) and start.time_ms is not None:
            found = await consumer.offsets_for_times({tp: start.time_ms for tp in tps})
            ends = await consumer.end_offsets(tps)
            for tp in tps:
                hit = found.get(tp)
                consumer.seek(tp, ends[tp] if hit is None else hit.offset)
        elif isinstance(start, StartAt):
            first = await consumer.beginning_offsets(tps)
            ends = await consumer.end_offsets(tps)
            for tp in tps:
                wanted = (start.offset.get(tp.partition, 0) if isinstance(start.offset, dict)
                          else start.offset or 0)
                consumer.seek(tp, min(max(wanted, first[tp]), ends[tp]))

    async def _revoked(self, tps: set[TopicPartition]) -> None:
        await self._commit(only=tps)
        self._assignment -= tps
        if self._queue and any(p[1] in tps for p in self._queue):
            self._queue = deque(p for p in self._queue if p[1] not in tps)
        if self._batches:
            self._batches = deque(b for b in self._batches if b[0] not in tps)
        if self._last is not None and self._last[1] in tps:
            self._last = None  # its partition is gone: the next owner gets it again
        if self._held:
            self._held = [p for p in self._held if p[1] not in tps]
        for key, held in list(self._holds.items()):
            if held[1] in tps:
                del self._holds[key]  # the next owner gets it again; releasing it does nothing
        for run_id, tp in list(self._open_tp.items()):
            if tp in tps:
                del self._open_tp[run_id]
                self._open_pieces.pop(run_id, None)
        for tp in tps:
            self._fetched.pop(tp, None)
            self._prime_until.pop(tp, None)
            self._unprimed.discard(tp)

    async def close(self, *, last_processed: bool = True) -> None:
        """Commit what was processed (the last item yielded too unless ``last_processed`` is
        False) and leave the group. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if last_processed:
            self._last = None
            self._held = []
        consumer = self._consumer
        if consumer is None:
            return
        try:
            await self._commit()
        finally:
            self._consumer = None
            await consumer.stop()

    async def __aenter__(self) -> Subscription[T]:
        if not self._started:
            await self._start()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        await self.close(last_processed=exc_type is None)

    def _sync_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                pass
            else:
                raise ConfigError("the sync iterator cannot run inside an event loop; use "
                                  "`async for` / `async with` there")
            self._loop = asyncio.new_event_loop()
        return self._loop

    def __enter__(self) -> Subscription[T]:
        loop = self._sync_loop()
        if not self._started:
            loop.run_until_complete(self._start())
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close_sync(last_processed=exc_type is None)

    def close_sync(self, *, last_processed: bool = True) -> None:
        """:meth:`close` for the sync API."""
        if self._loop is None:
            return
        try:
            self._loop.run_until_complete(self.close(last_processed=last_processed))
        finally:
            self._loop.close()
            self._loop = None

    # --- iteration -----------------------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[T]:
        return self

    async def __anext__(self) -> T:
        self._last = None  # the item handed out before is processed
        item = self._ready()  # an item already read: no await of _next (a coroutine per item)
        if item is None:
            item = await self._next()
        if item is None:
            await self.close()
            raise StopAsyncIteration
        self._last = item
        value: T = item[0]
        return value

    def __iter__(self) -> Iterator[T]:
        return self

    def __next__(self) -> T:
        if self._loop is not None:  # an item already read: no turn of the loop
            self._last = None
            item = self._ready()
            if item is not None:
                self._last = item
                value: T = item[0]
                return value
        loop = self._sync_loop()
        try:
            return loop.run_until_complete(self.__anext__())
        except StopAsyncIteration:
            self.close_sync()
            raise StopIteration from None

    async def consume(self, handler: Callable[[Any], Awaitable[object] | object], *,
                      batch: bool = False) -> None:
        """Call ``handler`` (a function or a coroutine function) on every item until the
        subscription ends (``idle_timeout``, a followed run's end) or the handler raises. An item
        is committed only after its handler returned; the exception of a handler propagates after
        what was processed before it has been committed, and its item is left to the next
        consumer of the group.

        With ``batch=True`` the handler gets a list of items at a time instead — the events of
        one partition's fetch (up to a few thousand, in seq order per run as ever), or the run
        states read — and the whole list counts as processed when it returns: one that raises
        leaves every item of its list to the next consumer of the group. An UndecodableEvent
        let out of a batch handler is raised (the rest of the list cannot be told processed).

        Between fetches nothing is awaited per item: a plain function runs over what was read in
        one loop (a coroutine's result is awaited where it is returned)."""
        self._last = None
        hand = self._hand_batch if batch else self._hand_items
        if not batch:
            self._handler = handler  # the batches read from now on call it themselves
        try:
            while await self._fill():
                pending = hand(handler)
                while pending is not None:  # a handler gave an awaitable: its item waits on it
                    await self._settle(pending)
                    pending = hand(handler)
        finally:
            self._handler = None
            self._batches = deque(b for b in self._batches if not b[2])  # theirs: not for after
            await self.close(last_processed=False)

    def _hand_items(self, handler: Callable[[Any], object]) -> _Awaiting | None:
        """Hand ``handler`` every item read and not handed out yet; stop at the first awaitable
        it returns (its item is then the one not processed yet). A batch of events read while
        :meth:`consume` runs calls the handler itself, as it examines each record (a plain
        loop: no generator step, no item built per event); run states, and events read
        before, are handed here."""
        queue, batches = self._queue, self._batches
        while True:
            if queue:
                examined: Iterator[Any] = iter((queue.popleft(),))
                calls = False
            elif batches:
                _, examined, calls = batches[0]
            else:
                return None
            if calls:
                for pending in examined:  # the handler returned an awaitable: it waits on it
                    self._last = pending[1]
                    return cast(_Awaiting, pending)
            else:
                for item in examined:
                    self.stats.yielded += 1
                    try:
                        result = handler(item[0])
                    except BaseException as exc:
                        self._unhandled(item, exc)
                        continue
                    if result is not None and _awaitable(result):
                        self._last = item
                        return result, item
            if batches and batches[0][1] is examined:
                batches.popleft()  # all examined

    def _unhandled(self, item: _Pending, exc: BaseException) -> None:
        """A handler raised ``exc`` on ``item``: an UndecodableEvent of its event is skipped
        (:meth:`_skip_undecodable`); anything else is raised, the item not processed (the next
        consumer of the group gets it again)."""
        if isinstance(exc, UndecodableEvent):
            self._skip_undecodable(item, exc)
            return
        self._last = item
        raise exc

    def _hand_batch(self, handler: Callable[[Any], object]) -> _Awaiting | None:
        """Call ``handler`` on the next list of items read: the run states queued, else the
        events of the next fetched partition batch (skipping one that gave none)."""
        while True:
            if self._queue:
                self._held = list(self._queue)
                self._queue.clear()
                items = [p[0] for p in self._held]
            elif self._batches:
                tp, examined, _ = self._batches.popleft()
                items = self._examined(tp, examined)
                if not items:
                    continue
            else:
                return None
            self.stats.yielded += len(items)
            result = handler(items)  # raising, its items stay held: not committed
            if result is not None and _awaitable(result):
                return result, None
            self._held = []

    def _examined(self, tp: TopicPartition, examined: Iterator[_Pending]) -> list[Any]:
        """The events of a fetched partition batch as one list, held (``_held``: one entry, at
        the lowest offset they came from) until their handler returns. The events alone are
        kept, not an item per event: a list of a few thousand outlives garbage collections, and
        each one walks what it holds."""
        events: list[Any] = []
        append = events.append
        lowest: int | None = None
        try:
            for event, _, first in examined:
                append(event)
                if lowest is None or first < lowest:
                    lowest = first
        finally:  # examining raised (on_undecodable="raise"): what it gave stays uncommitted
            self._held = [] if lowest is None else [(events, tp, lowest)]
        return events

    async def _settle(self, pending: _Awaiting) -> None:
        """Await what a handler returned for ``pending``'s item (or batch), then count it
        processed."""
        result, item = pending
        try:
            await result
        except UndecodableEvent as exc:
            if item is None:
                raise
            self._skip_undecodable(item, exc)
        self._last = None
        self._held = []

    def _skip_undecodable(self, item: _Pending, exc: UndecodableEvent) -> None:
        """A handler could not read ``item``'s event: skipped as the records that do not decode
        at all are (counted, logged, committed past), not handed on again — or, with
        ``on_undecodable="raise"`` or when it is another event's, raised (not committed)."""
        event: ModelEvent = item[0]
        if exc.event is not event or self._raise_undecodable:
            self._last = item
            raise exc
        # Its seq is not taken as seen: a good copy of it read next (the pipeline's redelivery)
        # is handed on, not dropped as a duplicate of what was skipped. (Once a later seq of the
        # run was handed on, a copy read after it is out of order, dropped as before.)
        if self._seq.get(event.run_id) == event.seq:
            self._seq[event.run_id] = event.seq - 1
            self._skipped[event.run_id] = event.seq  # a followed run still ends (_follow_finished)
            if len(self._skipped) > self.max_runs:
                self._evict(self._skipped)
        self.stats.undecodable += 1
        log.warning("skipping an event whose handler could not read it: %s", exc)

    def consume_sync(self, handler: Callable[[Any], object], *, batch: bool = False) -> None:
        """:meth:`consume` for a plain function, outside an event loop."""
        loop = self._sync_loop()
        try:
            loop.run_until_complete(self.consume(handler, batch=batch))
        finally:
            self.close_sync()

    def hold(self) -> Callable[[], None]:
        """Keep the item the iterator yielded last unprocessed after the next one is asked for,
        until the function returned is called (once its handling finished; calling it again
        does nothing). Nothing is committed past a held item, however far the items after it
        got: a caller that handles items concurrently commits only what finished. Items held
        when the subscription closes, or whose partition is revoked, are not committed: the
        next consumer of the group gets them again.

            async for event in events:
                release = events.hold()
                spawn(handle(event), then=release)
        """
        item = self._last
        if item is None:
            raise ConfigError("hold() takes the item the iterator yielded last, and there is "
                              "none waiting (already processed or held); call it right after "
                              "`async for` / `for` yields")
        self._last = None
        key = next(self._hold_ids)
        self._holds[key] = item

        def release() -> None:
            self._holds.pop(key, None)
        return release

    async def commit(self) -> None:
        """Commit now what was processed so far (the iterator does it every ``commit_interval``
        seconds, on revocation and on close)."""
        self._last = None
        await self._commit()

    def commit_sync(self) -> None:
        """:meth:`commit` for the sync API."""
        self._sync_loop().run_until_complete(self.commit())

    # --- the machinery -------------------------------------------------------------------------

    def _unprocessed(self) -> dict[TopicPartition | None, int]:
        """Partition → the lowest offset read and not processed yet: of the items queued, the
        item handed out and not processed, the pieces of an event still being assembled."""
        lowest: dict[TopicPartition | None, int] = {}
        get = lowest.get
        pending = [self._last] if self._last is not None else []
        for _, tp, offset in (*pending, *self._held, *self._holds.values(), *self._queue):
            if offset < get(tp, offset + 1):
                lowest[tp] = offset
        for run_id, held in self._open_pieces.items():
            tp = self._open_tp.get(run_id)
            if held and held[0][1] < get(tp, held[0][1] + 1):
                lowest[tp] = held[0][1]
        return lowest

    async def _commit(self, only: set[TopicPartition] | None = None) -> None:
        consumer = self._consumer
        self._last_commit = time.monotonic()
        if consumer is None or self.group is None:
            return
        offsets: dict[TopicPartition, int] = {}
        unprocessed = self._unprocessed()
        for tp, fetched in self._fetched.items():
            if only is not None and tp not in only:
                continue
            position = min(fetched, unprocessed.get(tp, fetched))
            if self._committed.get(tp) != position:
                offsets[tp] = position
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except (CommitFailedError, KafkaError) as exc:
            # A rebalance took the partitions: what was not committed is redelivered (at least
            # once), never lost.
            log.warning("commit of %s failed (%s); those records will be delivered again",
                        offsets, exc)
            return
        self._committed.update(offsets)
        self.stats.commits += 1

    def _ready(self) -> _Pending | None:
        """The next item of what was read (counted as yielded), None when all was examined."""
        if self._queue:
            self.stats.yielded += 1
            return self._queue.popleft()
        batches = self._batches
        while batches:
            item = next(batches[0][1], None)
            if item is not None:
                self.stats.yielded += 1
                return item
            batches.popleft()
        return None

    async def _next(self) -> _Pending | None:
        """The next item; None at the end."""
        while True:
            item = self._ready()
            if item is not None:
                return item
            if not await self._fill():
                return None

    async def _fill(self) -> bool:
        """Read until something is to be examined (True), or the subscription ends (False)."""
        while True:
            if self._queue or self._batches:
                return True
            if self._follow is not None and self._follow_finished():
                return False
            if self._closed:
                return False
            if not self._started:
                await self._start()
            consumer = self._consumer
            assert consumer is not None
            now = time.monotonic()
            if now - self._last_commit >= self.commit_interval:
                await self._commit()
            if self.idle_timeout is not None and now - self._last_record >= (
                    self.idle_timeout if self._assignment else max(self.idle_timeout, _JOIN_S)):
                return False
            if self._follow_deadline is not None and now >= self._follow_deadline:
                raise TimeoutError(f"run {self._follow} did not reach a terminal state in time "
                                   f"(last seq seen {self._seq.get(self._follow or '', -1)})")
            try:
                batches = await consumer.getmany(timeout_ms=_POLL_MS, max_records=_MAX_RECORDS)
            except KafkaError as exc:
                raise KafkaUnavailable(self.settings.bootstrap_servers, str(exc)) from exc
            if batches:
                self._last_record = time.monotonic()
            for tp, messages in batches.items():
                if tp not in self._assignment:
                    continue
                if tp in self._unprimed and await self._resumed(tp, messages[0].offset):
                    continue  # read again after the records before it
                self._take(tp, messages)

    async def _resumed(self, tp: TopicPartition, first: int) -> bool:
        """A group member's first records of ``tp`` begin at ``first``: when records come
        before it, seek back ``dedupe_lookback`` of them to rebuild the high-water marks first
        (True: this batch is read again after them)."""
        self._unprimed.discard(tp)
        consumer = self._consumer
        assert consumer is not None
        begin = (await consumer.beginning_offsets([tp]))[tp]
        if first <= begin:
            return False
        self._prime_until[tp] = first
        consumer.seek(tp, max(begin, first - self.dedupe_lookback))
        return True

    def _follow_finished(self) -> bool:
        terminal = self._terminal
        if terminal is None:
            return False
        reached = max(self._seq.get(terminal.run_id, -1), self._skipped.get(terminal.run_id, -1))
        if reached < terminal.last_seq:  # an event skipped as undecodable was reached too
            return False
        if self._states.get(terminal.run_id) is not terminal:
            self._states[terminal.run_id] = terminal
            if self._follow_states:
                self._queue.append((terminal, None, -1))
                return False
        return True

    def _take(self, tp: TopicPartition, messages: list[Any]) -> None:
        self.stats.records += len(messages)
        prime_until = self._prime_until.get(tp)
        if prime_until is not None:
            cut = 0
            while cut < len(messages) and messages[cut].offset < prime_until:
                cut += 1
            self._prime(messages[:cut])
            messages = messages[cut:]
            if not messages:
                return
            del self._prime_until[tp]
        if self._full.get(tp.topic) == "runs" or tp.topic.endswith("runs"):
            for msg in messages:
                value = self._decoded(tp, msg)
                if value is not None:
                    self._take_state(tp, msg.offset, value)
            self._fetched[tp] = messages[-1].offset + 1
        else:
            hand = self._handler
            self._batches.append((tp, self._events_of(tp, messages, hand), hand is not None))

    def _events_of(self, tp: TopicPartition, messages: list[Any],
                   hand: Callable[[Any], object] | None = None) -> Iterator[Any]:
        """Dedupe, order and filter ``messages`` of ``events`` by their headers alone
        (``schemas/lazy_event.py``), one at a time, and yield what is kept as LazyModelEvents:
        a dropped record is never decoded. Pieces to join, and every event when elided values
        are rebuilt, are decoded whole here (what is built from their payloads must not fail
        later). ``_fetched`` follows: what comes after the item yielded is not examined yet.

        With ``hand`` (consume's handler) each event is handed to it here instead, and only
        what it returns to be awaited is yielded, with its item (an :data:`_Awaiting`)."""
        stats = self.stats
        handed = 0
        tenants, providers, run_ids, kinds = (self._tenants, self._providers, self._run_ids,
                                              self._kinds)
        seqs = self._seq
        max_runs = self.max_runs
        fetched = self._fetched
        rebuilder = self._rebuilder
        join = not self._raw_pieces
        filters = tenants is not None or providers is not None or run_ids is not None
        # Without the rebuilder (which must see every delta) kinds filter before anything else.
        kinds_first = kinds if rebuilder is None else None
        current, common, whole = header_reader()
        lazy = rebuilder is None  # else every event is decoded whole
        last_run = None  # the run whose high-water mark was moved to the LRU's end last
        try:
            for msg in messages:
                data = msg.value
                offset = msg.offset
                event: ModelEvent | None = None
                if type(data) is bytes and data.startswith(current):
                    try:
                        # Ends with NEITHER, 00 00? (Indexing is cheaper than endswith; the
                        # record is 10 bytes or more.)
                        header = (whole if data[-1] or data[-2] else common)(data, 10)
                    except CorruptRecord as exc:
                        self._undecodable(tp, offset, SchemaError(
                            f"corrupt modelevents.ModelEvent record ({len(data)} bytes): {exc}"))
                        continue
                    run_id, tenant, provider, _, _, kind, seq, piece, _, _ = header
                else:  # another record or an earlier schema version: decoded whole
                    value = self._decoded(tp, msg)
                    if value is None:
                        continue
                    if type(value) is not ModelEvent:
                        self._not_expected(tp, offset, value)
                        continue
                    event = value
                    run_id, tenant, provider, kind, seq, piece = (
                        value.run_id, value.tenant, value.provider, value.kind, value.seq,
                        value.piece)
                if filters and ((tenants is not None and tenant not in tenants)
                                or (providers is not None and provider not in providers)
                                or (run_ids is not None and run_id not in run_ids)):
                    stats.filtered += 1
                    continue
                if run_id == last_run and seq > seqs.get(run_id, -1):
                    seqs[run_id] = seq  # the run touched last: already the most recent (LRU)
                else:
                    previous = seqs.pop(run_id, -1)
                    if seq <= previous:
                        seqs[run_id] = previous
                        stats.duplicates += 1
                        continue
                    seqs[run_id] = seq
                    last_run = run_id
                    if len(seqs) > max_runs:
                        self._evict(seqs)
                if kinds_first is not None and kind not in kinds_first:
                    stats.filtered += 1
                    continue
                first = offset
                if event is None and lazy and (piece is None or not join):
                    event = lazy_event(msg, header)  # the common case
                else:
                    if event is None:
                        event = self._decoded(tp, msg)
                        if event is None:
                            continue
                    if piece is not None and join:
                        event, first = self._join(event, offset, tp)
                        if event is None:
                            continue  # held until its event is whole and processed
                    if rebuilder is not None:
                        event = rebuilder.feed(event)
                    if kinds is not None and kind not in kinds:
                        stats.filtered += 1
                        continue
                fetched[tp] = offset + 1
                if hand is None:
                    yield event, tp, first
                    continue
                handed += 1
                try:
                    result = hand(event)
                except BaseException as exc:
                    self._unhandled((event, tp, first), exc)
                    continue
                if result is not None and _awaitable(result):
                    yield result, (event, tp, first)
            fetched[tp] = messages[-1].offset + 1
        finally:
            stats.yielded += handed

    def _decoded(self, tp: TopicPartition, msg: Any) -> Any:
        """``msg``'s value decoded whole; None when it does not decode (counted, or raised)."""
        try:
            if msg.value is None:
                raise SchemaError("tombstone (null value)")
            return codec.decode(msg.value)
        except SchemaError as exc:
            self._undecodable(tp, msg.offset, exc)
            return None

    def _undecodable(self, tp: TopicPartition, offset: int, exc: SchemaError) -> None:
        if self._raise_undecodable:
            raise exc
        self.stats.undecodable += 1
        log.warning("skipping record %s[%d]@%d that does not decode: %s",
                    tp.topic, tp.partition, offset, exc)

    def _prime(self, messages: list[Any]) -> None:
        """Rebuild the high-water marks from records before the committed offset (not yielded;
        one that does not decode is passed over silently: it was reported when it was read)."""
        current, common, whole = header_reader()
        for msg in messages:
            data = msg.value
            try:
                if type(data) is bytes and data.startswith(current):
                    header = (common if data.endswith(NEITHER) else whole)(data, 10)
                    run_id, seq = header[0], header[6]
                else:
                    value = codec.decode(data) if data is not None else None
                    if value is None:
                        continue
                    self.stats.primed += 1
                    if type(value) is ModelEvent:
                        self._mark_seq(value.run_id, value.seq)
                    continue
            except SchemaError:
                continue
            self.stats.primed += 1
            self._mark_seq(run_id, seq)

    def _take_state(self, tp: TopicPartition, offset: int, value: Any) -> None:
        if type(value) is not RunState:
            self._not_expected(tp, offset, value)
            return
        if ((self._tenants is not None and value.tenant not in self._tenants)
                or (self._providers is not None and value.provider not in self._providers)
                or (self._run_ids is not None and value.run_id not in self._run_ids)):
            self.stats.filtered += 1
            return
        previous = self._states.pop(value.run_id, None)
        if previous is not None and (previous == value or value.last_seq < previous.last_seq):
            self._states[value.run_id] = previous
            self.stats.duplicates += 1
            return
        if self._follow is not None and value.terminal:
            # Passed on once the run's events up to its last seq are (follow_run's end).
            self._terminal = value
            if previous is not None:
                self._states[value.run_id] = previous
            return
        self._states[value.run_id] = value
        if len(self._states) > self.max_runs:
            self._evict(self._states)
        if self._follow is not None and not self._follow_states:
            return
        self._queue.append((value, tp, offset))

    def _not_expected(self, tp: TopicPartition, offset: int, value: Any) -> None:
        if self._raise_undecodable:
            raise SchemaError(f"{tp.topic}[{tp.partition}]@{offset} holds a "
                              f"{type(value).__name__}, not what the topic carries")
        self.stats.undecodable += 1
        log.warning("skipping record %s[%d]@%d: a %s", tp.topic, tp.partition, offset,
                    type(value).__name__)

    def _mark_seq(self, run_id: str, seq: int) -> None:
        if seq > self._seq.get(run_id, -1):
            self._seq.pop(run_id, None)
            self._seq[run_id] = seq
            if len(self._seq) > self.max_runs:
                self._evict(self._seq)

    def _evict(self, table: dict[str, Any]) -> None:
        for key in list(islice(table, max(1, self.max_runs // 10))):
            del table[key]

    def _join(self, piece: ModelEvent, offset: int, tp: TopicPartition
              ) -> tuple[ModelEvent | None, int]:
        """The whole event once its last piece is read, and the offset of its first piece."""
        assert piece.piece is not None
        held = self._open_pieces.get(piece.run_id)
        if piece.piece.index == 0:
            if held:
                self._broken(held, "a new event began")
            held = self._open_pieces[piece.run_id] = []
            self._open_tp[piece.run_id] = tp
        elif not held or len(held) != piece.piece.index:
            self.stats.broken_pieces += 1
            log.warning("dropping piece %d/%d of %s: its earlier pieces were not read (the "
                        "subscription started after them)", piece.piece.index, piece.piece.count,
                        piece.event_id, extra=event_fields(piece))
            if held:
                self._broken(held, "a piece is missing")
                self._release(piece.run_id)
            return None, offset
        held.append((piece, offset))
        if len(held) < piece.piece.count:
            return None, offset
        self._release(piece.run_id)
        return join_pieces([p for p, _ in held]), held[0][1]

    def _release(self, run_id: str) -> None:
        self._open_pieces.pop(run_id, None)
        self._open_tp.pop(run_id, None)

    def _broken(self, held: list[tuple[ModelEvent, int]], why: str) -> None:
        # No longer held, their offsets no longer hold up commits: the event cannot be whole.
        self.stats.broken_pieces += len(held)
        log.warning("dropping %d pieces of %s: %s", len(held), held[0][0].event_id, why,
                    extra=event_fields(held[0][0]))


# --- entry points ------------------------------------------------------------------------------


class Options(TypedDict, total=False):
    """The keyword arguments of :func:`subscribe` (for its typed overloads)."""

    group: str | None
    tenant: str | Collection[str] | None
    kinds: Collection[str] | None
    providers: Collection[str] | None
    run_ids: Collection[str] | None
    start: Start
    settings: PipelineSettings | None
    raw_pieces: bool
    rebuild_elided: bool
    on_undecodable: Literal["skip", "raise"]
    commit_interval: float
    max_runs: int
    dedupe_lookback: int
    idle_timeout: float | None
    consumer_options: dict[str, Any] | None


@overload
def subscribe(topics: Literal["events"] = ..., **options: Unpack[Options]
              ) -> Subscription[ModelEvent]: ...


@overload
def subscribe(topics: Literal["runs"], **options: Unpack[Options]) -> Subscription[RunState]: ...


@overload
def subscribe(topics: Iterable[str], **options: Unpack[Options]
              ) -> Subscription[ModelEvent | RunState]: ...


def subscribe(topics: str | Iterable[str] = "events", *, group: str | None = None,
              tenant: str | Collection[str] | None = None, kinds: Collection[str] | None = None,
              providers: Collection[str] | None = None, run_ids: Collection[str] | None = None,
              start: Start = "earliest", settings: PipelineSettings | None = None,
              raw_pieces: bool = False, rebuild_elided: bool = False,
              on_undecodable: Literal["skip", "raise"] = "skip",
              commit_interval: float = DEFAULT_COMMIT_INTERVAL, max_runs: int = DEFAULT_MAX_RUNS,
              dedupe_lookback: int = DEFAULT_LOOKBACK, idle_timeout: float | None = None,
              consumer_options: dict[str, Any] | None = None) -> Subscription[Any]:
    """Read ``topics`` (``"events"``, ``"runs"`` or both; logical names take the settings' prefix)
    as typed records.

    * ``group``: a consumer group — its members share the partitions and it resumes from its
      committed offsets; None reads every partition from ``start`` and commits nothing.
    * ``start``: ``"earliest"`` (default) / ``"latest"`` where the group has no committed offset
      (always, without a group); ``at_offset(n)`` / ``at_time(t)`` on each partition the first
      time this subscription is assigned it, committed offsets or not.
    * ``tenant``, ``kinds``, ``providers``, ``run_ids``: only those (kinds apply to events).
    * ``settings``: where Kafka is and the topic prefix; default from the environment like the
      CLI (``KAFKA_BOOTSTRAP_SERVERS``, ``MODELEVENTS_TOPIC_PREFIX``).
    * ``idle_timeout``: end the iteration after this many seconds without a record, counted
      from the moment partitions are assigned (a group join is not idle time; a member that is
      never assigned a partition ends after ``max(idle_timeout, 30)`` seconds).

    Nothing connects until the first item is asked for (or ``with`` / ``async with``)."""
    names = [topics] if isinstance(topics, str) else list(topics)
    if not names:
        raise ConfigError("subscribe needs a topic: 'events', 'runs' or both")
    tenants = [tenant] if isinstance(tenant, str) else tenant
    return Subscription(names, settings=settings, group=group, start=start, tenants=tenants,
                        kinds=kinds, providers=providers, run_ids=run_ids, raw_pieces=raw_pieces,
                        rebuild_elided=rebuild_elided, on_undecodable=on_undecodable,
                        commit_interval=commit_interval, max_runs=max_runs,
                        dedupe_lookback=dedupe_lookback, idle_timeout=idle_timeout,
                        consumer_options=consumer_options)


def follow_run(run_id: str, *, settings: PipelineSettings | None = None,
               kinds: Collection[str] | None = None, states: bool = True,
               start: Start = "earliest", raw_pieces: bool = False, rebuild_elided: bool = False,
               on_undecodable: Literal["skip", "raise"] = "skip",
               timeout: float | None = None) -> Subscription[ModelEvent | RunState]:
    """One run's events in seq order (its partition of ``events`` only, no consumer group), and,
    with ``states``, its RunStates as they change; ends after its terminal RunState, which comes
    last, once every event up to that state's ``last_seq`` has been yielded. ``timeout``: raise
    TimeoutError when the run is not over by then."""
    run_key_bytes(run_id)
    return Subscription(["events", "runs"], settings=settings,
                        group=None, start=start, tenants=None, kinds=kinds, providers=None,
                        run_ids=[run_id], raw_pieces=raw_pieces, rebuild_elided=rebuild_elided,
                        on_undecodable=on_undecodable, commit_interval=DEFAULT_COMMIT_INTERVAL,
                        max_runs=DEFAULT_MAX_RUNS, dedupe_lookback=0, idle_timeout=None,
                        follow=run_id, follow_timeout=timeout, follow_states=states)
