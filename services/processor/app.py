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

More on this module: docs/worker.md, ``services/processor/app.py``.
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
