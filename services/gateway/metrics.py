"""``GET /metrics``: the gateway's Prometheus metrics (prometheus-client's text format).

What is counted, and where:
- every HTTP exchange, by route template, method and status, with its duration
  (``modelevents_gateway_http_request_duration_seconds``, a histogram; measured around the edge
  in ``app.GatewayApp``, so the edge's own 401/408/413 answers are counted too);
- webhook deliveries refused, by provider and status (``..._webhook_rejections_total``:
  400 malformed, 401 signature or timestamp, 404 a tenant without secrets, 413/431 too large;
  a provider the gateway does not know is not counted: its label would be whatever the URL
  says);
- frames written to Kafka and acknowledged, by provider, API and transport
  (``..._frames_written_total``);
- the frame journal (services/gateway/spool/journal.py): frames and bytes it holds
  (``..._journal_frames``, ``..._journal_bytes``), frames written to it while Kafka was away
  (``..._frames_spooled_total``) and from it to Kafka (``..._frames_drained_total``), and frames
  teed but dropped, by reason (``..._frames_dropped_total``: ``journal_full``,
  ``journal_unavailable``, ``queue_full``, ``stopped``, ``undecodable``);
- each tenant's tokens of the current UTC day, as its ``tokens_per_day`` budget counts them
  (``..._tenant_tokens_today``, by tenant; read when scraped: services/gateway/proxy/limits.py),
  and the budgets configured (``..._tenant_tokens_per_day``).

Each app has a registry of its own (several gateways in one process, as in the tests, do not
share counts). Route labels are templates (``/v1/runs/{run_id}/messages``), never raw paths, so
run ids do not become label values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

__all__ = ["CONTENT_TYPE_LATEST", "GatewayMetrics", "route_template"]

# The first segments that name a route; what follows a run id keeps its own name.
_RUN_ROUTES = frozenset({"messages", "events", "frames", "input", "cancel", "reconcile",
                         "approvals"})
# Routes below a run that name one item of it: the item's parameter name.
_RUN_ITEM_ROUTES = {"events": "{seq}", "approvals": "{approval_id}"}


def route_template(path: str) -> str:
    """A low-cardinality label for ``path``: ids replaced by their parameter names."""
    parts = path.strip("/").split("/")
    if parts[0] == "webhooks":
        return "/webhooks/{provider}" + ("/{tenant}" if len(parts) > 2 else "")
    if parts[:2] == ["v1", "runs"]:
        if len(parts) == 2:
            return "/v1/runs"
        tail = parts[3] if len(parts) > 3 and parts[3] in _RUN_ROUTES else None
        if len(parts) == 5 and parts[3] in _RUN_ITEM_ROUTES:
            return f"/v1/runs/{{run_id}}/{parts[3]}/{_RUN_ITEM_ROUTES[parts[3]]}"
        return "/v1/runs/{run_id}" + (f"/{tail}" if tail else "")
    if parts[0] == "proxy":  # the upstream's name is the operator's; the rest ids and models
        return "/proxy/{upstream}" if len(parts) > 1 else "other"
    if parts[0] == "ui":
        return "/ui" + ("/{asset}" if len(parts) > 1 and parts[1] else "")
    if len(parts) == 1 and parts[0] in ("healthz", "readyz", "metrics", "docs", "openapi.json"):
        return "/" + parts[0]
    return "other"


class GatewayMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.http = Histogram(
            "modelevents_gateway_http_request_duration_seconds",
            "HTTP exchanges by route template, method and status, from the request's first byte "
            "to the response's last", ["route", "method", "status"], registry=self.registry)
        self.webhook_rejections = Counter(
            "modelevents_gateway_webhook_rejections_total",
            "Webhook deliveries refused (400 malformed, 401 signature/timestamp, 404 no secrets)",
            ["provider", "status"], registry=self.registry)
        self.frames_written = Counter(
            "modelevents_gateway_frames_written_total",
            "Frames written to Kafka and acknowledged", ["provider", "api", "transport"],
            registry=self.registry)
        self.journal_frames = Gauge(
            "modelevents_gateway_journal_frames",
            "Teed frames the local journal holds, waiting for Kafka", registry=self.registry)
        self.journal_bytes = Gauge(
            "modelevents_gateway_journal_bytes",
            "Bytes of the frames the local journal holds", registry=self.registry)
        self.frames_spooled = Counter(
            "modelevents_gateway_frames_spooled_total",
            "Teed frames written to the local journal (Kafka did not acknowledge in time)",
            registry=self.registry)
        self.frames_drained = Counter(
            "modelevents_gateway_frames_drained_total",
            "Frames written from the local journal to Kafka and acknowledged",
            registry=self.registry)
        self.frames_dropped = Counter(
            "modelevents_gateway_frames_dropped_total",
            "Teed frames neither written to Kafka nor kept in the journal, by reason",
            ["reason"], registry=self.registry)

    def watch_tenant_tokens(self, used: Callable[[], Mapping[str, int]],
                            budgets: Mapping[str, int]) -> None:
        """Expose each tenant's tokens of the day (``used()``, read when scraped) and the
        tokens_per_day budgets configured."""
        self.registry.register(_TenantTokens(used, budgets))

    def observe_http(self, path: str, method: str, status: int, seconds: float) -> None:
        self.http.labels(route_template(path), method, str(status)).observe(seconds)

    def text(self) -> bytes:
        return generate_latest(self.registry)


class _TenantTokens(Collector):
    def __init__(self, used: Callable[[], Mapping[str, int]], budgets: Mapping[str, int]) -> None:
        self.used, self.budgets = used, dict(budgets)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        today = GaugeMetricFamily(
            "modelevents_gateway_tenant_tokens_today",
            "Tokens the tenant's runs used on the current UTC day (from their states on runs)",
            labels=["tenant"])
        for tenant, tokens in sorted(self.used().items()):
            today.add_metric([tenant], tokens)
        yield today
        budget = GaugeMetricFamily(
            "modelevents_gateway_tenant_tokens_per_day",
            "The tenant's tokens_per_day budget (proxy.tenants; default: every other tenant's)",
            labels=["tenant"])
        for tenant, tokens in sorted(self.budgets.items()):
            budget.add_metric([tenant], tokens)
        yield budget
