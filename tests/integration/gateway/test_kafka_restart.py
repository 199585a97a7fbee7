"""Kafka goes away while the gateway polls a background run, and comes back.

A poll whose answer Kafka does not acknowledge fails and is noted on the call; the provider's
job goes on, and so does the polling: once the broker is back, the next poll is published and
the run ends as the provider says — one terminal event, ``seq`` without a gap or a repeat,
nothing to reconcile. The module has a broker of its own (it stops it), the
simulator, a gateway and a worker, as ``test_gateway_runs`` sets them up.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest

from modelevents.services.local import kafka_broker as local_kafka
from tests.helpers import free_port
from tests.integration.kafka.test_broker_restart import broker_settings, kafka_broker  # noqa: F401
from tests.integration.pipeline import start_gateway_process
from tests.integration.simulated_gateway import (  # noqa: F401 - fixtures
    neutral,
    settings,
    settled,
    sim,
    simulator,
    sse_events,
    start_gateway,
    start_run,
    wait_run,
)

pytestmark = pytest.mark.kafka

# uvicorn's graceful shutdown (timeout_graceful_shutdown=10 in the gateway command) plus the
# lifespan's stops; past this the gateway is hanging, not stopping.
GRACE_S = 30.0


def test_kafka_down_while_a_background_run_is_polled_the_run_goes_on_when_it_is_back(
        broker_settings, start_gateway, sim):
    gateway = start_gateway(poll_initial_s=1.0, poll_max_s=1.0, ack_timeout_s=2.0)
    started = start_run(gateway, neutral("openai", "openai-responses",
                                         "sim:openai-responses/background-8-polls",
                                         background=True))
    run_id = started["run_id"]
    wait_run(gateway, run_id, lambda b: b["state"] and b["state"]["provider_object_ids"],
             "the run's object id on runs")

    local_kafka.stop(broker_settings)
    try:
        # A poll whose answer cannot be acknowledged fails; the job goes on at the provider, so
        # the polling goes on too, and says so on the call.
        body = wait_run(gateway, run_id, lambda b: any(
            "poll failed" in note and "Kafka" in note for note in b["calls"][-1]["notes"]),
            "a failed poll noted on the call", timeout=60)
        assert body["calls"][-1]["in_flight"], body["calls"][-1]
    finally:
        local_kafka.start(broker_settings)  # same data directory: the log survives

    # Back: the next poll is published and the run ends as the provider says, without help.
    body = wait_run(gateway, run_id, settled("completed"), "completed after the broker is back")
    call = body["calls"][-1]
    assert call["error"] is None and call["provider_status"] == "completed", call
    events = sse_events(gateway, run_id, follow="false")
    kinds = [kind for _, kind, _ in events]
    assert kinds.count("run.started") == 1 and kinds.count("run.finished") == 1, kinds
    assert [seq for seq, _, _ in events] == list(range(len(events)))
    assert body["state"]["needs_reconciliation"] is False


def test_sigterm_stops_the_gateway_within_its_grace_period_while_kafka_is_down(
        broker_settings, settings, tmp_path: Path) -> None:
    # An orchestrator stopping a gateway whose Kafka is away (the usual order in an outage):
    # the gateway must exit, not wait for ever on a producer flush or a consumer's close.
    port = free_port()
    log_path = tmp_path / "gateway.err"
    gateway = start_gateway_process(settings, port, log_path)
    try:
        local_kafka.stop(broker_settings)
        try:
            # A probe while Kafka is away: the gateway still answers (ready or not).
            assert httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=30).status_code in (
                200, 503)
            os.killpg(gateway.pid, signal.SIGTERM)
            try:
                code = gateway.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(gateway.pid, signal.SIGKILL)
                raise AssertionError("the gateway did not exit within its grace period with "
                                     "Kafka down:\n" + log_path.read_text(errors="replace")[-3000:]
                                     ) from None
        finally:
            local_kafka.start(broker_settings)
        assert code == 0, log_path.read_text(errors="replace")[-3000:]
        assert "gateway stopped" in log_path.read_text(errors="replace")
    finally:
        if gateway.poll() is None:
            os.killpg(gateway.pid, signal.SIGKILL)
