"""The worker's health endpoint (``modelevents worker --health-port``, services/processor/health.py)
over real HTTP, against a real worker on the real broker: /healthz answers from the start,
/readyz is 503 until the worker joined its group and recovered its tables and 200 after, and
503 (or gone) once SIGTERM stopped it; a port already taken fails the start with the fix."""

from __future__ import annotations

import json
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from modelevents.services.cli.commands import worker as worker_command
from modelevents.services.processor import health as worker_health
from modelevents.services.processor.health import HealthServer, WorkerHealth
from tests.helpers import free_port
from tests.integration.pipeline import collect, feed, fixture_frames, produce_raw, run
from tests.paths import FIXTURES

DEADLINE_S = 90.0
FIXTURE = FIXTURES / "openai-responses" / "text-with-usage.sse"


def _get(port: int, path: str) -> tuple[int, dict] | None:
    """(status, body) of GET http://127.0.0.1:port/path; None while nothing listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except (ConnectionError, urllib.error.URLError):
        return None


@pytest.mark.kafka
def test_probes_follow_the_worker_from_start_to_stop(settings, start_worker) -> None:
    port = free_port()
    worker = start_worker("health", wait=False, extra=("--health-port", str(port)))
    deadline = time.monotonic() + DEADLINE_S
    readiness: list[tuple[int, str]] = []
    while True:
        assert worker.process.poll() is None, worker.log_text()[-4000:]
        assert time.monotonic() < deadline, f"not ready: {readiness[-3:]}\n{worker.log_text()[-4000:]}"
        answer = _get(port, "/readyz")
        if answer is not None:
            status, body = answer
            readiness.append((status, body["status"]))
            assert _get(port, "/healthz") == (200, {"status": "ok", "detail": "alive"})
            if status == 200:
                break
        time.sleep(0.05)
    # Before the worker had joined its group and recovered its tables, it was not ready ...
    assert readiness[0] == (503, "starting"), readiness
    assert set(readiness[:-1]) <= {(503, "starting"), (503, "recovering")}, readiness
    # ... and it says ready when it logs it (the flag is set just before the line).
    time.sleep(0.5)
    assert " ready: " in worker.log_text()
    assert readiness[-1] == (200, "ok")
    assert _get(port, "/readyz") == (200, {"status": "ok", "detail": "processing"})
    status, body = _get(port, "/nowhere")
    assert status == 404 and "/healthz" in body["detail"]

    assert worker.terminate() == 0
    assert _get(port, "/readyz") is None  # the endpoint ends with the process


def _samples(port: int) -> list:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert response.headers["content-type"].startswith("text/plain")
        text = response.read().decode()
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def _scrape(port: int) -> dict[str, float]:
    return {sample.name: sample.value for sample in _samples(port) if not sample.labels}


def _labelled(port: int, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of one labelled metric: sorted label pairs → value."""
    return {tuple(sorted(sample.labels.items())): sample.value for sample in _samples(port)
            if sample.name == name}


@pytest.mark.kafka
def test_metrics_count_what_the_worker_did(settings, start_worker) -> None:
    port = free_port()
    start_worker("metrics", extra=("--health-port", str(port)))
    run_id, frames = fixture_frames(FIXTURE)
    run(feed(settings, frames))
    published = run(collect(settings, lambda p: any(
        e.kind == "run.finished" for e in p.events[run_id])))
    events = len(published.deduped(run_id))
    deadline = time.monotonic() + DEADLINE_S
    while (metrics := _scrape(port)).get("modelevents_worker_events_total") != events:
        assert time.monotonic() < deadline, metrics
        time.sleep(0.1)
    provider_frames = sum(1 for f in frames if f.body)  # the end marker carries no body
    assert metrics["modelevents_worker_frames_total"] >= provider_frames
    assert metrics["modelevents_worker_candidate_events_total"] >= events
    assert metrics["modelevents_worker_dead_letters_total"] == 0
    assert metrics["modelevents_worker_batches_total"] >= 1
    assert metrics["process_resident_memory_bytes"] > 0  # the process collector


@pytest.mark.kafka
def test_metrics_break_down_by_api_kind_dead_letter_reason_state_and_lag(settings, start_worker
                                                                         ) -> None:
    """What an operator graphs: events per provider/API/kind (the adapter's `unknown`s among
    them), dead letters per stage and error type, runs entering each state, the lag of each
    input partition — each checked against what the worker actually published."""
    port = free_port()
    start_worker("labels", extra=("--health-port", str(port)))
    run_id, frames = fixture_frames(FIXTURE)
    run(feed(settings, frames))
    run(produce_raw(settings, "frames", b"not-a-run", b"not an Avro record"))  # one dead letter
    published = run(collect(settings, lambda p: any(
        e.kind == "run.finished" for e in p.events[run_id])))
    events = list(published.deduped(run_id).values())
    deadline = time.monotonic() + DEADLINE_S
    while _scrape(port).get("modelevents_worker_dead_letters_total") != 1 or _scrape(
            port).get("modelevents_worker_events_total") != len(events):
        assert time.monotonic() < deadline, _scrape(port)
        time.sleep(0.1)

    by_kind = _labelled(port, "modelevents_worker_events_by_kind_total")
    expected: dict[tuple, float] = {}
    for event in events:
        key = (("api", event.api), ("kind", event.kind), ("provider", event.provider))
        expected[key] = expected.get(key, 0) + 1
    assert by_kind == expected
    by_api = _labelled(port, "modelevents_worker_frames_by_api_total")
    assert by_api == {(("api", "openai-responses"), ("provider", "openai")):
                      _scrape(port)["modelevents_worker_frames_total"]}

    dead = _labelled(port, "modelevents_worker_dead_letters_by_reason_total")
    assert list(dead.values()) == [1] and dict(next(iter(dead)))["stage"] == "decode", dead

    entered = _labelled(port, "modelevents_worker_run_states_entered_total")
    assert entered.get((("state", "completed"),)) == 1, entered
    assert entered.get((("state", "in_progress"),), 0) >= 1, entered

    # Everything fed was processed: once the partition check ran (every second), no lag.
    while not (lag := _labelled(port, "modelevents_worker_consumer_lag")) or any(lag.values()):
        assert time.monotonic() < deadline, lag
        time.sleep(0.2)
    topics = {dict(labels)["topic"] for labels in lag}
    assert settings.topic("frames") in topics and settings.topic("ingest") in topics, lag


@pytest.mark.kafka
def test_a_rebalance_makes_a_ready_worker_unready_until_it_recovered(settings, start_worker
                                                                     ) -> None:
    port = free_port()
    first = start_worker("first", extra=("--health-port", str(port)))
    deadline = time.monotonic() + DEADLINE_S
    while _get(port, "/readyz") != (200, {"status": "ok", "detail": "processing"}):
        assert time.monotonic() < deadline, first.log_text()[-4000:]
        time.sleep(0.05)
    second = start_worker("second", wait=False)  # the same app id: the group rebalances
    seen = []
    while not (seen and seen[-1] == 200 and " ready: " in second.log_text()):
        assert time.monotonic() < deadline, (seen[-5:], second.log_text()[-4000:])
        status, body = _get(port, "/readyz")
        if not seen or seen[-1] != status:
            seen.append(status)
        time.sleep(0.01)
    assert 503 in seen, f"never unready during the rebalance: {seen}"


@pytest.mark.kafka
def test_a_taken_health_port_fails_the_start(settings, start_worker) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        worker = start_worker("taken", wait=False, extra=("--health-port", str(port)))
        assert worker.process.wait(timeout=DEADLINE_S) != 0
    log = worker.log_text()
    assert f"cannot serve the health endpoint on 0.0.0.0:{port}" in log, log
    assert "--health-port" in log


def test_a_stalled_event_loop_fails_liveness_and_a_stop_is_not_ready(monkeypatch) -> None:
    monkeypatch.delenv("MODELEVENTS_HEALTHCHECK_PORT", raising=False)
    health = WorkerHealth(stall_s=0.2)
    server = HealthServer(health, "127.0.0.1", 0).start()
    try:
        assert _get(server.port, "/healthz")[0] == 200  # no heartbeat yet: starting, alive
        health.beat()
        assert _get(server.port, "/healthz")[0] == 200
        time.sleep(0.4)
        status, body = _get(server.port, "/healthz")
        assert (status, body["status"]) == (503, "stalled"), body
        assert _get(server.port, "/readyz") == (
            503, {"status": "starting", "detail": "joining the consumer group, recovering the tables"})
        health.started = True
        assert _get(server.port, "/readyz")[0] == 200
        health.stopping = True
        assert _get(server.port, "/readyz")[1]["status"] == "stopping"
        assert _get(server.port, "/healthz")[0] == 200  # stopping: the heartbeat ended on purpose
        # The image's HEALTHCHECK (python -m modelevents.services.processor.health)
        assert worker_health.main([str(server.port)]) == 0
        health.stopping = False
        assert worker_health.main([str(server.port)]) == 1  # stalled
        assert worker_health.main([str(server.port), "/readyz"]) == 0
    finally:
        server.close()
    assert worker_health.main([str(server.port)]) == 1  # nothing listens
    assert worker_health.main([]) == 0  # no port: nothing to check


def test_the_state_dir_comes_from_the_environment(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MODELEVENTS_STATE_DIR", str(tmp_path / "state"))
    assert worker_command.default_workdir() == tmp_path / "state"
    monkeypatch.delenv("MODELEVENTS_STATE_DIR")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    assert worker_command.default_workdir() == tmp_path / "xdg" / "modelevents" / "worker"
