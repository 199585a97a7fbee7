"""The tool executor's Prometheus metrics (consumers/tools/metrics.py) scraped over real HTTP
while a real executor, worker and broker handle calls: every final receipt is counted once, by
tool, outcome and error class, and nothing else is. ``modelevents tools run`` serves them on
loopback unless ``--metrics-host`` names another address."""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from modelevents.consumers.tools.metrics import serve_metrics
from tests.helpers import free_port
from tests.integration.pipeline import kafka_args
from tests.integration.tools.test_executor import (  # noqa: F401 (fixtures)
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


def _listening_on(port: int) -> set[str]:
    """The addresses a socket of this machine listens on at ``port`` (``/proc/net/tcp*``)."""
    found: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            for line in list(lines)[1:]:
                local, state = line.split()[1], line.split()[3]
                address, _, hex_port = local.partition(":")
                if state == "0A" and int(hex_port, 16) == port:  # 0A: LISTEN
                    raw = bytes.fromhex(address)
                    # The kernel writes each 32-bit word in host (little-endian) order.
                    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                    found.add(str(ipaddress.ip_address(words)))
    return found


@pytest.mark.parametrize("host_options, expected", [((), "127.0.0.1"),
                                                    (("--metrics-host", "127.0.0.2"), "127.0.0.2")])
def test_tools_run_serves_metrics_on_loopback_unless_told(settings, tmp_path, host_options,
                                                          expected) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("tenants: {}\n")
    port = free_port()
    log = tmp_path / "tools.log"
    with log.open("wb") as out:
        tools = subprocess.Popen(
            [sys.executable, "-m", "modelevents.services.cli", "tools", "run", "--policy",
             str(policy), "--metrics-port", str(port), *host_options, *kafka_args(settings)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (listening := _listening_on(port)):
            assert tools.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert listening == {expected}, listening
        with urllib.request.urlopen(f"http://{expected}:{port}/metrics", timeout=5) as answer:
            assert b"process_cpu_seconds_total" in answer.read()
        assert f"metrics on http://{expected}:{port}/metrics" in log.read_text()
    finally:
        os.killpg(tools.pid, signal.SIGKILL)
        tools.wait()
