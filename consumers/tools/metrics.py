"""The tool executor's Prometheus metrics: ``modelevents tools run --metrics-port PORT``
(``--metrics-host``: the address, loopback by default — the executor is no server meant to be
reached from other machines; a scraper elsewhere needs the address named).

``modelevents_tools_executions_total{tool, outcome, error_class}`` counts the final receipts
this process wrote: ``outcome`` ``succeeded``, ``failed`` or ``unknown`` (docs/tools.md says
what each means), ``error_class`` empty on success, else the receipt's class (``invalid``,
``denied``, ``budget``, ``timeout`` …). Counted once Kafka acknowledged the receipt, read from
the executor's own counter at scrape time; served by prometheus-client's HTTP server in a
daemon thread, with the process's CPU and memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily

from modelevents.consumers.prometheus import serve_collector

if TYPE_CHECKING:
    from modelevents.consumers.tools.executor import Executor

__all__ = ["serve_metrics"]


class _ExecutorCollector:
    def __init__(self, executor: Executor) -> None:
        self.executor = executor

    def collect(self) -> Iterator[Any]:
        family = CounterMetricFamily(
            "modelevents_tools_executions", "Tool calls finished (a final receipt written), by "
            "tool, outcome and error class", labels=("tool", "outcome", "error_class"))
        for labels, value in self.executor.finished.copy().items():
            family.add_metric(labels, value)
        yield family


def serve_metrics(executor: Executor, port: int, host: str = "127.0.0.1") -> Any:
    """Serve ``GET /metrics`` on ``host:port`` (0: a free port); returns the server."""
    return serve_collector(_ExecutorCollector(executor), port, host)
