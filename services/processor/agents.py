"""The stream processor's agents and timers: the run agent (frames, rerouted frames and ingest in;
events, runs, aliases and dead letters out), the alias agent, and the timers that release idle
state, watch for stalls and log progress. The topology they implement is described in
``services/processor/app.py``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import replace as dataclass_replace
from typing import Any

import faust

from modelevents.schemas import codec
from modelevents.schemas.errors import IncompletePieces, SchemaError
from modelevents.schemas.events import Envelope, Error, ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.limits import MAX_RECORD_BYTES
from modelevents.schemas.pieces import join_frames
from modelevents.schemas.run_state import DeadLetter
from modelevents.services.kafka.clients import partition_for_key, start_producer
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import changelog_topics, internal_topics, replication_configs
from modelevents.services.policy.hosted import HostedPolicy
from modelevents.services.processor.faust.ordering import LogStarts, PartitionOrder
from modelevents.services.processor.faust.recovery import RecoveryWatch
from modelevents.services.processor.faust.tables import RawRecords, RunTable
from modelevents.services.processor.faust.transport import take_batches
from modelevents.services.processor.lane import Computed, Lane, TableWrite
from modelevents.services.processor.outbox import Outbox, OutputProducer
from modelevents.services.processor.stats import Stats
from modelevents.services.processor.table_values import (
    RunWork,
    UnreadableState,
    expiries,
    pack_alias,
    run_status,
    unpack_alias,
    unpack_run,
)
from modelevents.services.processor.tuning import ProcessorTuning
from modelevents.services.processor.working_copies import WorkingCopies
from modelevents.services.run_logic.normalizer import RunNormalizer
from modelevents.services.run_logic.run_machine import RunMachine
from modelevents.services.run_logic.sequencer import RunSequence
from modelevents.services.run_logic.source_trust import judge

log = logging.getLogger("modelevents.processor")

# Changelogs are compacted; small segments let the cleaner run soon, so that recovery (which reads
# a changelog partition from its start into the in-memory store) stays proportional to live keys.
CHANGELOG_CONFIG = {
    "segment.ms": str(10 * 60 * 1000),
    "min.cleanable.dirty.ratio": "0.2",
    "delete.retention.ms": str(60 * 60 * 1000),
}
# The ingest header of candidate events that earlier versions' normalizer agent wrote.
_LEGACY_ORIGIN_HEADER = "modelevents-origin"
# The outputs' producer: a batch is queued whole before anything is awaited, so waiting for
# more records (linger) only delays its acknowledgement.
_PRODUCER_TUNING: dict[str, Any] = {"linger_ms": 0}
_TOPIC_ALREADY_EXISTS = 36
# Records computed between two turns of the event loop.
_YIELD_EVERY = 64
# Table entries the release timer looks at between two turns of the event loop.
_SWEEP_YIELD_EVERY = 2_000
# Bytes of deliveries' pieces a worker holds while their last pieces are due (a producer writes
# a delivery's pieces one after the other, so this is a few deliveries' worth).
MAX_PENDING_PIECE_BYTES = 256 * 1024 * 1024
# A dead letter carries the record it is about only while the letter stays a record itself.
_DEAD_RECORD_BYTES = MAX_RECORD_BYTES - 64 * 1024


def _headers(message: Any) -> dict[str, bytes]:
    headers = message.headers or ()
    return dict(headers.items() if isinstance(headers, dict) else headers)


class Processor:
    """Registers the agents, tables and timers of one app; holds what they share."""

    def __init__(self, app: faust.App, settings: PipelineSettings, tuning: ProcessorTuning,
                 policies: Mapping[str, HostedPolicy] | None = None) -> None:
        self.app = app
        # None: no policy file — events pass unjudged, as offline `normalize` gives them.
        self.policies = policies
        self.settings = settings
        self.tuning = tuning
        self.stats = Stats(settings.partitions)
        # Rebalances seen (revocations): a count of recovered runs started before one is stale.
        self.rebalances = 0
        self.runs_to_count = False  # a rebalance completed: count the runs recovered
        self.orders: list[PartitionOrder] = []
        self.log_starts = LogStarts(settings)
        names = settings.topic_names
        internal = internal_topics(settings)
        self.frames_topic = names["frames"]
        self.rerouted_topic = internal["rerouted"]
        self.aliases_topic = internal["aliases"]
        self.ingest_topic = names["ingest"]
        self.events_topic = names["events"]
        self.runs_topic = names["runs"]
        self.dlq_topic = names["dlq"]

        def table(name: str, help_text: str) -> Any:
            return app.tables.add(RunTable(
                app, name=name, beacon=app.tables.beacon, key_type=bytes, value_type=bytes,
                partitions=settings.partitions, use_partitioner=True,
                extra_topic_configs={**CHANGELOG_CONFIG, **replication_configs(settings)},
                help=help_text))

        self.run_table = table("run", "run id → RunWork (the run's adapters, seq, dedupe, RunState)")
        self.aliases_table = table("aliases", "provider object id → run id that claimed it")
        self.working = WorkingCopies(self.run_table, tuning.cached_runs)
        # Tables are written through the agents' outbox, not Faust's producer (see _write).
        self.changelogs = changelog_topics(settings)
        self.run_lane, self.alias_lane = Lane(), Lane()
        self.rebalanced = False  # set at a revocation: the working state must be emptied
        # Deliveries arriving in pieces (schemas/pieces.py), by (run key, frame id): the pieces
        # so far and their records, which are acked only once the delivery is whole.
        self.pieces: dict[tuple[str, str], list[tuple[ProviderFrame, Any]]] = {}
        self._pending: list[Any] = []  # of the batch being computed: pieces not to ack yet
        self._completed: list[Any] = []  # of earlier batches: pieces to ack with this one

        raw = RawRecords()
        app.agent(app.topic(self.frames_topic, self.rerouted_topic, self.ingest_topic,
                            schema=raw), name="run")(self._run_agent)
        app.agent(app.topic(self.aliases_topic, schema=raw), name="aliases")(self._aliases_agent)
        app.on_partitions_assigned.connect(self._on_partitions_assigned)
        app.on_partitions_revoked.connect(self._on_partitions_revoked)
        app.on_rebalance_complete.connect(self._on_rebalance_complete)
        app.timer(PartitionOrder.STALL_CHECK_S)(_guarded(self._check_stalled))
        app.timer(RecoveryWatch.CHECK_S)(_guarded(RecoveryWatch(app).check))
        app.timer(tuning.sweep_every)(_guarded(self._release_expired))
        app.timer(RecoveryWatch.CHECK_S)(_guarded(self._count_recovered_runs))
        if tuning.stats_interval:
            app.timer(tuning.stats_interval)(_guarded(self._log_stats))

    # --- shared batch machinery -------------------------------------------------------------

    async def _batches(self, stream: Any, lane: Lane,
                       compute: Callable[[Sequence[Any], Outbox], Awaitable[Computed]],
                       topics: Iterable[str],
                       pipelined: bool = False) -> None:
        """Run ``compute`` over the stream's batches; each batch's second half (send, write,
        ack: :meth:`_finish`) in a task chained on ``lane`` after what was there before.
        ``pipelined``: the next batch is computed while the previous one's outputs are
        acknowledged."""
        # Before the first await: this subscribes the agent's topics (see take_batches).
        batches = take_batches(stream, self.tuning.batch_size, self.tuning.batch_within)
        output = OutputProducer(lambda: start_producer(self.settings, **_PRODUCER_TUNING))
        await output.start()
        topics = list(topics)
        await self.log_starts.connect(topics)
        order = PartitionOrder(self.app, topics, self.log_starts)
        self.orders.append(order)
        lane.output = output
        try:
            async for batch in batches:
                # At most one batch waits behind the one being sent (bounded memory, and a
                # stop or rebalance waits for little).
                await lane.wait(keep=1 if pipelined else 0)
                if self.rebalanced and pipelined:
                    await lane.wait(keep=0)
                    self.working.clear()
                    # Pieces collected from partitions that may be gone: never acked, so they
                    # are delivered again, from the first piece, wherever their partition went.
                    self.pieces.clear()
                    self.rebalanced = False
                fresh, again, held = await order.split(batch)
                order.abandon(held)
                outbox = Outbox(output, self.settings.partitions)
                computed = await compute(fresh, outbox)
                computed.records = fresh + again
                if computed.pending or computed.completed:
                    pending = {id(item) for item in computed.pending}
                    computed.records = [item for item in computed.records
                                        if id(item) not in pending] + computed.completed
                task = lane.chain(self._finish(order, computed), self._crash_on_failure)
                if not pipelined:
                    await task
        finally:
            # Stopping (or crashing): what was computed is still sent, written and acked in
            # order — Faust waits for those acks before it commits.
            await lane.drain()
            lane.output = None
            self.orders.remove(order)
            await output.stop()
            if not self.orders:
                await self.log_starts.close()

    def _write(self, outbox: Outbox, writes: list[TableWrite]) -> None:
        """Queue table writes (None: a deletion) as changelog records on a batch's outbox: sent,
        and acknowledged, with its outputs. ``RunTable.store_written`` sets the in-memory values
        after."""
        changelogs = self.changelogs
        for table, key, value in writes:
            outbox.add(changelogs[table.name], key, value)

    async def _finish(self, order: PartitionOrder, computed: Computed) -> None:
        # The table values go to the changelogs with the outputs, acknowledged before the
        # batch's records are acked: a committed record's state is durable, and its outputs.
        await computed.outbox.send_all()
        if computed.outbox.refused:
            await self._refused(computed.outbox)
        for table, key, value in computed.writes:
            table.store_written(key, value)
        self.working.release(computed.held)
        consumer = self.app.consumer
        for event in computed.records:
            # Event.ack, without Stream.ack's sensor calls (the worker's monitor keeps no
            # statistics): the message's last reference acked marks its offset processed.
            event.message.ack(consumer)
        await order.seek_gaps()

    def _crash_on_failure(self, task: asyncio.Task) -> None:
        # A batch whose outputs cannot be sent is never acked: stop the worker (exit status 1),
        # as an agent that raises does, rather than stall its commits.
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("a batch could not be completed: %r", exc)
            asyncio.ensure_future(self.app.crash(exc))

    def _dead(self, outbox: Outbox, stage: str, reason: str, error_type: str, message: Any,
              run_key: str | None, record: bytes | None, tenant: str | None = None,
              provider: str | None = None) -> None:
        if record is not None and len(record) > _DEAD_RECORD_BYTES:
            reason += (f" (the record, {len(record)} bytes, is too large to carry here: it stays "
                       f"at {message.topic}[{message.partition}]@{message.offset})")
            record = None
        letter = DeadLetter(stage=stage, reason=reason, error_type=error_type,
                            at=int(time.time() * 1000), run_key=run_key, topic=message.topic,
                            partition=message.partition, offset=message.offset, record=record)
        self._dead_letter(outbox, letter, run_key.encode() if run_key else message.key,
                          tenant, provider)

    def _dead_letter(self, outbox: Outbox, letter: DeadLetter, key: bytes | None,
                     tenant: str | None = None, provider: str | None = None) -> None:
        self.stats.dead += 1
        self.stats.dead_by[(letter.stage, letter.error_type)] += 1
        outbox.add(self.dlq_topic, key, codec.encode(letter))
        where = (f" {letter.topic}[{letter.partition}]@{letter.offset}" if letter.topic else "")
        fields = {"run_id": letter.run_key, "tenant": tenant, "provider": provider}
        log.warning("dead letter (%s)%s: %s", letter.stage, where, letter.reason,
                    extra={k: v for k, v in fields.items() if v is not None})

    async def _refused(self, sent: Outbox) -> None:
        """Records the producer or broker refused as too large (a topic whose max.message.bytes
        is below the project's record limit): dead-lettered with why, never retried — the
        batch goes on, and so does the partition."""
        outbox = Outbox(sent.output, self.settings.partitions)
        for (topic, key, value), error in sent.refused:
            size = len(value) if value is not None else 0  # a tombstone is never too large
            self._dead_letter(outbox, DeadLetter(
                stage="write", error_type="RecordTooLarge", at=int(time.time() * 1000),
                run_key=key.decode("utf-8", "replace") if key else None, topic=topic,
                reason=f"a {size}-byte record for {topic} was refused ({error!r}); raise "
                       f"the topic's max.message.bytes to at least {MAX_RECORD_BYTES + 65536}"),
                key)
        await outbox.send_all()

    # --- the run agent ----------------------------------------------------------------------

    async def _run_agent(self, stream: Any) -> None:
        await self._batches(stream, self.run_lane, self._run_batch,
                            (self.frames_topic, self.rerouted_topic, self.ingest_topic),
                            pipelined=True)

    async def _run_batch(self, batch: Sequence[Any], outbox: Outbox) -> Computed:
        now = time.time()
        self.stats.batches += 1
        changed: dict[bytes, RunWork] = {}
        published: set[bytes] = set()
        self._pending, self._completed = [], []
        for position, item in enumerate(batch, 1):
            if not position % _YIELD_EVERY:
                # Let the loop take acknowledgements and fetched records in: the previous batch
                # completes, and the next one fills, while this one is computed.
                await asyncio.sleep(0)
            message = item.message
            if message.topic == self.ingest_topic:
                self._ingest(message, outbox, changed, published, now)
            else:
                self._frame(item, outbox, changed, published, now)
        # Snapshots of the states now: the next batch goes on changing the cached objects.
        writes: list[TableWrite] = [
            (self.run_table, key, self._pack(key, work, outbox, published))
            for key, work in changed.items()]
        for key in published:
            sequence = changed[key].sequence
            assert sequence is not None, "a run published events, so it has a sequence"
            outbox.add(self.runs_topic, key, codec.encode(sequence.state))
        self._write(outbox, writes)
        self.working.computed(changed)
        for key, work in changed.items():
            if work.sequence is not None:
                self.stats.runs.put(key, work.sequence.state.status)
        return Computed(outbox, writes, [], list(changed), self._pending, self._completed)

    def _pack(self, key: bytes, work: RunWork, outbox: Outbox, published: set[bytes]) -> bytes:
        """The run's table value — one that fits a record. The adapters are bounded
        (adapters/accumulate.py), but should a run's still outgrow a record, they are dropped
        (here and in memory alike, so a restart continues as this worker does), the run is
        flagged and the drop dead-lettered: its state stays durable and the partition goes on."""
        value = work.pack(self.tuning.retention)
        if len(value) <= MAX_RECORD_BYTES or work.normalizer is None:
            return value
        size = len(value)
        work.normalizer = None
        run_id = key.decode("utf-8", "replace")
        note = (f"the run's adapter state grew to {size} bytes, more than a record holds "
                f"({MAX_RECORD_BYTES}); it was dropped, frames after this batch start afresh")
        if work.sequence is not None:
            RunMachine(work.sequence.state).flag(note)
            published.add(key)
        self._dead_letter(outbox, DeadLetter(stage="write", reason=note, error_type="StateTooLarge",
                                             at=int(time.time() * 1000), run_key=run_id), key)
        return work.pack(self.tuning.retention)

    def _frame(self, item: Any, outbox: Outbox, changed: dict[bytes, RunWork],
               published: set[bytes], now: float) -> None:
        message = item.message
        raw = message.value
        try:
            frame = codec.decode(raw) if raw is not None else None
            if not isinstance(frame, ProviderFrame):
                raise SchemaError(f"expected a ProviderFrame, got {type(frame).__name__}")
        except SchemaError as exc:
            self._dead(outbox, "decode", str(exc), type(exc).__name__, message,
                       _text(message.key), raw)
            return
        run_key = self._run_key(message, frame, outbox)
        if run_key is None:
            return  # re-keyed: the frame comes back on the rerouted topic
        if frame.piece is not None:
            whole = self._assemble(item, frame, outbox)
            if whole is None:
                return  # more pieces to come
            frame = whole
        work = self.working.get(run_key)
        if (not self._readable(work, run_key, message, outbox, raw, changed, published)
                or self._other_tenant(work, frame.tenant, message, outbox, raw)):
            return
        run = work.normalizer
        if run is None:
            run = work.normalizer = RunNormalizer(run_key.decode())
        source = message.topic
        if run.already_applied(source, message.offset):
            return
        run.mark_applied(source, message.offset)
        run.last_active = now
        changed[run_key] = work
        self.stats.frames += 1
        self.stats.frames_by[(frame.provider, frame.api)] += 1
        translation = run.translate(frame)
        if translation.failure:
            self._dead(outbox, "translate", translation.failure, translation.error_type,
                       message, run.run_id, raw, frame.tenant, frame.provider)
        candidates = translation.events
        if self.policies is not None:
            # A tenant the file does not name gets the empty policy: verdicts from no lists, and
            # any MCP server unlisted (a file is configured, so its silence allows nothing).
            candidates = judge(candidates, self.policies.get(frame.tenant, HostedPolicy()))
        for candidate in candidates:
            self._sequence(work, run_key, candidate, None, None, message, outbox, published, now)
        self.stats.candidates += len(candidates)
        for object_id in translation.claims:
            outbox.add(self.aliases_topic, object_id.encode(), run_key)

    def _assemble(self, item: Any, frame: ProviderFrame, outbox: Outbox) -> ProviderFrame | None:
        """Collect one piece of a delivery: the whole frame once its last piece is here (the
        records of its pieces are then acked with this batch), else None (this record is not
        acked yet). A delivery that starts over (a producer's resend) replaces what was
        collected; pieces that cannot make a whole are dead-lettered and acked."""
        piece = frame.piece
        assert piece is not None
        key = (frame.run_key, frame.frame_id)
        collected = self.pieces.get(key)
        if piece.index == 0:
            if collected:
                self._completed += [i for _, i in collected]  # superseded by the resend
            collected = self.pieces[key] = []
        elif collected is None:
            self._broken_pieces(item, [], frame, outbox,
                                f"piece {piece.index} of {piece.count} of frame {frame.frame_id} "
                                "came without the pieces before it")
            return None
        collected.append((frame, item))
        if len(collected) < piece.count:
            self._pending.append(item)
            self._bound_pieces(outbox)
            return None
        del self.pieces[key]
        try:
            whole = join_frames([f for f, _ in collected])
        except IncompletePieces as exc:
            self._broken_pieces(item, collected[:-1], frame, outbox, str(exc))
            return None
        self._completed += [i for _, i in collected[:-1]]
        return whole

    def _broken_pieces(self, item: Any, collected: list[tuple[ProviderFrame, Any]],
                       frame: ProviderFrame, outbox: Outbox, why: str) -> None:
        self._completed += [i for _, i in collected]
        self._dead(outbox, "decode", why, "IncompletePieces", item.message, frame.run_key,
                   item.message.value)

    def _bound_pieces(self, outbox: Outbox) -> None:
        """Pieces wait in memory only: beyond :data:`MAX_PENDING_PIECE_BYTES` the oldest
        incomplete delivery is given up (dead-lettered, its records acked)."""
        while sum(len(f.body) for pieces in self.pieces.values() for f, _ in pieces) \
                > MAX_PENDING_PIECE_BYTES:
            key = next(iter(self.pieces))
            collected = self.pieces.pop(key)
            frame, item = collected[-1]
            pending = {id(i) for _, i in collected}
            self._pending = [i for i in self._pending if id(i) not in pending]
            self._broken_pieces(item, collected[:-1], frame, outbox,
                                f"frame {frame.frame_id} of run {frame.run_key}: {len(collected)} "
                                f"of its {frame.piece.count if frame.piece else '?'} pieces came, "
                                f"and pieces waiting passed {MAX_PENDING_PIECE_BYTES} bytes")

    def _ingest(self, message: Any, outbox: Outbox, changed: dict[bytes, RunWork],
                published: set[bytes], now: float) -> None:
        raw = message.value
        key = message.key
        try:
            event = codec.decode(raw) if raw is not None else None
            if not isinstance(event, ModelEvent):
                raise SchemaError(f"expected a ModelEvent, got {type(event).__name__}")
        except SchemaError as exc:
            self._dead(outbox, "decode", str(exc), type(exc).__name__, message, _text(key), raw)
            return
        if key is None or key != event.run_id.encode():
            self._dead(outbox, "sequence",
                       f"ingest record keyed {_text(key)!r} carries an event of run "
                       f"{event.run_id!r}; producers must key ingest records by run_id",
                       "KeyMismatch", message, event.run_id, raw)
            return
        if _LEGACY_ORIGIN_HEADER in _headers(message):
            return  # an earlier version's candidate: its frame is normalized here itself
        if message.partition != partition_for_key(key, self.settings.partitions):
            # Its run's state is on the partition Kafka's murmur2 gives; applied here it would
            # start a second run of that id. The producer must partition as Kafka's Java client.
            self._dead(outbox, "sequence",
                       f"ingest record of run {event.run_id!r} is on partition "
                       f"{message.partition}, not {partition_for_key(key, self.settings.partitions)}"
                       " where murmur2 of its key puts it: produce with Kafka's default "
                       "partitioner (librdkafka: partitioner=murmur2_random)",
                       "PartitionMismatch", message, event.run_id, raw)
            return
        self.stats.ingested += 1
        work = self.working.get(key)
        if (not self._readable(work, key, message, outbox, raw, changed, published)
                or self._other_tenant(work, event.tenant, message, outbox, raw)):
            return
        if self._sequence(work, key, event, message.offset, raw, message, outbox, published, now):
            changed[key] = work

    def _readable(self, work: RunWork, key: bytes, message: Any, outbox: Outbox,
                  raw: bytes | None, changed: dict[bytes, RunWork], published: set[bytes]) -> bool:
        """False (and the record dead-lettered) when the run's stored state cannot be read:
        numbering its events afresh from 0 would give new events the numbers of old ones. A
        state whose adapters could not be read (written by another version) goes on without
        them: the run is flagged, once, and the drop dead-lettered."""
        if work.unreadable is not None:
            self._dead(outbox, "state",
                       f"the stored state of run {_text(key)} cannot be read "
                       f"({work.unreadable}); its records are dead-lettered until the state is "
                       "repaired or released, not numbered afresh", "UnreadableState", message,
                       _text(key), raw)
            return False
        if work.dropped is not None:
            note = f"{work.dropped}; frames after it start afresh"
            work.dropped = None
            if work.sequence is not None:
                RunMachine(work.sequence.state).flag(note)
                published.add(key)
            changed[key] = work
            self._dead(outbox, "state", f"run {_text(key)}: {note}", "StateUpgrade", message,
                       _text(key), None)
        return True

    def _claim_of(self, object_id: bytes) -> str | None:
        """The run that claimed a provider object id, if any (an unreadable claim counts as
        none, and is replaced by the next run that claims the object)."""
        try:
            return unpack_alias(self.aliases_table.lookup(object_id))
        except UnreadableState as exc:
            log.warning("alias %s: %s; taken as unclaimed", _text(object_id), exc)
            return None

    def _other_tenant(self, work: RunWork, tenant: str, message: Any, outbox: Outbox,
                      raw: bytes | None) -> bool:
        """True (and dead-lettered, stage ``resolve``) when a record of ``tenant`` reaches a run
        of another tenant: a run's story is its tenant's alone, whatever key or claim led there."""
        if work.sequence is None or work.sequence.state.tenant == tenant:
            return False
        run = work.sequence.state
        self._dead(outbox, "resolve",
                   f"a record of tenant {tenant!r} reached run {run.run_id} of tenant "
                   f"{run.tenant!r} (by its key, or by the run's claim of the provider object it "
                   "names); not applied", "TenantMismatch", message, run.run_id, raw)
        return True

    def _sequence(self, work: RunWork, key: bytes, event: ModelEvent, ingest_offset: int | None,
                  raw: bytes | None, message: Any, outbox: Outbox, published: set[bytes],
                  now: float) -> bool:
        """Number one candidate event of the run and publish it; False: it was applied before."""
        run = work.sequence
        if run is None:
            run = work.sequence = RunSequence.new(event.run_id, event.tenant)
        before = run.state.status
        step = run.step(event, now, ingest_offset)
        if step.skipped == "applied":
            return False
        if step.skipped:
            self.stats.skipped += 1
        if step.event is not None:
            outbox.add(self.events_topic, key, self._event_record(run, step.event))
            published.add(key)
            self.stats.events += 1
            self.stats.events_by[(event.provider, event.api, step.event.kind)] += 1
            if run.state.status != before:
                self.stats.states_entered[run.state.status] += 1
        if step.failure:
            record = (codec.encode(step.event) if step.event is not None
                      else raw if raw is not None else codec.encode(event))
            self._dead(outbox, step.failure_stage, step.failure, step.error_type, message,
                       event.run_id, record, event.tenant, event.provider)
        return True

    def _event_record(self, run: RunSequence, event: ModelEvent) -> bytes:
        """The event's record — or, should it not fit one (adapters cut what would not, so this
        is a safeguard), an ``error`` event in its place at its ``seq``, naming it, and the run
        flagged: ``seq`` stays contiguous and nothing is silently missing."""
        record = codec.encode(event)
        if len(record) <= MAX_RECORD_BYTES:
            return record
        note = (f"event {event.event_id} ({event.kind}, seq {event.seq}) was {len(record)} bytes, "
                f"more than a record holds ({MAX_RECORD_BYTES}); its frame is on the frames topic")
        RunMachine(run.state).flag(note)
        stand_in = dataclass_replace(
            event, event_id=f"{event.event_id}~too-large", kind="error", piece=None, elided=None,
            envelope=Envelope(event.envelope.content_type, b""),
            payload=Error(error_type="record_too_large", message=note, retryable=False))
        return codec.encode(stand_in)

    def _run_key(self, message: Any, frame: ProviderFrame, outbox: Outbox) -> bytes | None:
        """The run id (as key bytes) a frame belongs to, or None when it was sent to that run's
        partition instead (a claimed object id, or a record without key)."""
        key = message.key
        if message.topic == self.frames_topic:
            if key is None:
                # No key: the record landed on an arbitrary partition; move it to its run's.
                outbox.add(self.rerouted_topic, frame.run_key.encode(), message.value)
                return None
            if message.partition != partition_for_key(key, self.settings.partitions):
                # Produced with another partitioner than Kafka's murmur2 (librdkafka's default
                # is CRC32: kcat, confluent-kafka): its run lives on the partition murmur2
                # gives, where the rerouted topic (written with murmur2) takes it.
                outbox.add(self.rerouted_topic, key, message.value)
                return None
        elif key is None:
            return None  # not written by a worker: rerouted records always have a key
        # A rerouted record is keyed by its run id, or by the object id it was keyed by when it
        # came from another partitioner: that one may be claimed by a run.
        run_id = self._claim_of(key)
        if run_id is not None:
            if run_id.encode() != key:
                outbox.add(self.rerouted_topic, run_id.encode(), message.value)
                return None
        return key

    # --- aliases ----------------------------------------------------------------------------

    async def _aliases_agent(self, stream: Any) -> None:
        # Not pipelined: a batch must see the claims of the one before in the table.
        await self._batches(stream, self.alias_lane, self._alias_batch, (self.aliases_topic,))

    async def _alias_batch(self, batch: Sequence[Any], outbox: Outbox) -> Computed:
        now = time.time()
        writes: list[TableWrite] = []
        seen: dict[bytes, str] = {}
        for item in batch:
            message = item.message
            object_id, run_id = message.key, _text(message.value)
            if object_id is None or not run_id:
                continue
            current = seen.get(object_id) or self._claim_of(object_id)
            if current is None:
                seen[object_id] = run_id
                writes.append((self.aliases_table, object_id,
                               pack_alias(run_id, now + self.tuning.retention)))
                if self._has_run(object_id):
                    self._dead(outbox, "resolve",
                               f"frames keyed by provider object {_text(object_id)} arrived before run "
                               f"{run_id} announced that object, and started a run of that name; "
                               f"they stay in run {_text(object_id)} (runs are not merged), frames "
                               f"keyed by {_text(object_id)} from now on go to run {run_id}",
                               "UnmergedRun", message, run_id, message.value)
            elif current != run_id:
                self._dead(outbox, "resolve",
                           f"provider object {_text(object_id)} is claimed by run {current}; run "
                           f"{run_id} announced it too and keeps only its own frames (the first "
                           "claim wins)", "ClaimConflict", message, run_id, message.value)
        self._write(outbox, writes)
        return Computed(outbox, writes, [], [])

    def _has_run(self, key: bytes) -> bool:
        """Whether a run of this id has state here (the ``run`` table is partitioned as the
        aliases are, so a run named by an object id lives on the object id's worker)."""
        return key in self.working.cache or self.run_table.lookup(key) is not None

    # --- timers -----------------------------------------------------------------------------

    async def _release_expired(self) -> None:
        """Release what outlived its retention, on the partitions this worker owns: delete a
        run's value (or an alias) when all of it is due, drop a run's adapters when only they
        are. A run that a batch being computed or in flight touched is left for the next tick:
        its table value is older than its working state.

        The writes go through the table's agent's lane (:class:`Lane`), chained after its
        batches, and are awaited: a deletion reaches the changelog after the value it deletes
        and before any later value. So each chunk of keys is decided, set in memory and chained
        with no turn of the event loop in between — a batch computed after it sees the released
        state and is sent after it; one computed before holds its keys busy."""
        released = trimmed = 0
        for table, lane in ((self.run_table, self.run_lane), (self.aliases_table, self.alias_lane)):
            if lane.output is None:
                continue  # the agent has not started (or has stopped): its table is not served
            keys = list(table.keys())
            for start in range(0, len(keys), _SWEEP_YIELD_EVERY):
                writes = self._expired(table, keys[start:start + _SWEEP_YIELD_EVERY])
                if writes:
                    outbox = Outbox(lane.output, self.settings.partitions)
                    self._write(outbox, writes)
                    await lane.chain(outbox.send_all(), self._crash_on_failure)
                    released += sum(value is None for _, _, value in writes)
                    trimmed += sum(value is not None for _, _, value in writes)
                else:
                    await asyncio.sleep(0)  # a long table is swept between batches, not instead
        if released or trimmed:
            log.info("released the state of %d runs/aliases past their retention, and the "
                     "adapters of %d idle runs", released, trimmed)

    def _expired(self, table: Any, keys: Iterable[bytes]) -> list[TableWrite]:
        """The writes that release what is due among ``keys``, already set in memory."""
        now = time.time()
        partitions = self.settings.partitions
        owned = {tp.partition for tp in self.app.consumer.assignment()
                 if tp.topic == self.frames_topic}
        retention = self.tuning.retention
        writes: list[TableWrite] = []
        for key in keys:
            value = table.lookup(key)  # read now: a batch may have written it since the list
            if value is None:
                continue
            whole, part = expiries(value)
            if min(whole, part) > now or partition_for_key(key, partitions) not in owned:
                continue
            if table is self.run_table:
                if self.working.busy(key):
                    continue
                self.working.forget(key)
            # (An alias needs no such check: a claim is written only where none is, so a claim
            # in flight is never one that is here to be released.)
            if whole <= now:
                writes.append((table, key, None))
                if table is self.run_table:
                    self.stats.runs.drop(key)
            else:  # a live run idle for the retention period keeps its numbering only
                try:
                    work = unpack_run(value)
                except UnreadableState:
                    continue  # its records are dead-lettered (see _readable); kept as it is
                assert work is not None
                work.normalizer = None
                writes.append((table, key, work.pack(retention)))
            table.store_written(key, writes[-1][2])
        return writes

    async def _count_recovered_runs(self) -> None:
        """After a rebalance completed: count the runs of the owned partitions that the table
        holds and the count has not yet (recovered from the changelog), and drop the counted
        runs of partitions this worker no longer owns (services/processor/run_gauge.py)."""
        if not self.runs_to_count:
            return
        self.runs_to_count = False
        rebalances = self.rebalances
        owned = {tp.partition for tp in self.app.consumer.assignment()
                 if tp.topic == self.frames_topic}
        runs = self.stats.runs
        runs.keep_only(owned)
        keys = [key for key in list(self.run_table.keys())
                if key not in runs.state and runs.partition_of(key) in owned]
        for start in range(0, len(keys), _SWEEP_YIELD_EVERY):
            for key in keys[start:start + _SWEEP_YIELD_EVERY]:
                value = self.run_table.lookup(key)
                if value is None or key in runs.state:
                    continue  # released, or counted by a batch since the list was made
                try:
                    status = run_status(value)
                except UnreadableState:
                    continue  # its records are dead-lettered (see _readable); not counted
                if status is not None:
                    runs.put(key, status)
            await asyncio.sleep(0)  # a long table is counted between batches, not instead
            if self.rebalances != rebalances:
                return  # revoked meanwhile: the next completed rebalance counts again

    async def _check_stalled(self) -> None:
        lag: dict[tuple[str, int], int] = {}
        for order in list(self.orders):
            await order.check_stalled()
            lag.update(order.lag)
        self.stats.lag = lag

    # The shape mode's signals take: (sender, /, *args, signal=…, **kwargs). Faust sends the
    # partitions as the one argument; the default and the / only make the shape match it.
    async def _on_partitions_revoked(self, _sender: Any, revoked: Iterable[Any] = (), /,
                                     *_args: Any, **_kwargs: Any) -> None:
        # A partition's next session starts at its committed offset, wherever it is assigned.
        for order in self.orders:
            order.forget(revoked)
        # Faust waited for the acks of the batches in flight; the release timer's writes have no
        # records to ack: they are waited for here, before another worker can take a partition
        # over and read its changelog. The run agent empties its working state before its next
        # batch (another worker may change the states of what was revoked).
        for lane in (self.run_lane, self.alias_lane):
            await lane.drain()
        self.rebalanced = True
        # Their runs leave this worker's count now; their next owner counts them once recovered.
        self.rebalances += 1
        self.runs_to_count = False
        gone = {tp.partition for tp in revoked if tp.topic == self.frames_topic}
        self.stats.runs.keep_only(set(range(self.settings.partitions)) - gone)

    async def _on_rebalance_complete(self, _sender: Any = None, /, *_args: Any,
                                     **_kwargs: Any) -> None:
        # Sent by Faust once the tables of the partitions assigned are recovered; the count is
        # made by the timer (_count_recovered_runs), not here, so the streams resume at once.
        self.runs_to_count = True

    async def _on_partitions_assigned(self, _sender: Any, assigned: Iterable[Any] = (), /,
                                      *_args: Any, **_kwargs: Any) -> None:
        mine = sorted(tp.partition for tp in assigned if tp.topic == self.frames_topic)
        log.info("processing partitions %s of %d (runs whose key hashes there)",
                 ", ".join(map(str, mine)) or "none", self.settings.partitions)

    async def _log_stats(self) -> None:
        line = self.stats.line()
        if line:
            log.info("%s", line)


def _guarded(check: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[None]]:
    """A timer body that logs what it raises: an exception in a Faust timer stops the worker,
    and these checks are housekeeping that the next tick does again."""

    @functools.wraps(check)
    async def guarded() -> None:
        try:
            await check()
        except Exception:
            log.warning("%s failed; trying again at the next tick", check.__name__, exc_info=True)

    return guarded


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "replace")
