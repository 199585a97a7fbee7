"""The gateway's read side: a run's current RunState and its ModelEvents, read from Kafka.

- :class:`RunStates` is a materialized view of the compacted ``runs`` topic: it reads the topic
  from the beginning when the gateway starts and then follows it, keeping the latest RunState of
  each run. ``GET /v1/runs/{id}`` answers from it. Memory: one RunState per run the topic still
  holds (about 1 KB each; compaction keeps one record per run, and the processor's retention
  decides how long a finished run stays), and which run announced each provider object id,
  so that a webhook naming the object goes to its run (:meth:`RunStates.run_of_object`).
- :func:`run_events` streams one run's events from ``events`` (only the partition its key maps
  to), in ``seq`` order, each ``seq`` once — a record written twice by an at-least-once retry is
  dropped here, as every consumer of ``events`` must — after a given ``seq`` (``Last-Event-ID``),
  until the run finished or the caller stops reading; :func:`run_history` the same, up to what
  the topic holds now. Both read the run's partition from its start: cost grows with the
  partition, not the run (fine for the gateway's interactive use; bulk readers use ``replay``).

Both only read: nothing here writes to Kafka (data flows one way, see DESIGN.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from modelevents.schemas.events import ModelEvent
from modelevents.schemas.run_state import RunState
from modelevents.services import kafka_io
from modelevents.services.settings import PipelineSettings

log = logging.getLogger(__name__)

# How long run_events waits for the next event of a run before it reports that it is still
# waiting (the SSE route sends a comment as a keep-alive); reading goes on after that.
IDLE_TICK_S = 15.0


class RunStates:
    """The latest RunState of every run on ``runs``, followed live (see the module docstring)."""

    def __init__(self, settings: PipelineSettings) -> None:
        self.settings = settings
        self.states: dict[str, RunState] = {}
        self.object_runs: dict[str, str] = {}  # provider object id → the run that announced it
        self.caught_up = asyncio.Event()
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._follow(), name="runs-view")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping anyway
                pass

    def get(self, run_id: str) -> RunState | None:
        return self.states.get(run_id)

    def run_of_object(self, object_id: str, tenant: str) -> str | None:
        """The run of ``tenant`` whose state names provider object ``object_id``, if any."""
        run_id = self.object_runs.get(object_id)
        state = self.states.get(run_id) if run_id is not None else None
        return run_id if state is not None and state.tenant == tenant else None

    async def wait_for(self, run_id: str, predicate, timeout: float) -> RunState | None:  # type: ignore[no-untyped-def]
        """The run's state once ``predicate(state)`` holds, or the latest after ``timeout``."""
        async with self._changed:
            try:
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: (s := self.states.get(run_id)) is not None
                                           and predicate(s)), timeout)
            except TimeoutError:
                pass
        return self.states.get(run_id)

    async def _follow(self) -> None:
        while True:
            try:
                await self._read()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the view retries; readiness says why
                log.warning("reading %s failed (%r); retrying in 2 s",
                            self.settings.topic("runs"), exc)
                await asyncio.sleep(2.0)

    async def _read(self) -> None:
        topic = self.settings.topic("runs")
        consumer = kafka_io.make_consumer(self.settings)
        await kafka_io.start_client(consumer, self.settings)
        try:
            partitions = consumer.partitions_for_topic(topic) or set()
            if not partitions:
                await consumer._client.force_metadata_update()
                partitions = consumer.partitions_for_topic(topic) or set()
            assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
            consumer.assign(assigned)
            await consumer.seek_to_beginning(*assigned)
            ends = await consumer.end_offsets(assigned)
            pending = {tp for tp, end in ends.items() if end > 0}
            if not pending:
                self.caught_up.set()
            while True:
                try:
                    batches = await consumer.getmany(timeout_ms=500)
                except KafkaError as exc:
                    raise kafka_io.KafkaUnavailable(self.settings.bootstrap_servers, str(exc)) from exc
                changed = False
                for tp, messages in batches.items():
                    for message in messages:
                        record = kafka_io.decode_record(message)
                        if isinstance(record.value, RunState):
                            state = record.value
                            self.states[state.run_id] = state
                            for object_id in state.provider_object_ids:
                                self.object_runs.setdefault(object_id, state.run_id)
                            changed = True
                        if tp in pending and message.offset + 1 >= ends[tp]:
                            pending.discard(tp)
                if pending and not batches:
                    # Compaction can leave the end offset beyond the last record.
                    for tp in list(pending):
                        if await consumer.position(tp) >= ends[tp]:
                            pending.discard(tp)
                if not pending:
                    self.caught_up.set()
                if changed:
                    async with self._changed:
                        self._changed.notify_all()
        finally:
            await consumer.stop()


async def run_events(settings: PipelineSettings, run_id: str, *, after_seq: int = -1,
                     stop_at_finish: bool = True) -> AsyncIterator[ModelEvent | None]:
    """The run's events with ``seq > after_seq`` in order, each once; ``None`` now and then
    while nothing arrives (a keep-alive tick). Ends after ``run.finished`` when
    ``stop_at_finish``; otherwise when the caller stops iterating."""
    records = kafka_io.read_records(settings, "events", run_id=run_id, timeout=float("inf"),
                                    idle_tick=IDLE_TICK_S)
    async for event in _in_seq_order(records, after_seq):
        yield event
        if stop_at_finish and event is not None and event.kind == "run.finished":
            return


async def run_history(settings: PipelineSettings, run_id: str, *,
                      after_seq: int = -1) -> AsyncIterator[ModelEvent]:
    """The run's events with ``seq > after_seq`` that ``events`` holds now, in order, each once."""
    records = kafka_io.read_records(settings, "events", run_id=run_id, timeout=30.0, to_end=True)
    async for event in _in_seq_order(records, after_seq):
        if event is not None:
            yield event


async def _in_seq_order(records: AsyncIterator[kafka_io.Record | None], after_seq: int,
                        ) -> AsyncIterator[ModelEvent | None]:
    """Events from ``seq`` after_seq + 1 on, each seq once (a record written twice by an
    at-least-once retry is dropped); ``None`` ticks pass through."""
    expected = after_seq + 1
    held: dict[int, ModelEvent] = {}
    async for record in records:
        if record is None:
            yield None
            continue
        event = record.value
        if not isinstance(event, ModelEvent) or event.seq is None or event.seq < expected:
            continue  # not an event, or a duplicate of one already passed on
        held[event.seq] = event
        while expected in held:
            ready = held.pop(expected)
            expected += 1
            yield ready
