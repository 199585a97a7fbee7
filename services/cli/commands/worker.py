"""``modelevents worker``: run the stream processor (the Faust app of services/processor/app.py).

Before anything starts, the pipeline's topics are verified (missing or mismatched topics stop the
command with the fix) and the processor's internal topics are created if needed; then the Faust
worker runs until SIGTERM or Ctrl-C, lets the batch in flight finish, commits and leaves its
consumer group, so another worker takes over its partitions at once.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import threading
from pathlib import Path

from modelevents.schemas.errors import ConfigError
from modelevents.services import logs
from modelevents.services.cli.kafka_options import (
    ENV_HELP,
    add_kafka_options,
    load_from_args,
    positive_float,
    positive_int,
    run_async,
)
from modelevents.services.kafka import topics
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.policy.hosted import load_policy_file
from modelevents.services.processor.health import HealthServer, WorkerHealth

log = logging.getLogger("modelevents.worker")

LOG_LEVELS = ("debug", "info", "warning", "error")



def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "worker",
        help="run the stream processor: frames → events and run state",
        description="Run one worker of the stream processor (faust-streaming): it feeds each "
                    "run's frames to the run's adapters, dedupes the events they give and those "
                    "on ingest, numbers each run's events 0, 1, 2, … and advances the run state "
                    "machine, publishing to events, runs and dlq. Start several workers with "
                    "the same app id to share the partitions; stop one with Ctrl-C or SIGTERM "
                    "(it finishes its batch and commits). The pipeline's topics must exist (`modelevents topics create`).",
        epilog=ENV_HELP + " MODELEVENTS_APP_ID (default modelevents) names the consumer group and "
                          "the tables; MODELEVENTS_RUN_RETENTION (seconds, default 3600); "
                          "MODELEVENTS_STATE_DIR (the default of --workdir).")
    add_kafka_options(p, partitions=True)
    p.add_argument("--app-id", default=None,
                   help="Faust app id: consumer group and table names (default: "
                        "$MODELEVENTS_APP_ID or modelevents)")
    p.add_argument("--workdir", type=Path, default=None, metavar="DIR",
                   help="directory for the worker's data (default: $MODELEVENTS_STATE_DIR, else "
                        "$XDG_STATE_HOME/modelevents/worker, i.e. ~/.local/state/modelevents/worker)")
    p.add_argument("--retention", type=positive_float, default=None, metavar="SECONDS",
                   help="release a run's working state this long after it ended (or went idle); "
                        "later events for it start it afresh (default: $MODELEVENTS_RUN_RETENTION "
                        "or 3600)")
    p.add_argument("--batch-size", type=positive_int, default=None, metavar="N",
                   help="records processed per batch (default 1000)")
    p.add_argument("--stream-buffer", type=positive_int, default=None, metavar="N",
                   help="records buffered for processing; past 80%% of it fetching pauses until "
                        "it drained to 40%% (default 16384, ~25 MB at most)")
    p.add_argument("--session-timeout", type=positive_float, default=None, metavar="SECONDS",
                   help="how long the group waits for a worker that died without leaving before "
                        "its partitions move to the others (default 30; at least 6)")
    p.add_argument("--stop-timeout", type=positive_float, default=30.0, metavar="SECONDS",
                   help="after SIGTERM or Ctrl-C, exit anyway (status 1) if the orderly stop has "
                        "not finished after this long — e.g. the broker went away; nothing is "
                        "lost, uncommitted records are processed again on the next start "
                        "(default 30)")
    p.add_argument("--policy", type=Path, default=None, metavar="FILE",
                   help="the policy file (JSON or YAML, the tool executor's): each tenant's "
                        "`hosted` section judges the sources of citations and hosted tools and "
                        "flags what breaks it (policy.violation; docs/hosted-tools.md). Default: "
                        "worker.policy of the configuration, else none (every verdict unknown)")
    p.add_argument("--loglevel", choices=LOG_LEVELS, default="info",
                   help="log level (default info)")
    health = p.add_argument_group("health endpoint (for probes; services/processor/health.py)")
    health.add_argument("--health-port", type=positive_int, default=None, metavar="PORT",
                        help="serve GET /healthz (alive), GET /readyz (joined the group, "
                             "tables recovered) and GET /metrics (Prometheus: counters, consumer "
                             "lag, modelevents_worker_runs{state}: the runs it owns by state) on "
                             "this port (default: no endpoint)")
    health.add_argument("--health-host", default="0.0.0.0", metavar="ADDRESS",
                        help="address of the health endpoint (default 0.0.0.0)")
    p.set_defaults(run=run)



def default_workdir() -> Path:
    """The worker's state directory without --workdir: the configuration's (worker.state_dir,
    MODELEVENTS_STATE_DIR), else $XDG_STATE_HOME/modelevents/worker."""
    from modelevents.services.cli.settings_tree import load_settings

    return load_settings().settings.worker.workdir


def worker_options(args: argparse.Namespace) -> dict[str, tuple[object, str]]:
    """The worker's options as settings of the tree."""
    return {"kafka.app_id": (args.app_id, "--app-id"),
            "worker.state_dir": (args.workdir, "--workdir"),
            "worker.run_retention_s": (args.retention, "--retention"),
            "worker.batch_size": (args.batch_size, "--batch-size"),
            "worker.stream_buffer": (args.stream_buffer, "--stream-buffer"),
            "worker.session_timeout_s": (args.session_timeout, "--session-timeout"),
            "worker.policy": (args.policy, "--policy")}


def run(args: argparse.Namespace) -> int:
    resolved = load_from_args(args, worker_options(args))  # an invalid one stops us here
    settings = PipelineSettings.from_kafka(resolved.settings.kafka)
    config = resolved.settings.worker
    # Faust is imported here, not at module level: `modelevents --help` and the other commands
    # should not pay for it.
    import faust

    from modelevents.services import processor

    tuning = processor.ProcessorTuning()
    given = {"retention": config.run_retention_s, "batch_size": config.batch_size,
             "stream_buffer": config.stream_buffer, "session_timeout": config.session_timeout_s}
    overrides = {name: value for name, value in given.items() if value is not None}
    try:
        tuning = dataclasses.replace(tuning, **overrides)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    policies = load_policy_file(config.policy) if config.policy is not None else None
    workdir = config.workdir
    try:
        workdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the work directory {workdir}: {exc.strerror or exc}; "
                          "choose another with --workdir or MODELEVENTS_STATE_DIR") from exc

    health = WorkerHealth()
    server = _health_server(health, args.health_host, args.health_port)
    try:
        checked = run_async(processor.prepare_topics(settings))
        for warning in run_async(topics.durability_warnings(settings)):
            log.warning("%s", warning)
        created = sorted(name for name, what in checked.items() if what == "created")

        app = processor.create_app(settings, workdir=workdir, tuning=tuning, policies=policies)
        health.app, health.stats = app, processor.stats_of(app)
        _tune_garbage_collector()
        announce = _announcement(settings, tuning, workdir, created)
        worker = _worker_class(faust.Worker, announce, args.stop_timeout, health)(
            app, loglevel=args.loglevel.upper(), quiet=True, redirect_stdouts=False,
            workdir=str(workdir))
        try:
            worker.execute_from_commandline()  # returns by SystemExit once the worker stopped
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            log.info("worker %s stopped (exit status %d)", settings.app_id, code)
            return code
        return 0
    finally:
        if server is not None:
            server.close()


def _health_server(health: WorkerHealth, host: str, port: int | None) -> HealthServer | None:
    if port is None:
        return None
    try:
        return HealthServer(health, host, port).start()
    except (OSError, OverflowError) as exc:  # OverflowError: a port beyond 65535
        reason = getattr(exc, "strerror", None) or exc
        raise ConfigError(f"cannot serve the health endpoint on {host}:{port}: {reason}; "
                          "choose another with --health-port") from exc


# Python's cyclic garbage collector, tuned for a worker: every record allocates a few hundred
# short-lived objects (Kafka records, Faust events, futures, candidate events) and almost none of
# them is cyclic, so the default young-generation threshold (700) collected dozens of times per
# batch, and each full collection walked every module, class and function loaded at start-up.
# Measured on the pipeline bench: 15% of the worker's CPU time per frame. What is loaded when the
# worker starts is frozen (never collected, never walked), and the young generation is collected
# after GC_THRESHOLD[0] allocations instead of 700; garbage cycles still go, a little later.
GC_THRESHOLD = (10_000, 20, 20)


def _tune_garbage_collector() -> None:
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLD)


# Faust, mode and aiokafka narrate every service start and stop at INFO; at --loglevel info the
# worker's own lines are what a user wants to read, the rest only from warnings up.
_CHATTY_LOGGERS = ("faust", "mode", "aiokafka")


def _worker_class(base: type, announce: list[str], stop_timeout: float,
                  health: WorkerHealth | None = None) -> type:
    reports = health or WorkerHealth()  # a name of its own: the methods below see it narrowed

    class Worker(base):
        _heartbeat: asyncio.Task[None] | None = None

        def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
            super().on_setup_root_logger(logger, level)
            logs.install(logger)  # json mode: Faust replaced the root's handlers
            if level > logging.DEBUG:
                for name in _CHATTY_LOGGERS:
                    logging.getLogger(name).setLevel(max(level, logging.WARNING))

        async def on_execute(self) -> None:
            await super().on_execute()
            self._heartbeat = asyncio.ensure_future(reports.run_heartbeat())
            log.info("worker %s starting: joining the consumer group, recovering the tables from "
                     "their changelogs ...", self.app.conf.id)

        async def on_startup_finished(self) -> None:
            await super().on_startup_finished()
            reports.started = True  # the first recovery is complete: /readyz says ready
            for line in announce:
                log.info("%s", line)

        def on_worker_shutdown(self) -> None:
            super().on_worker_shutdown()
            reports.stopping = True
            if self._heartbeat is not None:
                self._heartbeat.cancel()
            log.info("worker %s stopping: finishing the batch in flight, committing, leaving the "
                     "consumer group ...", self.app.conf.id)
            _exit_if_stop_hangs(self.app.conf.id, stop_timeout)

    return Worker


def _exit_if_stop_hangs(app_id: str, timeout: float) -> None:
    """Faust's orderly stop waits without a limit (for a batch whose outputs the broker does not
    acknowledge, for a group coordinator that went away). Processing is at-least-once with
    idempotent outputs, so leaving without the final commit loses nothing: the next start
    processes the uncommitted records again. A daemon thread, so a timely stop is not held up."""

    def force_exit() -> None:
        log.warning("worker %s did not stop within %.0f s; exiting without the final commit "
                    "(the next start processes the uncommitted records again)", app_id, timeout)
        logging.shutdown()
        os._exit(1)

    timer = threading.Timer(timeout, force_exit)
    timer.daemon = True
    timer.start()


def _announcement(settings, tuning, workdir: Path, created: list[str]) -> list[str]:
    lines = [
        f"worker {settings.app_id} ready: Kafka {settings.bootstrap_servers}, topics "
        f"{settings.topic_prefix}{{frames,ingest,events,runs,dlq}} with {settings.partitions} "
        f"partitions, tables in memory (recovered from their changelogs), run state released "
        f"{tuning.retention:.0f} s after a run ends, batches of up to {tuning.batch_size} records, "
        f"data in {workdir}",
    ]
    if created:
        lines.append(f"created the worker's internal topics: {', '.join(created)}")
    lines.append("stop with Ctrl-C or SIGTERM: the batch in flight finishes and is committed")
    return lines
