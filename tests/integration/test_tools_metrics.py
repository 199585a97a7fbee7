"""The tool executor's Prometheus metrics (consumers/tools/metrics.py) scraped over real HTTP
while a real executor, worker and broker handle calls: every final receipt is counted once, by
tool, outcome and error class, and nothing else is."""

from __future__ import annotations

import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from modelevents.consumers.tools.metrics import serve_metrics
from tests.integration.test_tools import (  # noqa: F401 (fixtures)
    db,
    policy_for,
    propose,
    receipts_of,
    results_of,
    settings,
    start_executor,
    tenant,
)

pytestmark = pytest.mark.kafka


def _executions(port: int) -> dict[tuple[str, str, str], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {(s.labels["tool"], s.labels["outcome"], s.labels["error_class"]): s.value
            for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == "modelevents_tools_executions_total"}


def test_every_final_receipt_is_counted_by_tool_outcome_and_error_class(
        settings, start_executor, tenant, db):
    running = start_executor(policy_for(tenant, max_calls_per_run=2))
    server = serve_metrics(running.executor, 0, host="127.0.0.1")
    try:
        assert _executions(server.server_port) == {}  # nothing done yet, nothing counted
        run_id = propose(settings, tenant, [
            ("get_weather", "c1", '{"city": "Paris"}'),
            ("get_weather", "c2", '{"city": "Rome"}'),
            ("get_weather", "c3", '{"city": "Oslo"}'),  # over the budget of two
            ("delete_everything", "c4", "{}")])  # no such tool
        results_of(settings, run_id, 4)
        expected: dict[tuple[str, str, str], float] = {}
        for receipt in receipts_of(settings, run_id):
            if receipt.phase == "finished":
                key = (receipt.tool_name, receipt.outcome or "", receipt.error_class or "")
                expected[key] = expected.get(key, 0) + 1
        assert expected[("get_weather", "succeeded", "")] == 2, expected
        assert len(expected) >= 3, expected  # a budget refusal and an unknown tool besides
        deadline = time.monotonic() + 10
        while (seen := _executions(server.server_port)) != expected:
            assert time.monotonic() < deadline, (seen, expected)
            time.sleep(0.1)
    finally:
        server.shutdown()
