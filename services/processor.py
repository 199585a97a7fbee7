"""The stream processor: a Faust app that turns provider frames into ordered events and run state.

Topology (``P`` = ``settings.partitions`` for every topic, so partition ``p`` of each topic and
changelog belongs to the same worker: Faust assigns equally partitioned topics together)::

    frames ──────────────────┐                       ┌─▶ events, runs
    <app>-frames-rerouted ───┼─▶ run agent (table) ──┼─▶ <app>-frames-rerouted (re-keyed frames)
    ingest ──────────────────┘                       ├─▶ <app>-run-aliases ──▶ aliases (table)
                                                     └─▶ dlq

- **run agent** (``frames`` + ``<app>-frames-rerouted`` + ``ingest``): one handler owns each
  run's state — the run's adapters (``services/normalizer.py``) and its numbering and state
  machine (``services/sequencer.py``), one value per run in the ``run`` table. A frame is
  decoded (undecodable → DeadLetter stage ``decode``), its run resolved, and fed to the run's
  adapters; the candidate events it gives are sequenced at once: deduped, numbered 0, 1, 2, …
  per run, applied to the run state machine, and published to ``events``, with the run's latest
  RunState on ``runs`` (once per batch). ``ingest`` carries the candidate events that do not come
  from frames — a tool result, an approval, an external producer — keyed by run id; they are
  sequenced the same way, by the same handler, so one run's state is never mutated by two
  handlers and one run's events have one producer (their ``seq`` order is the log's order).
  Illegal transitions are published and also dead-lettered (stage ``apply``); undecodable
  records and unknown kinds go to ``dlq`` only.
- **aliases** (``<app>-run-aliases``): records which run claimed a provider object id, and
  dead-letters (stage ``resolve``) a claim that splits an object's frames between two runs.

Earlier versions sent every candidate event through ``ingest`` to a second agent; an ``ingest``
record carrying their ``modelevents-origin`` header is such a candidate, whose frame the run
agent normalizes itself, so it is skipped.

Run key resolution. A frame's Kafka key is its run key: the run id when the sender knows the run
(a stream the gateway started), or a provider object id (``resp_…``, ``msg_…``, an interaction
id) when that is all it knows (a webhook, a background poll). When a run's ``run.started``
names a provider object id, the run agent claims it: a record keyed by the object id, valued
with the run id, on ``<app>-run-aliases``. Keyed by the object id, the claim lands on the same
partition as every frame keyed by that id, so the aliases table (keyed by object id) is local
to the worker that reads those frames. A frame whose key is a claimed object id is re-keyed: its
record goes, unchanged, to ``<app>-frames-rerouted`` keyed by the run id, which puts it on the
run's partition, where the run agent feeds it to the run's own adapters — the adapter then
dedupes across paths (a webhook repeating what the stream said adds nothing). The first claim
of an object id wins, and a claim lasts ``retention`` seconds.

A frame keyed by an object id that no run has claimed (yet, or any more) starts a run of that
name. So a webhook or a poll that overtakes the stream announcing its object — its frame is
processed before the stream's ``run.started`` is — makes a run named by the object id, with the
events of what it carried (a webhook notification carries none, a poll the whole object), and
that run is not merged into the stream's afterwards (its events are published; a run's events
are never taken back). When the stream's run then claims the id, the claim succeeds — frames
keyed by the id from then on go to the stream's run, which dedupes them against what it said —
and the split is reported: a DeadLetter, stage ``resolve``, error type ``UnmergedRun``, keyed by
the claiming run, naming both runs. A claim of an id that another run claimed first is reported
the same way (``ClaimConflict``); the second run keeps only its own frames.

The gateway narrows that race at the edge: a webhook naming an object of a run it knows (a call
it made, or a run whose state on ``runs`` names the object) is keyed by that run's id, so it
lands on the run's partition behind the run's own frames (services/gateway/webhooks.py). What
remains is an object no gateway knows yet: another gateway's run that ``runs`` does not show
yet, or frames from a producer of its own.

Tenancy: a run belongs to the tenant of its first event. A frame or ``ingest`` record of another
tenant that reaches it (by its key, or by the run's claim of an object it names) is not applied:
it is dead-lettered, stage ``resolve``, error type ``TenantMismatch``.

Delivery: at-least-once with idempotent outputs (Faust's exactly_once has open duplicate bugs).
Each agent takes records in batches (``faust_support.take_batches``: what is waiting, up to
``batch_size``, or what arrives within ``batch_within`` of a batch's first record) and, per
batch: computes; sends the outputs, and each touched run's state as a record of its table's
changelog (one per run and batch: the adapters and the numbering together, so they never
disagree), through an idempotent producer (acks=all), grouped into one record batch per
partition (``services/outbox.py``), and waits for every acknowledgement; then sets the tables'
in-memory values and acks the batch's records. (The agents write the changelogs themselves:
through Faust's table, each write cost a future and a trip through Faust's producer buffer.)
Faust commits only acked offsets, so a committed record's state is durable, and its outputs
were. A crash or SIGKILL anywhere leaves
each run's state at the end of some batch whose outputs are durable; the uncommitted records
are delivered again and processed again from that state, which yields the same events with the
same ``seq`` (duplicates a consumer drops by ``(run_id, seq)``), never a new number and never a
gap. A stop (SIGTERM, Ctrl-C) or a rebalance lets the batches in flight finish: Faust waits for
the acks before it commits and hands a partition over (``modelevents worker`` leaves without the
final commit if that hangs, which loses nothing). All this assumes each source partition is
processed in offset order without holes, which faust-streaming 0.15.3 does not quite guarantee
around rebalances and at start-up; ``services/faust_support.py`` restores it (and says how),
and also takes Faust's per-record tasks and waits out of the path from the consumer to the agent
(``BatchingConsumer``, ``take_batches``); ``services/outbox.py`` sends outputs.

Pipelining. The run agent computes batch ``n + 1`` while the broker acknowledges batch ``n``'s
outputs: a batch's sending, table writes and acks run in a task of their own, chained after
the previous batch's (so outputs reach the log in batch order, and states and acks are written
in order), and at most one batch waits behind the one being sent. A batch is computed with a
turn of the event loop every 64 records, so that acknowledgements and fetched records are taken
in meanwhile (the batch before completes, the batch after fills). Since batch ``n``'s states
are not in the table yet when batch ``n + 1`` is computed, the agent works on a cache of run
states (:class:`_WorkingState`): the in-memory state at the end of the last batch computed,
snapshotted (encoded) for the table at the end of each batch. A cached state that neither the
batch being computed nor a batch in flight touched equals its table value and may be evicted
(beyond ``cached_runs``); the cache is emptied at a rebalance (after Faust waited for the
batches in flight), since another worker may change the states of a partition this worker gave
up.

State. The store is ``memory://``: RocksDB (rocksdict) is not installed with this project, and
the changelogs recover the tables when a worker starts or takes over a partition. Recovery reads
a changelog partition from its start, so the changelogs are compacted eagerly (small segments)
to keep that proportional to the live runs. Standby replicas are off: with an in-memory store
each standby would cost a worker the memory of partitions it does not process. Values are
plain data (JSON trees naming only the adapters' and schemas' own classes, never pickles)
behind two times (epoch seconds) at which parts of the value may be released; their layout,
and how values of earlier versions are read, is ``services/table_values.py``'s. A timer
releases, on the partitions this worker owns: a run's adapters and an alias after
``retention`` seconds without activity, and a run's numbering and state ``retention`` seconds
after the run became terminal. State is thus bounded by the runs active (or terminal) within one
retention period times a per-run bound (``services/normalizer.py``, ``services/sequencer.py``).
Measured (bench/pipeline.py (d), a small Chat Completions run, default retention): ~3.1–3.4 KB
of worker RSS per run held (its table value, ~2–3 KB of encoded adapters, numbering and RunState;
its alias; their keys, and the allocator's slack), on top of ~120–140 MB for the worker itself,
its ``cached_runs`` decoded states (~8 KB each) and its stream buffer — 171–208 MB with 20,000
runs, 433–448 MB with 100,000. An event for a run whose terminal state was released starts the run
afresh at ``seq`` 0: choose a retention longer than the latest webhook or poll you expect after
a run ends.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from dataclasses import replace as dataclass_replace
from itertools import islice
from pathlib import Path
from typing import Any

import faust
import mode
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from modelevents.schemas import codec
from modelevents.schemas.errors import ConfigError, SchemaError
from modelevents.schemas.events import Envelope, Error, ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.limits import MAX_RECORD_BYTES
from modelevents.schemas.pieces import IncompletePieces, join_frames
from modelevents.schemas.run_state import DeadLetter
from modelevents.services import faust_support, topics
from modelevents.services.faust_support import (
    LogStarts,
    PartitionOrder,
    QuietMonitor,
    RawRecords,
    RecoveryWatch,
    RunTable,
    take_batches,
)
from modelevents.services.kafka_io import partition_for_key, start_client, start_producer
from modelevents.services.normalizer import RunNormalizer
from modelevents.services.outbox import Outbox, OutputProducer
from modelevents.services.run_machine import RunMachine
from modelevents.services.sequencer import RunSequence
from modelevents.services.settings import PipelineSettings
from modelevents.services.table_values import (
    RunWork,
    UnreadableState,
    expiries,
    pack_alias,
    unpack_alias,
    unpack_run,
)

__all__ = ["ProcessorTuning", "create_app", "prepare_topics", "internal_topics", "changelog_topics"]

log = logging.getLogger("modelevents.processor")

TABLES = ("run", "aliases")
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


@dataclass(frozen=True)
class ProcessorTuning:
    """Knobs with defaults that suit one worker on a small machine."""

    batch_size: int = 1000  # records per batch at most
    # Seconds a batch waits, after its first record, for more. Records that are waiting are taken
    # at once; under load batches fill while the previous one is being sent, so this only bounds
    # how long a lone record waits for company (latency at low load).
    batch_within: float = 0.01
    # Seconds the broker may hold a fetch that finds nothing new (see BatchingConsumer).
    fetch_max_wait: float = 0.025
    # Run states kept decoded between batches (beyond those of the batches in flight): enough
    # for the runs of the last couple of batches; each costs ~8 KB decoded (~2–3 KB in the table).
    cached_runs: int = 2_000
    retention: float = 3600.0  # seconds before idle/terminal run state is released
    sweep_interval: float | None = None  # seconds between releases; default retention/4, ≤ 60 s
    stats_interval: float = 5.0  # seconds between progress log lines (0: none)
    # A worker that dies without leaving its group (SIGKILL, a lost host) keeps its partitions
    # this long; Kafka's 45 s default (Faust's 60 s) is a long pause for a stream.
    session_timeout: float = 30.0
    # Records Faust buffers for the run agent. Beyond 80% of it Faust stops fetching the
    # partitions concerned until it drained to 40%, and aiokafka then sends no fetch at all for
    # 100 ms (see BatchingConsumer): sized to hold one fetch of a few partitions (1 MiB each,
    # ~3,000 frames), four times Faust's default. Costs up to ~25 MB while a backlog fills it.
    stream_buffer: int = 16_384

    def __post_init__(self) -> None:
        if (self.batch_size < 1 or self.batch_within <= 0 or self.retention <= 0
                or self.session_timeout < 6 or self.cached_runs < 0 or self.fetch_max_wait <= 0
                or self.stream_buffer < 2):
            raise ValueError("batch_size ≥ 1, batch_within > 0, fetch_max_wait > 0, retention > 0, "
                             "cached_runs ≥ 0, stream_buffer ≥ 2 and session_timeout ≥ 6 s are "
                             "required")

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
    """A new Faust app running the run agent and the alias agent.

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
        monitor=QuietMonitor(),
        # An agent that raises has a batch it will never ack, so the commits behind it would
        # stall: stop the worker (exit status 1) and let the next start redeliver the batch,
        # rather than restart the agent in place.
        agent_supervisor=mode.CrashingSupervisor,
        autodiscover=False,
        datadir=str(datadir),
        stream_buffer_maxsize=tuning.stream_buffer,  # see ProcessorTuning
    )
    app.transport = faust_support.transport(app, tuning.fetch_max_wait)
    _STATS[app] = _Processor(app, settings, tuning).stats
    return app


# Each app's counters, for GET /metrics (services/worker_health.py reads them at scrape time: no
# per-event cost beyond the increments the progress line already makes).
_STATS: weakref.WeakKeyDictionary[Any, _Stats] = weakref.WeakKeyDictionary()


def stats_of(app: Any) -> _Stats | None:
    return _STATS.get(app)


# --- table values (their layout: services/table_values.py) -------------------------------------


def _headers(message: Any) -> dict[str, bytes]:
    headers = message.headers or ()
    return dict(headers.items() if isinstance(headers, dict) else headers)


class _WorkingState:
    """The run agent's view of the ``run`` table while batches are in flight (see "Pipelining").

    ``get`` gives the cached state of a run, else the table's. A state that the batch being
    computed got (``get`` … ``computed``) or a batch in flight changed (``computed`` …
    ``release``) is newer than its table value, or may become so, and stays cached; the others
    equal their table values and are evicted oldest first beyond ``limit``.
    """

    def __init__(self, table: Any, limit: int) -> None:
        self.table = table
        self.limit = limit
        self.cache: dict[bytes, RunWork] = {}
        self.in_flight: dict[bytes, int] = {}  # key → batches in flight that changed it
        self.computing: set[bytes] = set()  # keys the batch being computed got

    def get(self, key: bytes) -> RunWork:
        work = self.cache.pop(key, None)  # popped and put back: most recently used last
        if work is None:
            try:
                work = unpack_run(self.table.lookup(key)) or RunWork()
            except UnreadableState as exc:
                work = RunWork(unreadable=str(exc))
        self.cache[key] = work
        self.computing.add(key)
        return work

    def computed(self, changed: Iterable[bytes]) -> None:
        """The batch being computed is done: the states it changed are held until its writes
        are done (:meth:`release`)."""
        for key in changed:
            self.in_flight[key] = self.in_flight.get(key, 0) + 1
        self.computing.clear()

    def release(self, keys: Iterable[bytes]) -> None:
        for key in keys:
            left = self.in_flight[key] - 1
            if left:
                self.in_flight[key] = left
            else:
                del self.in_flight[key]
        excess = len(self.cache) - self.limit
        if excess > 0:
            busy = self.busy
            oldest = islice(self.cache, excess + len(self.in_flight) + len(self.computing))
            for key in [k for k in oldest if not busy(k)][:excess]:
                del self.cache[key]

    def busy(self, key: bytes) -> bool:
        return key in self.in_flight or key in self.computing

    def forget(self, key: bytes) -> None:
        self.cache.pop(key, None)

    def clear(self) -> None:
        assert not self.in_flight and not self.computing, "cleared with batches in flight"
        self.cache.clear()


# --- the agents -------------------------------------------------------------------------------


class _Stats:
    def __init__(self) -> None:
        self.frames = self.candidates = self.ingested = self.events = self.dead = self.skipped = 0
        self.batches = 0  # of the run agent
        self.reported = (0, 0, 0, 0, 0)

    def line(self) -> str | None:
        now = (self.frames, self.candidates, self.ingested, self.events, self.dead)
        if now == self.reported:
            return None
        self.reported = now
        return (f"normalized {self.frames} frames into {self.candidates} candidate events, read "
                f"{self.ingested} from ingest; sequenced {self.events} events "
                f"({self.skipped} duplicates dropped) in {self.batches} batches; "
                f"{self.dead} dead letters")


_TableWrite = tuple[Any, bytes, bytes | None]  # (table, key, value; None: deleted)


@dataclass
class _Computed:
    """What computing a batch gave, for its second half (send, write, ack)."""

    outbox: Outbox
    writes: list[_TableWrite]
    records: list[Any]  # to ack
    held: list[bytes]  # run keys held in the working state until the writes are done
    # Pieces of a delivery still incomplete: not acked with this batch (acked with the batch that
    # completes them; a crash before that delivers them again, from the first piece).
    pending: list[Any] = dataclass_field(default_factory=list)
    completed: list[Any] = dataclass_field(default_factory=list)  # earlier batches' pieces to ack


class _Lane:
    """The order in which one agent's outputs reach the log: each batch's second half (send,
    write, ack) and the release timer's table writes, in tasks chained one after the other.

    Chained, a write reaches its changelog after every write queued before it, whichever task
    queued it: the release timer's deletion of a run's value cannot overtake, or be overtaken
    by, a batch's new value for the same run.
    """

    def __init__(self) -> None:
        self.output: OutputProducer | None = None  # the agent's outputs producer, while it runs
        self.in_flight: list[asyncio.Task] = []  # oldest first

    def chain(self, work: Awaitable[None], on_done: Callable[[asyncio.Task], None]) -> asyncio.Task:
        previous = self.in_flight[-1] if self.in_flight else None

        async def after_previous() -> None:
            if previous is not None:
                await previous  # a failure there fails this one too: nothing overtakes it
            await work

        task = asyncio.ensure_future(after_previous())
        task.add_done_callback(on_done)
        self.in_flight.append(task)
        return task

    async def wait(self, keep: int) -> None:
        """Until at most ``keep`` tasks are in flight."""
        while len(self.in_flight) > keep:
            await self.in_flight.pop(0)

    async def drain(self) -> None:
        """Until every task is done, without raising what one raised (its callback reported it)."""
        if self.in_flight:
            await asyncio.wait(self.in_flight)
        self.in_flight.clear()


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

        self.run_table = table("run", "run id → RunWork (the run's adapters, seq, dedupe, RunState)")
        self.aliases_table = table("aliases", "provider object id → run id that claimed it")
        self.working = _WorkingState(self.run_table, tuning.cached_runs)
        # Tables are written through the agents' outbox, not Faust's producer (see _write).
        self.changelogs = changelog_topics(settings)
        self.run_lane, self.alias_lane = _Lane(), _Lane()
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
        app.timer(PartitionOrder.STALL_CHECK_S)(_guarded(self._check_stalled))
        app.timer(RecoveryWatch.CHECK_S)(_guarded(RecoveryWatch(app).check))
        app.timer(tuning.sweep_every)(_guarded(self._release_expired))
        if tuning.stats_interval:
            app.timer(tuning.stats_interval)(_guarded(self._log_stats))

    # --- shared batch machinery -------------------------------------------------------------

    async def _batches(self, stream: Any, lane: _Lane,
                       compute: Callable[[Sequence[Any], Outbox], Awaitable[_Computed]],
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

    def _write(self, outbox: Outbox, writes: list[_TableWrite]) -> None:
        """Queue table writes (None: a deletion) as changelog records on a batch's outbox: sent,
        and acknowledged, with its outputs. ``RunTable.store_written`` sets the in-memory values
        after."""
        changelogs = self.changelogs
        for table, key, value in writes:
            outbox.add(changelogs[table.name], key, value)

    async def _finish(self, order: PartitionOrder, computed: _Computed) -> None:
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

    async def _run_batch(self, batch: Sequence[Any], outbox: Outbox) -> _Computed:
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
        writes: list[_TableWrite] = [
            (self.run_table, key, self._pack(key, work, outbox, published))
            for key, work in changed.items()]
        for key in published:
            sequence = changed[key].sequence
            assert sequence is not None, "a run published events, so it has a sequence"
            outbox.add(self.runs_topic, key, codec.encode(sequence.state))
        self._write(outbox, writes)
        self.working.computed(changed)
        return _Computed(outbox, writes, [], list(changed), self._pending, self._completed)

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
        translation = run.translate(frame)
        if translation.failure:
            self._dead(outbox, "translate", translation.failure, translation.error_type,
                       message, run.run_id, raw, frame.tenant, frame.provider)
        for candidate in translation.events:
            self._sequence(work, run_key, candidate, None, None, message, outbox, published, now)
        self.stats.candidates += len(translation.events)
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
        step = run.step(event, now, ingest_offset)
        if step.skipped == "applied":
            return False
        if step.skipped:
            self.stats.skipped += 1
        if step.event is not None:
            outbox.add(self.events_topic, key, self._event_record(run, step.event))
            published.add(key)
            self.stats.events += 1
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

    async def _alias_batch(self, batch: Sequence[Any], outbox: Outbox) -> _Computed:
        now = time.time()
        writes: list[_TableWrite] = []
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
        return _Computed(outbox, writes, [], [])

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

        The writes go through the table's agent's lane (:class:`_Lane`), chained after its
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

    def _expired(self, table: Any, keys: Iterable[bytes]) -> list[_TableWrite]:
        """The writes that release what is due among ``keys``, already set in memory."""
        now = time.time()
        partitions = self.settings.partitions
        owned = {tp.partition for tp in self.app.consumer.assignment()
                 if tp.topic == self.frames_topic}
        retention = self.tuning.retention
        writes: list[_TableWrite] = []
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

    async def _check_stalled(self) -> None:
        for order in list(self.orders):
            await order.check_stalled()

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
