"""The watcher's Prometheus metrics: ``modelevents decisions watch --metrics-port PORT``
(``--metrics-host``: loopback by default).

``modelevents_decision_current{decision_id, bundle, bundle_id, owner}`` is 1 while a decision
is current, 0 once demoted to historical evidence; ``modelevents_decision_demotions_total
{trigger}`` counts the demotions this watcher wrote (acknowledged);
``modelevents_decision_runs_total{decision_id}`` the live runs found under each decision. Read from the watcher at
scrape time; served by prometheus-client's HTTP server in a daemon thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from modelevents.consumers.decisions.watcher import Watcher
from modelevents.consumers.prometheus import serve_collector

__all__ = ["serve_metrics"]


class _WatcherCollector:
    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher

    def collect(self) -> Iterator[Any]:
        current = GaugeMetricFamily(
            "modelevents_decision_current", "1 while a decision is current, 0 once its retest "
            "triggers demoted it to historical evidence",
            labels=("decision_id", "bundle", "bundle_id", "owner"))
        for decision in list(self.watcher.checker.decisions.values()):
            current.add_metric((decision.decision_id, decision.bundle_name, decision.bundle_id,
                                decision.owner), 1.0 if decision.current else 0.0)
        yield current
        demotions = CounterMetricFamily(
            "modelevents_decision_demotions", "Decisions this watcher demoted, by trigger",
            labels=("trigger",))
        for trigger, count in self.watcher.demoted.copy().items():
            demotions.add_metric((trigger,), count)
        yield demotions
        runs = CounterMetricFamily(
            "modelevents_decision_runs", "Live runs found under each decision (by its bundle, "
            "else its target)", labels=("decision_id",))
        for decision_id, count in self.watcher.checker.runs_matched.copy().items():
            runs.add_metric((decision_id,), count)
        yield runs


def serve_metrics(watcher: Watcher, port: int, host: str = "127.0.0.1") -> Any:
    """Serve ``GET /metrics`` on ``host:port`` (0: a free port); returns the server."""
    return serve_collector(_WatcherCollector(watcher), port, host)
