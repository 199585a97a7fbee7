"""The stream processor: a Faust app that turns provider frames into ordered events and run state.

Topology (``P`` = ``settings.partitions`` for every topic, so partition ``p`` of each topic and
changelog belongs to the same worker: Faust assigns equally partitioned topics together)::

    frames ──┐                              ┌─▶ ingest ──▶ sequencer ──▶ events, runs
             ├─▶ normalizer (table) ────────┤                (table)  └─▶ dlq
    <app>-frames-rerouted ◀─┐               ├─▶ <app>-run-aliases ──▶ aliases (table)
                            └── (aliased) ──┘└─▶ dlq

- **normalizer** (``frames`` + ``<app>-frames-rerouted``): decodes each ProviderFrame
  (undecodable → DeadLetter stage ``decode``), resolves its run, and feeds it to the run's
  adapters (``services/normalizer.py``), whose state lives in the ``normalizer`` table keyed by
  run id. Candidate events go to ``ingest`` keyed by run id, each with a header naming its
  origin (state incarnation and position) so the sequencer can recognise replays.
- **sequencer** (``ingest``): dedupes, numbers each run's events 0, 1, 2, … and advances the run
  state machine (``services/sequencer.py``; state in the ``sequencer`` table), publishing to
  ``events`` and the run's latest RunState to ``runs`` (once per batch). Illegal transitions are
  published and also dead-lettered (stage ``apply``); undecodable records and unknown kinds go to
  ``dlq`` only.
- **aliases** (``<app>-run-aliases``): records which run claimed a provider object id.

Run key resolution. A frame's Kafka key is its run key: the run id when the sender knows the run
(a stream the gateway started), or a provider object id (``resp_…``, ``msg_…``, an interaction
id) when that is all it knows (a webhook, a background poll). When a run's ``run.started``
names a provider object id, the normalizer claims it: a record keyed by the object id, valued
with the run id, on ``<app>-run-aliases``. Keyed by the object id, the claim lands on the same
partition as every frame keyed by that id, so the aliases table (keyed by object id) is local
to the worker that reads those frames. A frame whose key is a claimed object id is re-keyed: its
record goes, unchanged, to ``<app>-frames-rerouted`` keyed by the run id, which puts it on the
run's partition, where the normalizer feeds it to the run's own adapters — the adapter then
dedupes across paths (a webhook repeating what the stream said adds nothing). The first claim
of an object id wins, and a claim lasts ``retention`` seconds. A frame keyed by an object id that
no run has claimed (yet, or any more) starts a run of that name: a webhook that overtakes the
stream announcing the id is not merged afterwards.

Delivery: at-least-once with idempotent outputs (Faust's exactly_once has open duplicate bugs).
Each agent takes records in batches (``stream.noack_take``) and, per batch: computes; sends the
outputs through an idempotent producer (acks=all) and waits for every acknowledgement; then
writes each touched run's state to its table once (one changelog record per run and batch) and
acks the batch's records. Faust commits acked offsets only after flushing the changelog
records queued before them, so a committed record's state is durable, and its outputs were. A
crash or SIGKILL anywhere leaves each run's state at the end of some batch whose outputs are
durable; the uncommitted records are delivered again and processed again from that state,
which yields the same events with the same ``seq`` (duplicates a consumer drops by
``(run_id, seq)``), never a new number and never a gap. A stop (SIGTERM, Ctrl-C) or a rebalance
lets the batch in flight finish: Faust waits for the acks before it commits and hands a
partition over (``modelevents worker`` leaves without the final commit if that hangs, which
loses nothing). All this assumes each source partition is processed in offset order without
holes, which faust-streaming 0.15.3 does not quite guarantee around rebalances and at start-up;
``services/faust_support.py`` restores it (and says how), ``services/outbox.py`` sends outputs.

State. The store is ``memory://``: RocksDB (rocksdict) is not installed with this project, and
the changelogs recover the tables when a worker starts or takes over a partition. Recovery reads
a changelog partition from its start, so the changelogs are compacted eagerly (small segments)
to keep that proportional to the live runs. Standby replicas are off: with an in-memory store
each standby would cost a worker the memory of partitions it does not process. Values are
pickles prefixed with the time at which the key may be released; a timer releases, on the
partitions this worker owns: a run's normalizer state and an alias after ``retention`` seconds
without activity, and a run's sequencer state ``retention`` seconds after the run became
terminal. State is thus bounded by the runs active (or terminal) within one retention period
times a per-run bound (``services/normalizer.py``, ``services/sequencer.py``). An event for a run whose terminal state was
released starts the run afresh at ``seq`` 0: choose a retention longer than the latest webhook
or poll you expect after a run ends.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import pickle
import struct
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faust
import mode
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from modelevents.schemas import codec
from modelevents.schemas.errors import ConfigError, SchemaError
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.run_state import DeadLetter
from modelevents.services import topics
from modelevents.services.faust_support import LogStarts, PartitionOrder, RecoveryWatch, RunTable
from modelevents.services.kafka_io import partition_for_key, start_client, start_producer
from modelevents.services.outbox import Outbox
from modelevents.services.normalizer import RunNormalizer
from modelevents.services.sequencer import Origin, RunSequence
from modelevents.services.settings import PipelineSettings

__all__ = ["ProcessorTuning", "create_app", "prepare_topics", "internal_topics", "changelog_topics"]

log = logging.getLogger("modelevents.processor")

TABLES = ("normalizer", "sequencer", "aliases")
# Changelogs are compacted; small segments let the cleaner run soon, so that recovery (which reads
# a changelog partition from its start into the in-memory store) stays proportional to live keys.
CHANGELOG_CONFIG = {
    "segment.ms": str(10 * 60 * 1000),
    "min.cleanable.dirty.ratio": "0.2",
    "delete.retention.ms": str(60 * 60 * 1000),
}
_EXPIRY = struct.Struct("<d")  # table values: expiry (epoch seconds, inf = never) + pickle
_TOPIC_ALREADY_EXISTS = 36


@dataclass(frozen=True)
class ProcessorTuning:
    """Knobs with defaults that suit one worker on a small machine."""

    batch_size: int = 1000  # records per batch (stream.noack_take max)
    batch_within: float = 0.02  # seconds a partial batch waits for more records
    retention: float = 3600.0  # seconds before idle/terminal run state is released
    sweep_interval: float | None = None  # seconds between releases; default retention/4, ≤ 60 s
    stats_interval: float = 30.0  # seconds between progress log lines (0: none)
    # A worker that dies without leaving its group (SIGKILL, a lost host) keeps its partitions
    # this long; Kafka's 45 s default (Faust's 60 s) is a long pause for a stream.
    session_timeout: float = 30.0

    def __post_init__(self) -> None:
        if (self.batch_size < 1 or self.batch_within <= 0 or self.retention <= 0
                or self.session_timeout < 6):
            raise ValueError("batch_size ≥ 1, batch_within > 0, retention > 0 and "
                             "session_timeout ≥ 6 s are required")

    @property
    def sweep_every(self) -> float:
        if self.sweep_interval is not None:
            return self.sweep_interval
        return max(1.0, min(self.retention / 4, 60.0))


def internal_topics(settings: PipelineSettings) -> dict[str, str]:
    """The processor's own topics (besides Faust's changelogs): logical name → full name."""
    return {"rerouted": f"{settings.app_id}-frames-rerouted",
            "aliases": f"{settings.app_id}-run-aliases"}


def changelog_topics(settings: PipelineSettings) -> dict[str, str]:
    """Faust's changelog topic of each table (Faust names them ``<app id>-<table>-changelog``)."""
    return {name: f"{settings.app_id}-{name}-changelog" for name in TABLES}


async def prepare_topics(settings: PipelineSettings) -> dict[str, str]:
    """Make sure a worker can start: the pipeline's topics exist and match (else ConfigError with
    the fix), the processor's internal topics exist (created here when missing), and every
    internal topic and changelog that exists has ``settings.partitions`` partitions.

    Returns {full topic name: "verified" | "created"}.
    """
    result = await topics.verify_topics(settings)
    internal = list(internal_topics(settings).values())
    changelogs = list(changelog_topics(settings).values())
    admin = await start_client(AIOKafkaAdminClient(
        bootstrap_servers=settings.bootstrap_servers, client_id=f"{settings.app_id}-admin"), settings)
    try:
        counts = await _partition_counts(admin, internal + changelogs)
        missing = [name for name in internal if counts[name] is None]
        if missing:
            response = await admin.create_topics(
                [NewTopic(name, settings.partitions, settings.replication_factor) for name in missing])
            for name, code, message in (e[:3] for e in response.topic_errors):
                if code not in (0, _TOPIC_ALREADY_EXISTS):
                    raise ConfigError(f"cannot create topic {name} on {settings.bootstrap_servers}: "
                                      f"{message or f'error code {code}'}")
            counts.update(await _partition_counts(admin, missing, wait=True))
        for name, count in counts.items():
            if count is not None and count != settings.partitions:
                raise ConfigError(
                    f"topic {name} of worker app {settings.app_id!r} has {count} partitions, but "
                    f"the pipeline runs with {settings.partitions}: a table's changelog must match "
                    f"its source topics. Run the worker with --partitions {count}, or use a new "
                    f"app id (MODELEVENTS_APP_ID; its tables start empty)")
            if count is not None:
                result[name] = "created" if name in missing else "verified"
    finally:
        await admin.close()
    return result


async def _partition_counts(admin: AIOKafkaAdminClient, names: list[str], wait: bool = False,
                            ) -> dict[str, int | None]:
    """Partition count of each topic (None: it does not exist). ``wait``: until all appear."""
    deadline = time.monotonic() + 10.0
    while True:
        described = {d["topic"]: d for d in await admin.describe_topics(names)}
        counts = {name: (len(described[name]["partitions"])
                         if described.get(name, {}).get("error_code") == 0
                         and described[name].get("partitions") else None) for name in names}
        if not wait or all(counts.values()) or time.monotonic() > deadline:
            return counts
        await asyncio.sleep(0.1)


def create_app(settings: PipelineSettings, *, workdir: str | Path | None = None,
               tuning: ProcessorTuning | None = None) -> faust.App:
    """A new Faust app running the normalizer, the sequencer and the alias agent.

    Nothing is declared at module level: each call builds an independent app (tests run several).
    ``workdir`` holds Faust's data directory (default: ``./<app id>-data``). The pipeline's topics
    must exist; the worker command verifies them (and creates the internal ones) first.
    """
    tuning = tuning or ProcessorTuning()
    datadir = Path(workdir or ".") / f"{settings.app_id}-data"
    app = faust.App(
        settings.app_id,
        broker=[f"kafka://{server}" for server in settings.bootstrap_servers.split(",")],
        store="memory://",
        processing_guarantee="at_least_once",
        key_serializer="raw",
        value_serializer="raw",
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        topic_disable_leader=True,
        table_standby_replicas=0,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=tuning.session_timeout,
        broker_heartbeat_interval=min(3.0, tuning.session_timeout / 10),
        web_enabled=False,
        # An agent that raises has a batch it will never ack, so the commits behind it would
        # stall: stop the worker (exit status 1) and let the next start redeliver the batch,
        # rather than restart the agent in place.
        agent_supervisor=mode.CrashingSupervisor,
        autodiscover=False,
        datadir=str(datadir),
    )
    _Processor(app, settings, tuning)
    return app


# --- table values ------------------------------------------------------------------------------


def _pack(state: Any, expires_at: float) -> bytes:
    return _EXPIRY.pack(expires_at) + pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)


def _unpack(value: bytes | None) -> Any:
    return None if value is None else pickle.loads(memoryview(value)[_EXPIRY.size:])


def _expires_at(value: bytes) -> float:
    return _EXPIRY.unpack_from(value)[0]


def _headers(message: Any) -> dict[str, bytes]:
    headers = message.headers or ()
    return dict(headers.items() if isinstance(headers, dict) else headers)


# --- the agents -------------------------------------------------------------------------------


class _Stats:
    def __init__(self) -> None:
        self.frames = self.candidates = self.events = self.dead = self.skipped = 0
        self.reported = (0, 0, 0, 0)

    def line(self) -> str | None:
        now = (self.frames, self.candidates, self.events, self.dead)
        if now == self.reported:
            return None
        self.reported = now
        return (f"normalized {self.frames} frames into {self.candidates} candidate events; "
                f"sequenced {self.events} events ({self.skipped} duplicates dropped); "
                f"{self.dead} dead letters")


class _Processor:
    """Registers the agents, tables and timers of one app; holds what they share."""

    def __init__(self, app: faust.App, settings: PipelineSettings, tuning: ProcessorTuning) -> None:
        self.app = app
        self.settings = settings
        self.tuning = tuning
        self.stats = _Stats()
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
                extra_topic_configs=CHANGELOG_CONFIG, help=help_text))

        self.normalizer_table = table("normalizer", "run id → RunNormalizer (adapters of the run)")
        self.sequencer_table = table("sequencer", "run id → RunSequence (seq, dedupe, RunState)")
        self.aliases_table = table("aliases", "provider object id → run id that claimed it")

        app.agent(app.topic(self.frames_topic, self.rerouted_topic), name="normalizer")(
            self._normalizer_agent)
        app.agent(app.topic(self.ingest_topic), name="sequencer")(self._sequencer_agent)
        app.agent(app.topic(self.aliases_topic), name="aliases")(self._aliases_agent)
        app.on_partitions_assigned.connect(self._on_partitions_assigned)
        app.on_partitions_revoked.connect(self._on_partitions_revoked)
        app.timer(PartitionOrder.STALL_CHECK_S)(_guarded(self._check_stalled))
        app.timer(RecoveryWatch.CHECK_S)(_guarded(RecoveryWatch(app).check))
        app.timer(tuning.sweep_every)(_guarded(self._release_expired))
        if tuning.stats_interval:
            app.timer(tuning.stats_interval)(_guarded(self._log_stats))

    # --- shared batch machinery -------------------------------------------------------------

    async def _batches(self, stream: Any, handle: Any, topics: Iterable[str],
                       with_producer: bool = True) -> None:
        producer = await start_producer(self.settings) if with_producer else None
        order = PartitionOrder(self.app, topics, self.log_starts)
        self.orders.append(order)
        try:
            async for batch in stream.noack_take(self.tuning.batch_size, self.tuning.batch_within):
                await self._process(stream, order, batch, handle, producer)
        finally:
            self.orders.remove(order)
            if producer is not None:
                await producer.stop()
            if not self.orders:
                await self.log_starts.close()

    async def _process(self, stream: Any, order: PartitionOrder, batch: list[Any], handle: Any,
                       producer: AIOKafkaProducer | None) -> None:
        fresh, again, held = await order.split(batch)
        order.abandon(held)
        outbox = Outbox(producer) if producer is not None else None
        writes = handle(fresh, outbox)
        if outbox is not None:
            await outbox.send_all()
        # Queued on Faust's producer; every commit flushes that producer before it commits
        # offsets, so a committed record's state is always durable.
        self._write_states(writes)
        for event in fresh + again:
            await stream.ack(event)
        await order.seek_gaps()

    @staticmethod
    def _write_states(writes: Iterable[tuple[Any, bytes, bytes]]) -> None:
        for table, key, value in writes:
            table[key] = value

    def _dead(self, outbox: Outbox, stage: str, reason: str, error_type: str, message: Any,
              run_key: str | None, record: bytes | None) -> None:
        self.stats.dead += 1
        letter = DeadLetter(stage=stage, reason=reason, error_type=error_type,
                            at=int(time.time() * 1000), run_key=run_key, topic=message.topic,
                            partition=message.partition, offset=message.offset, record=record)
        outbox.add(self.dlq_topic, run_key.encode() if run_key else message.key, codec.encode(letter))
        log.warning("dead letter (%s) %s[%s]@%s: %s", stage, message.topic, message.partition,
                    message.offset, reason)

    # --- normalizer -------------------------------------------------------------------------

    async def _normalizer_agent(self, stream: Any) -> None:
        await self._batches(stream, self._normalize_batch, (self.frames_topic, self.rerouted_topic))

    def _normalize_batch(self, batch: Sequence[Any], outbox: Outbox) -> list[tuple[Any, bytes, bytes]]:
        now = time.time()
        retention = self.tuning.retention
        runs: dict[bytes, RunNormalizer] = {}
        for event in batch:
            message = event.message
            raw = message.value
            try:
                frame = codec.decode(raw) if raw is not None else None
                if not isinstance(frame, ProviderFrame):
                    raise SchemaError(f"expected a ProviderFrame, got {type(frame).__name__}")
            except SchemaError as exc:
                self._dead(outbox, "decode", str(exc), type(exc).__name__, message,
                           _text(message.key), raw)
                continue
            run_key = self._run_key(message, frame, outbox)
            if run_key is None:
                continue  # re-keyed: the frame comes back on the rerouted topic
            run = runs.get(run_key)
            if run is None:
                run = _unpack(self.normalizer_table.get(run_key)) or RunNormalizer(
                    run_key.decode(), incarnation=f"{_source_tag(message.topic, self.frames_topic)}"
                                                  f"{message.offset}")
                runs[run_key] = run
            source = message.topic
            if run.already_applied(source, message.offset):
                continue
            run.mark_applied(source, message.offset)
            run.last_active = now
            self.stats.frames += 1
            translation = run.translate(frame)
            if translation.failure:
                self._dead(outbox, "translate", translation.failure, translation.error_type,
                           message, run.run_id, raw)
            for candidate in translation.events:
                origin = Origin(run.incarnation, run.next_position())
                outbox.add(self.ingest_topic, run_key, codec.encode(candidate),
                           [(Origin.HEADER, origin.encode())])
            self.stats.candidates += len(translation.events)
            for object_id in translation.claims:
                outbox.add(self.aliases_topic, object_id.encode(), run_key)
        return [(self.normalizer_table, key, _pack(run, run.last_active + retention))
                for key, run in runs.items()]

    def _run_key(self, message: Any, frame: ProviderFrame, outbox: Outbox) -> bytes | None:
        """The run id (as key bytes) a frame belongs to, or None when it was sent to that run's
        partition instead (a claimed object id, or a record without key)."""
        if message.topic != self.frames_topic:
            return message.key  # rerouted: keyed by the run id already
        key = message.key
        if key is None:
            # No key: the record landed on an arbitrary partition; move it to its run's.
            outbox.add(self.rerouted_topic, frame.run_key.encode(), message.value)
            return None
        claimed = self.aliases_table.get(key)
        if claimed is not None:
            run_id = _unpack(claimed)
            if run_id.encode() != key:
                outbox.add(self.rerouted_topic, run_id.encode(), message.value)
                return None
        return key

    # --- sequencer --------------------------------------------------------------------------

    async def _sequencer_agent(self, stream: Any) -> None:
        await self._batches(stream, self._sequence_batch, (self.ingest_topic,))

    def _sequence_batch(self, batch: Sequence[Any], outbox: Outbox) -> list[tuple[Any, bytes, bytes]]:
        now = time.time()
        runs: dict[bytes, RunSequence] = {}
        changed: set[bytes] = set()
        published: set[bytes] = set()
        for item in batch:
            message = item.message
            raw = message.value
            key = message.key
            try:
                event = codec.decode(raw) if raw is not None else None
                if not isinstance(event, ModelEvent):
                    raise SchemaError(f"expected a ModelEvent, got {type(event).__name__}")
            except SchemaError as exc:
                self._dead(outbox, "decode", str(exc), type(exc).__name__, message, _text(key), raw)
                continue
            if key is None or key != event.run_id.encode():
                self._dead(outbox, "sequence",
                           f"ingest record keyed {_text(key)!r} carries an event of run "
                           f"{event.run_id!r}; producers must key ingest records by run_id",
                           "KeyMismatch", message, event.run_id, raw)
                continue
            run = runs.get(key)
            if run is None:
                run = _unpack(self.sequencer_table.get(key)) or RunSequence.new(event.run_id,
                                                                                 event.tenant)
                runs[key] = run
            origin = Origin.decode(_headers(message).get(Origin.HEADER))
            step = run.step(event, message.offset, origin, now)
            if step.skipped == "applied":
                continue
            changed.add(key)
            if step.skipped:
                self.stats.skipped += 1
            if step.event is not None:
                outbox.add(self.events_topic, key, codec.encode(step.event))
                published.add(key)
                self.stats.events += 1
            if step.failure:
                record = codec.encode(step.event) if step.event is not None else raw
                self._dead(outbox, step.failure_stage, step.failure, step.error_type, message,
                           event.run_id, record)
        for key in published:
            outbox.add(self.runs_topic, key, codec.encode(runs[key].state))
        writes = []
        for key in changed:
            run = runs[key]
            expires = (run.terminal_since + self.tuning.retention
                       if run.terminal_since is not None else math.inf)
            writes.append((self.sequencer_table, key, _pack(run, expires)))
        return writes

    # --- aliases ----------------------------------------------------------------------------

    async def _aliases_agent(self, stream: Any) -> None:
        await self._batches(stream, self._alias_batch, (self.aliases_topic,), with_producer=False)

    def _alias_batch(self, batch: Sequence[Any], _outbox: None) -> list[tuple[Any, bytes, bytes]]:
        now = time.time()
        writes = []
        seen: dict[bytes, str] = {}
        for item in batch:
            object_id, run_id = item.message.key, _text(item.message.value)
            if object_id is None or not run_id:
                continue
            current = seen.get(object_id) or _unpack(self.aliases_table.get(object_id))
            if current is None:
                seen[object_id] = run_id
                writes.append((self.aliases_table, object_id, _pack(run_id, now + self.tuning.retention)))
            elif current != run_id:
                log.warning("provider object %s is claimed by run %s; run %s claimed it too and "
                            "keeps only its own frames (the first claim wins)",
                            _text(object_id), current, run_id)
        return writes

    # --- timers -----------------------------------------------------------------------------

    async def _release_expired(self) -> None:
        """Delete table keys whose retention passed, on the partitions this worker owns."""
        now = time.time()
        assigned = self.app.consumer.assignment()
        partitions = self.settings.partitions
        released = 0
        for table, source in ((self.normalizer_table, self.frames_topic),
                              (self.aliases_table, self.frames_topic),
                              (self.sequencer_table, self.ingest_topic)):
            owned = {tp.partition for tp in assigned if tp.topic == source}
            expired = [key for key, value in list(table.items())
                       if _expires_at(value) <= now
                       and partition_for_key(key, partitions) in owned]
            for key in expired:
                del table[key]
            released += len(expired)
            await asyncio.sleep(0)
        if released:
            await self.app.producer.flush()
            log.info("released the state of %d runs/aliases past their retention", released)

    async def _check_stalled(self) -> None:
        for order in list(self.orders):
            await order.check_stalled()

    async def _on_partitions_revoked(self, _sender: Any, revoked: Iterable[Any],
                                     **_kwargs: Any) -> None:
        # A partition's next session starts at its committed offset, wherever it is assigned.
        for order in self.orders:
            order.forget(revoked)

    async def _on_partitions_assigned(self, _sender: Any, assigned: Iterable[Any],
                                      **_kwargs: Any) -> None:
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
        except Exception:  # noqa: BLE001 - logged; the next tick tries again
            log.warning("%s failed; trying again at the next tick", check.__name__, exc_info=True)

    return guarded


def _source_tag(topic: str, frames_topic: str) -> str:
    return "f" if topic == frames_topic else "r"


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "replace")
