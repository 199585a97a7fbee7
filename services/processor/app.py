"""The stream processor: a Faust app that turns provider frames into ordered events and run state.

Topology (``P`` = ``settings.partitions`` for every topic, so partition ``p`` of each topic and
changelog belongs to the same worker: Faust assigns equally partitioned topics together)::

    frames ──────────────────┐                       ┌─▶ events, runs
    <app>-frames-rerouted ───┼─▶ run agent (table) ──┼─▶ <app>-frames-rerouted (re-keyed frames)
    ingest ──────────────────┘                       ├─▶ <app>-run-aliases ──▶ aliases (table)
                                                     └─▶ dlq

- **run agent** (``frames`` + ``<app>-frames-rerouted`` + ``ingest``): one handler owns each
  run's state — the run's adapters (``services/run_logic/normalizer.py``) and its numbering and state
  machine (``services/run_logic/sequencer.py``), one value per run in the ``run`` table. A frame is
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
lands on the run's partition behind the run's own frames (services/gateway/routes/webhooks.py). What
remains is an object no gateway knows yet: another gateway's run that ``runs`` does not show
yet, or frames from a producer of its own.

Tenancy: a run belongs to the tenant of its first event. A frame or ``ingest`` record of another
tenant that reaches it (by its key, or by the run's claim of an object it names) is not applied:
it is dead-lettered, stage ``resolve``, error type ``TenantMismatch``.

Delivery: at-least-once with idempotent outputs (Faust's exactly_once has open duplicate bugs).
Each agent takes records in batches (``take_batches`` in ``faust/transport.py``: what is waiting, up to
``batch_size``, or what arrives within ``batch_within`` of a batch's first record) and, per
batch: computes; sends the outputs, and each touched run's state as a record of its table's
changelog (one per run and batch: the adapters and the numbering together, so they never
disagree), through an idempotent producer (acks=all), grouped into one record batch per
partition (``services/processor/outbox.py``), and waits for every acknowledgement; then sets the tables'
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
around rebalances and at start-up; ``services/processor/faust/ordering.py`` restores it (and says
how), and ``services/processor/faust/transport.py`` takes Faust's per-record tasks and waits out of
the path from the consumer to the agent (``BatchingConsumer``, ``take_batches``);
``services/processor/outbox.py`` sends outputs.

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
and how values of earlier versions are read, is ``services/processor/table_values.py``'s. A timer
releases, on the partitions this worker owns: a run's adapters and an alias after
``retention`` seconds without activity, and a run's numbering and state ``retention`` seconds
after the run became terminal. State is thus bounded by the runs active (or terminal) within one
retention period times a per-run bound (``services/run_logic/normalizer.py``, ``services/run_logic/sequencer.py``).
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
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import faust
import mode
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from modelevents.schemas.errors import ConfigError
from modelevents.services.kafka import topics
from modelevents.services.kafka.clients import make_admin, start_client
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import changelog_topics, internal_topics
from modelevents.services.policy.hosted import HostedPolicy
from modelevents.services.processor.agents import Processor
from modelevents.services.processor.faust.monitor import QuietMonitor
from modelevents.services.processor.faust.transport import transport
from modelevents.services.processor.stats import Stats
from modelevents.services.processor.tuning import ProcessorTuning

__all__ = ["ProcessorTuning", "broker_credentials", "create_app", "prepare_topics", "stats_of"]

_TOPIC_ALREADY_EXISTS = 36


async def prepare_topics(settings: PipelineSettings) -> dict[str, str]:
    """Make sure a worker can start: the pipeline's topics exist and match (else ConfigError with
    the fix), the processor's internal topics exist (created here when missing), and every
    internal topic and changelog that exists has ``settings.partitions`` partitions.

    Returns {full topic name: "verified" | "created"}.
    """
    result = await topics.verify_topics(settings)
    internal = list(internal_topics(settings).values())
    changelogs = list(changelog_topics(settings).values())
    admin = await start_client(make_admin(settings), settings)
    try:
        counts = await _partition_counts(admin, internal + changelogs)
        missing = [name for name in internal if counts[name] is None]
        if missing:
            response = await admin.create_topics(
                [NewTopic(name, settings.partitions, settings.replication_factor,
                          topic_configs=topics.replication_configs(settings)) for name in missing])
            for name, code, message in (e[:3] for e in response.topic_errors):
                if code not in (0, _TOPIC_ALREADY_EXISTS):
                    raise topics.creation_error(settings, name, code, message)
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


def broker_credentials(settings: PipelineSettings) -> faust.types.auth.CredentialsT | None:
    """Faust's form of ``settings.security``: what its consumers and producers connect with (its
    ``kafka://`` URLs carry no protocol; the credentials decide SASL and TLS)."""
    security = settings.security
    if security.uses_sasl:
        return faust.SASLCredentials(username=security.sasl_username,
                                     password=security.sasl_password,
                                     ssl_context=security.ssl_context(),
                                     mechanism=security.sasl_mechanism)
    if security.uses_tls:
        return faust.SSLCredentials(security.ssl_context())
    return None


def create_app(settings: PipelineSettings, *, workdir: str | Path | None = None,
               tuning: ProcessorTuning | None = None,
               policies: Mapping[str, HostedPolicy] | None = None) -> faust.App:
    """A new Faust app running the run agent and the alias agent.

    Nothing is declared at module level: each call builds an independent app (tests run several).
    ``workdir`` holds Faust's data directory (default: ``./<app id>-data``). The pipeline's topics
    must exist; the worker command verifies them (and creates the internal ones) first.
    ``policies`` (tenant → its hosted policy; None: no policy file) judge the sources of
    citations and hosted tools (services/run_logic/source_trust.py).
    """
    tuning = tuning or ProcessorTuning()
    datadir = Path(workdir or ".") / f"{settings.app_id}-data"
    app = faust.App(
        settings.app_id,
        broker=[f"kafka://{server}" for server in settings.bootstrap_servers.split(",")],
        broker_credentials=broker_credentials(settings),
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
    app.transport = transport(app, tuning.fetch_max_wait)
    _STATS[app] = Processor(app, settings, tuning, policies).stats
    return app


# Each app's counters, for GET /metrics (services/processor/health.py reads them at scrape time: no
# per-event cost beyond the increments the progress line already makes).
_STATS: weakref.WeakKeyDictionary[Any, Stats] = weakref.WeakKeyDictionary()


def stats_of(app: Any) -> Stats | None:
    return _STATS.get(app)
