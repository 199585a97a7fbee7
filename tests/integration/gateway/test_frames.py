"""Forwarded frames (``POST /v1/runs/{id}/frames``) and the ``modelevents gateway`` command, over
real HTTP into the real broker (the session's shared test broker; each test has its own topics).

The gateway runs as users run it: the ``gateway`` command (services/cli/commands/gateway.py, with
a parser built here the way services/cli/main.py builds it) in a subprocess, configured by a YAML
file and options. Where a test says what users see, it runs the real stream processor
(``modelevents worker``) and compares ``events`` with what ``modelevents normalize`` gives for
the same recording.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from modelevents.adapters.framing import frames_from_bytes
from modelevents.adapters.registry import normalize_file
from modelevents.schemas.errors import ConfigError
from modelevents.services.cli.commands import gateway as gateway_command
from modelevents.services.kafka.settings import PipelineSettings
from tests.helpers import free_port
from tests.integration.gateway.test_webhooks import frames_on_topic
from tests.integration.pipeline import collect, run
from tests.paths import FIXTURES

pytestmark = pytest.mark.kafka

SSE_STREAM = FIXTURES / "openai-responses" / "tool-call-parallel.sse"
JSONL_STREAM = FIXTURES / "openai-chat" / "finished-without-done.jsonl"
MAX_FORWARD_BYTES = 200_000

RUNNER = """
import argparse, sys
from modelevents.services.cli.commands import gateway
parser = argparse.ArgumentParser(prog="modelevents")
gateway.register(parser.add_subparsers())
args = parser.parse_args(sys.argv[1:])
sys.exit(args.run(args))
"""


class GatewayProcess:
    """`modelevents gateway` in a subprocess (own process group), its output in a file."""

    def __init__(self, settings: PipelineSettings, workdir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = workdir / "gateway.yaml"
        config.write_text(f"max_forward_bytes: {MAX_FORWARD_BYTES}\n")
        self.log_path = workdir / "gateway.log"
        self._log = self.log_path.open("wb")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
        self.process = subprocess.Popen(
            [sys.executable, "-c", RUNNER, "gateway", "--port", str(self.port),
             "--config", str(config), "--bootstrap-servers", settings.bootstrap_servers,
             "--prefix", settings.topic_prefix, "--partitions", str(settings.partitions)],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, f"gateway exited:\n{self.log_text()}"
            assert time.monotonic() < deadline, f"gateway not ready:\n{self.log_text()}"
            try:
                if httpx.get(self.url + "/readyz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> int:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            return self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            return self.process.wait()
        finally:
            self._log.close()


@pytest.fixture
def gateway(settings: PipelineSettings, tmp_path: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(settings, tmp_path)
    yield process
    process.stop()


def forward(gateway: GatewayProcess, run_id: str, body: bytes, content_type: str,
            **params: str | int) -> httpx.Response:
    return httpx.post(f"{gateway.url}/v1/runs/{run_id}/frames", content=body, params=params,
                      headers={"content-type": content_type}, timeout=60)


def sse_event_count(body: bytes) -> int:
    return len(frames_from_bytes(body, run_key="x", provider="", api="", framing="sse"))


# --- the command ----------------------------------------------------------------------------


def test_gateway_command_prints_its_urls_and_stops_on_sigterm(settings, tmp_path):
    served = GatewayProcess(settings, tmp_path)
    assert httpx.get(served.url + "/healthz").json() == {"status": "ok"}
    assert served.stop() == 0
    log = served.log_text()
    for line in (f"gateway on {served.url}", f"{served.url}/v1/runs/{{run_id}}/frames",
                 f"{served.url}/docs", "webhooks: "):
        assert line in log, log


def test_gateway_command_refuses_to_start_without_topics(make_settings):
    bare = make_settings(create_topics=False)
    parser = argparse.ArgumentParser(prog="modelevents")
    gateway_command.register(parser.add_subparsers())
    args = parser.parse_args(["gateway", "--bootstrap-servers", bare.bootstrap_servers,
                              "--prefix", bare.topic_prefix, "--port", str(free_port())])
    with pytest.raises(ConfigError, match="topics create"):
        args.run(args)


# --- forwarded streams ----------------------------------------------------------------------


def test_forwarded_sse_stream_becomes_the_run_normalize_gives(settings, gateway, start_worker):
    worker = start_worker()
    body = SSE_STREAM.read_bytes()
    expected = normalize_file(SSE_STREAM).events
    answer = forward(gateway, "run-forwarded", body, "text/event-stream", api="openai-responses")
    assert answer.status_code == 200, answer.text
    assert answer.json()["accepted"] == sse_event_count(body)
    # The application retries the same body (say its first answer was lost): same frame ids,
    # so the processor drops the copies.
    assert forward(gateway, "run-forwarded", body, "text/event-stream",
                   api="openai-responses").status_code == 200
    published = run(collect(settings, lambda p: p.runs.get("run-forwarded") is not None
                            and p.runs["run-forwarded"].last_seq == len(expected) - 1,
                            worker.log_text))
    time.sleep(2)  # would the copy add anything?
    published = run(collect(settings, lambda p: p.runs.get("run-forwarded") is not None))
    events = [published.deduped("run-forwarded")[seq] for seq in range(len(expected))]
    assert len(published.deduped("run-forwarded")) == len(expected)
    assert [e.kind for e in events] == [e.kind for e in expected]
    assert [(e.kind, e.payload) for e in events] == [(e.kind, e.payload) for e in expected]
    assert published.runs["run-forwarded"].status == "waiting_for_tool"


def test_forwarded_ndjson_frames_are_keyed_by_the_run_with_deterministic_ids(settings, gateway):
    body = JSONL_STREAM.read_bytes()
    lines = [line for line in body.splitlines() if line.strip()]
    answer = forward(gateway, "run-jsonl", body, "application/x-ndjson", api="chat",
                     provider="vllm", tenant="acme")
    assert answer.status_code == 200, answer.text
    assert answer.json().items() >= {"accepted": len(lines), "api": "openai-chat",
                                     "provider": "vllm"}.items()
    frames = [f for _, f in frames_on_topic(settings) if f.run_key == "run-jsonl"]
    provider_frames = [f for f in frames if f.content_type != "application/vnd.modelevents.end-of-input"]
    assert [f.frame_id for f in provider_frames] == [f"s0:{i}" for i in range(len(lines))]
    assert [f.body for f in provider_frames] == lines
    assert {(f.api, f.provider, f.tenant, f.transport) for f in provider_frames} == {
        ("openai-chat", "vllm", "acme", "sse")}
    assert [f.frame_id for f in frames if f not in provider_frames] == ["s0:end-of-stream"]


def test_a_stream_forwarded_in_pieces_continues_its_frame_ids(settings, gateway):
    events = [e + b"\n\n" for e in SSE_STREAM.read_bytes().split(b"\n\n") if e.strip()]
    first, rest = b"".join(events[:3]), b"".join(events[3:])
    answer = forward(gateway, "run-pieces", first, "text/event-stream", api="responses",
                     stream="s1", end="none")
    assert answer.json()["next_index"] == 3
    answer = forward(gateway, "run-pieces", rest, "text/event-stream", api="responses",
                     stream="s1", index=3, end="run")
    assert answer.status_code == 200, answer.text
    ids = [f.frame_id for _, f in frames_on_topic(settings) if f.run_key == "run-pieces"]
    assert ids == [f"s1:{i}" for i in range(len(events))] + ["s1:end-of-run"]


def test_api_by_header_or_detected(gateway):
    body = SSE_STREAM.read_bytes()
    answer = httpx.post(f"{gateway.url}/v1/runs/run-h/frames", content=body, timeout=60,
                        headers={"content-type": "text/event-stream",
                                 "x-modelevents-api": "openai-responses"})
    assert answer.status_code == 200 and answer.json()["api"] == "openai-responses"
    answer = forward(gateway, "run-auto", body, "text/event-stream", api="auto")
    assert answer.status_code == 200 and answer.json()["api"] == "openai-responses"


def test_bad_forwards_are_refused_with_what_to_do(settings, gateway):
    body = SSE_STREAM.read_bytes()
    wrong_type = forward(gateway, "run-bad", body, "application/json", api="responses")
    assert wrong_type.status_code == 415 and "text/event-stream" in wrong_type.json()["error"]
    no_api = forward(gateway, "run-bad", body, "text/event-stream")
    assert no_api.status_code == 422 and "api=" in no_api.json()["error"]
    unknown = forward(gateway, "run-bad", body, "text/event-stream", api="cohere")
    assert unknown.status_code == 422 and "cohere" in unknown.json()["error"]
    bad_end = forward(gateway, "run-bad", body, "text/event-stream", api="responses", end="maybe")
    assert bad_end.status_code == 422
    empty = forward(gateway, "run-bad", b": just a comment\n\n", "text/event-stream",
                    api="responses")
    assert empty.status_code == 400
    big = b"data: {}\n\n" * (MAX_FORWARD_BYTES // 10 + 1)
    assert forward(gateway, "run-bad", big, "text/event-stream", api="responses").status_code == 413
    assert [f for _, f in frames_on_topic(settings) if f.run_key == "run-bad"] == []
