"""Serving a consumer's Prometheus metrics: one collector read at scrape time, with the
process's CPU and memory, by prometheus-client's HTTP server in a daemon thread (the tool
executor's and the decisions watcher's ``--metrics-port``)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, ProcessCollector, start_http_server

__all__ = ["serve_collector"]


def serve_collector(collector: Any, port: int, host: str = "127.0.0.1") -> Any:
    """Serve ``GET /metrics`` on ``host:port`` (0: a free port); returns the server, whose
    ``server_port`` says which and whose ``shutdown()`` stops it."""
    registry = CollectorRegistry()
    registry.register(collector)
    ProcessCollector(registry=registry)
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server
