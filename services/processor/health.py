"""The worker's health endpoint for probes (``modelevents worker --health-port PORT``).

Faust's own web server stays off (``web_enabled=False`` in services/processor/app.py: it would serve
Faust's whole web surface). This is a small stdlib HTTP server in a daemon thread, independent
of the worker's event loop, so it answers while the worker checks its topics, recovers its
tables or runs a long batch:

``GET /healthz``  liveness: 200 while the process runs and its event loop is not stuck. The loop
                  beats every second (:meth:`WorkerHealth.run_heartbeat`); a loop that has not
                  beaten for ``stall_s`` seconds (default 120: a batch never holds it that long)
                  is 503 ``event loop stalled``, so that the orchestrator restarts the worker.
``GET /readyz``   readiness: 200 once the worker has joined its consumer group and recovered its
                  tables from their changelogs (the moment it logs "worker … ready"); 503 before
                  that, while it recovers tables again after a rebalance, and once it is stopping.

Both answer a small JSON object: ``{"status": "ok" | "starting" | "recovering" | "stopping" |
"stalled", "detail": …}``.

More on this module: docs/worker.md, ``services/processor/health.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

log = logging.getLogger("modelevents.worker.health")


class WorkerHealth:
    """What the probes see; set from the worker's event loop, read from the server's thread
    (plain attribute reads and writes: atomic in CPython)."""

    def __init__(self, stall_s: float = 120.0) -> None:
        self.stall_s = stall_s
        self.started = False  # the first recovery completed: the worker processes records
        self.stopping = False
        self.app: Any = None  # the Faust app, for its recovery and rebalancing state
        self.stats: Any = None  # the processor's counters (processor.stats_of), for /metrics
        self._beat: float | None = None  # monotonic time of the loop's last heartbeat

    # --- set by the worker --------------------------------------------------------------------

    def beat(self) -> None:
        self._beat = time.monotonic()

    async def run_heartbeat(self, every: float = 1.0) -> None:
        """Beat from the event loop until cancelled (a task of the worker)."""
        while True:
            self.beat()
            await asyncio.sleep(every)

    # --- read by the probes -------------------------------------------------------------------

    def liveness(self) -> tuple[int, dict[str, str]]:
        if self._beat is not None and not self.stopping:  # a stop ends the heartbeat
            quiet = time.monotonic() - self._beat
            if quiet > self.stall_s:
                return 503, {"status": "stalled",
                             "detail": f"the event loop has not run for {quiet:.0f} s"}
        return 200, {"status": "ok", "detail": "alive"}

    def readiness(self) -> tuple[int, dict[str, str]]:
        if self.stopping:
            return 503, {"status": "stopping",
                         "detail": "finishing the batch in flight and leaving the group"}
        if not self.started:
            return 503, {"status": "starting",
                         "detail": "joining the consumer group, recovering the tables"}
        app = self.app
        recovery = getattr(getattr(app, "tables", None), "recovery", None)
        if getattr(recovery, "in_recovery", False) or getattr(app, "rebalancing", False):
            return 503, {"status": "recovering",
                         "detail": "rebalancing: recovering the tables of the partitions taken"}
        return 200, {"status": "ok", "detail": "processing"}


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            status, body = self.server.health.liveness()
        elif path == "/readyz":
            status, body = self.server.health.readiness()
        elif path == "/metrics":
            self._answer(200, self.server.metrics_text(), CONTENT_TYPE_LATEST)
            return
        else:
            status, body = 404, {"status": "not_found", "detail": "the worker serves GET "
                                 "/healthz, GET /readyz and GET /metrics"}
        self._answer(status, json.dumps(body).encode(), "application/json")

    def _answer(self, status: int, data: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_HEAD = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("health: " + format, *args)


# (processor counter, metric name without _total, help)
_COUNTERS = (
    ("frames", "modelevents_worker_frames", "Provider frames normalized"),
    ("candidates", "modelevents_worker_candidate_events", "Events the adapters produced"),
    ("ingested", "modelevents_worker_ingested", "Records read from ingest"),
    ("events", "modelevents_worker_events", "Events sequenced and written to events"),
    ("skipped", "modelevents_worker_duplicates_dropped", "Duplicate events dropped"),
    ("dead", "modelevents_worker_dead_letters", "Records written to dlq"),
    ("batches", "modelevents_worker_batches", "Batches of the run agent"),
)


# The labelled counters: (Stats field, metric name without _total, help, labels).
_LABELLED = (
    ("frames_by", "modelevents_worker_frames_by_api", "Provider frames normalized, by provider "
     "and API", ("provider", "api")),
    ("events_by", "modelevents_worker_events_by_kind", "Events written to events, by provider, "
     "API and kind (kind=\"unknown\": provider events the adapter does not know)",
     ("provider", "api", "kind")),
    ("dead_by", "modelevents_worker_dead_letters_by_reason", "Records written to dlq, by stage "
     "and error type (docs/operations.md lists each and what to do)", ("stage", "error_type")),
    ("states_entered", "modelevents_worker_run_states_entered", "Runs that moved into a state "
     "(each time it moves: a finished run entered its terminal state once)", ("state",)),
)


class _StatsCollector:
    """The processor's counters (``WorkerHealth.stats``), read when scraped."""

    def __init__(self, health: WorkerHealth) -> None:
        self.health = health

    def collect(self) -> Any:
        stats = self.health.stats
        if stats is None:  # before the app exists
            return
        for field, name, text in _COUNTERS:
            yield CounterMetricFamily(name, text, value=getattr(stats, field))
        for field, name, text, labels in _LABELLED:
            family = CounterMetricFamily(name, text, labels=labels)
            for key, value in getattr(stats, field).copy().items():
                family.add_metric(key if isinstance(key, tuple) else (key,), value)
            yield family
        lag = GaugeMetricFamily(
            "modelevents_worker_consumer_lag",
            "Records on an input partition of this worker not processed yet (the log's end "
            "minus the next offset due), at the last partition check (every second)",
            labels=("topic", "partition"))
        for (topic, partition), value in stats.lag.copy().items():
            lag.add_metric((topic, str(partition)), value)
        yield lag
        runs = GaugeMetricFamily(
            "modelevents_worker_runs",
            "Runs whose latest state is this state, among the runs this worker owns (those on "
            "its assigned partitions whose state it holds); sum by (state) over the workers of "
            "an app id for the cluster's count", labels=("state",))
        for state, value in stats.runs.gauge():
            runs.add_metric((state,), value)
        yield runs


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], health: WorkerHealth) -> None:
        self.health = health
        self.registry = CollectorRegistry()
        self.registry.register(_StatsCollector(health))
        ProcessCollector(registry=self.registry)
        super().__init__(address, _Handler)

    def metrics_text(self) -> bytes:
        return generate_latest(self.registry)


class HealthServer:
    """The endpoint on ``host:port`` (port 0: any free port, see :attr:`port`)."""

    def __init__(self, health: WorkerHealth, host: str = "0.0.0.0", port: int = 0) -> None:
        self.health = health
        self._server = _Server((host, port), health)  # binds now: a taken port fails at start
        self.host, self.port = self._server.server_address[:2]
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="worker-health", daemon=True)

    def start(self) -> HealthServer:
        self._thread.start()
        log.info("health endpoint on http://%s:%d (/healthz, /readyz)", self.host, self.port)
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def check(port: int | None, path: str = "/healthz", timeout: float = 4.0) -> tuple[int, str]:
    """(exit status, what to print) of the HEALTHCHECK: 0 when the endpoint answers 2xx."""
    if port is None:
        return 0, "no health port (MODELEVENTS_HEALTHCHECK_PORT): nothing to check"
    url = f"http://127.0.0.1:{port}{path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return 0, f"{url}: {response.status} {response.read().decode(errors='replace')}"
    except urllib.error.HTTPError as exc:
        return 1, f"{url}: {exc.code} {exc.read().decode(errors='replace')}"
    except (OSError, ValueError) as exc:
        return 1, f"{url}: {exc}"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    raw = args[0] if args else os.environ.get("MODELEVENTS_HEALTHCHECK_PORT") or None
    try:
        port = None if raw is None else int(raw)
    except ValueError:
        print(f"not a port: {raw!r}", file=sys.stderr)
        return 1
    status, text = check(port, args[1] if len(args) > 1 else "/healthz")
    print(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
