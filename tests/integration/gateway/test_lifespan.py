"""The gateway's read side belongs to its lifespan (issue #11): the views of ``run-owners`` and
``runs`` and the shared readers of followed runs are started by the app's startup and stopped by
its shutdown, ``/readyz`` answers 200 only once the views have read what their topics held, and
a stop closes every Kafka consumer they opened. Real broker, real HTTP (uvicorn on loopback);
the follower limits of the gateway config reach the followers' hub.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import orjson
import pytest

from modelevents.services.cli.settings_tree import load_gateway_config
from modelevents.services.gateway.app import create_app
from modelevents.services.gateway.config import GatewayConfig
from modelevents.services.gateway.events.owners import encode_claim
from modelevents.services.kafka import clients
from modelevents.services.local.asgi_thread import serve_in_thread
from tests.integration.gateway.test_followers import broker_connections, chat_stream, forward
from tests.integration.gateway.test_ownership import new_run_id, wait_for
from tests.integration.pipeline import HANG_GUARD_S, run
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.kafka

# Claims the view must read before the gateway is ready: big records (a claim with padding:
# the view keeps only run id and tenant), so that reading them takes a while.
CLAIMS, PADDING = 160, 900_000


async def write_claims(settings: Any) -> list[str]:
    producer = await clients.start_producer(settings)
    run_ids = [new_run_id() for _ in range(CLAIMS)]
    try:
        for run_id in run_ids:
            claim = orjson.loads(encode_claim(run_id, "acme"))
            await producer.send_and_wait(
                settings.topic("run-owners"), key=clients.run_key_bytes(run_id),
                value=orjson.dumps({**claim, "pad": "x" * PADDING}))
    finally:
        await producer.stop()
    return run_ids


def test_readiness_waits_for_the_views_and_a_stop_closes_their_consumers(settings):
    claimed = run(write_claims(settings))
    idle = broker_connections(settings.bootstrap_servers)
    served = serve_in_thread(create_app(GatewayConfig(kafka=settings, ack_timeout_s=10.0)),
                             name="gateway")
    try:
        gateway = served.app.state.gateway
        answers: list[tuple[int, str]] = []
        deadline = time.monotonic() + HANG_GUARD_S
        while True:
            answer = httpx.get(f"{served.url}/readyz", timeout=30)
            caught_up = gateway.views_caught_up()
            answers.append((answer.status_code, answer.json().get("reason", "")))
            if answer.status_code == 200:
                break
            assert time.monotonic() < deadline, answers
        # Ready means the owners of the run ids are known: the first 200 came after the views
        # had read their topics, and every 503 before it said which one was being read.
        assert caught_up, answers
        assert all("still reading" in reason and "run-owners" in reason
                   for status, reason in answers[:-1]), answers
        assert gateway.owner_of(claimed[-1]) == "acme"

        # A follower open while the gateway stops: its reader's consumer is closed too.
        run_id = new_run_id()
        forward(served, run_id, chat_stream(3)[:2], end="none")
        first = threading.Event()

        def follow() -> None:
            try:
                with httpx.stream("GET", f"{served.url}/v1/runs/{run_id}/events",
                                  timeout=HANG_GUARD_S) as response:
                    for _ in response.iter_raw():
                        first.set()
            except httpx.HTTPError:
                pass  # the gateway went away under it

        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        assert first.wait(HANG_GUARD_S)
        assert gateway.followers.readers == 1
        assert broker_connections(settings.bootstrap_servers) > idle
    finally:
        served.stop()
    assert all(view._task.done() for view in gateway.views)
    assert gateway.followers.readers == 0
    wait_for("every consumer and the producer closed",
             lambda: broker_connections(settings.bootstrap_servers) <= idle, timeout=30)


def test_follower_limits_of_the_config_reach_the_followers(settings, tmp_path):
    path = tmp_path / "gateway.yaml"
    path.write_text("follower_buffer_events: 8\nfollower_queue_events: 16\n"
                    "follower_patience_s: 0.25\n")
    config = load_gateway_config(path, kafka=settings)
    with serve_in_thread(create_app(config), name="gateway") as served:
        hub = served.app.state.gateway.followers
        assert (hub.buffer_events, hub.max_pending, hub.patience_s) == (8, 16, 0.25)


def test_follower_limits_are_documented_in_help_and_config_docs():
    import argparse

    from modelevents.services.cli.commands import gateway as gateway_command
    # The config file's keys are documented where users read them (the module points there).
    config_docs = (REPO_ROOT / "docs" / "operations.md").read_text()

    parser = argparse.ArgumentParser(prog="modelevents")
    gateway_command.register(parser.add_subparsers())
    help_text = " ".join(parser._subparsers._group_actions[0].choices["gateway"]
                         .format_help().split())
    limits = [name for name in GatewayConfig.model_fields if name.startswith("follower_")]
    assert len(limits) == 3
    for name in limits:
        default = GatewayConfig.model_fields[name].default
        assert f"{name} (" in help_text and f"default {default:g}" in help_text, name
        assert f"{name}: {default}" in config_docs, name
