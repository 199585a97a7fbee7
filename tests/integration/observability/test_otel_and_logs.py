"""Observability (issue #16) against the real broker: the JSON log lines of a real worker, and
``modelevents otel export`` sending finished runs to an in-process OTLP/HTTP collector.

The collector is a real HTTP server in this process (:class:`Collector`) that decodes what it
receives with opentelemetry-proto's ExportTraceServiceRequest, as a collector would. The runs it
gets are events the project's adapters made from a small cassette written here (two Anthropic
calls: a tool_use turn with cache reads and writes, then the answer), published on the events
topic as the pipeline publishes them.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from modelevents.adapters.registry import normalize_bytes
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.services.kafka.settings import PipelineSettings
from tests.helpers import free_port
from tests.integration.consumers.test_consumer_api import publish
from tests.integration.pipeline import (
    FIXTURES,
    HANG_GUARD_S,
    collect,
    feed,
    kafka_args,
    run,
    start_gateway_process,
)
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.kafka

T0 = 1_764_000_000_000  # epoch ms of the runs' first event

# Two provider calls of one run: a tool_use turn (cache read 2048, cache write 300 tokens on top
# of 12 fresh ones), then the answer after the tool result (cache read 2348).
CASSETTE = b'''\
interactions:
- request: {method: POST, uri: "https://api.anthropic.com/v1/messages", body: "{}"}
  response:
    status: {code: 200, message: OK}
    headers: {Content-Type: [text/event-stream]}
    body:
      string: |+
        event: message_start
        data: {"type":"message_start","message":{"id":"msg_otel_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"cache_read_input_tokens":2048,"cache_creation_input_tokens":300,"output_tokens":1}}}

        event: content_block_start
        data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_otel_1","name":"get_weather","input":{}}}

        event: content_block_delta
        data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\\"city\\": \\"Oslo\\"}"}}

        event: content_block_stop
        data: {"type":"content_block_stop","index":0}

        event: message_delta
        data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":21}}

        event: message_stop
        data: {"type":"message_stop"}

- request: {method: POST, uri: "https://api.anthropic.com/v1/messages", body: "{}"}
  response:
    status: {code: 200, message: OK}
    headers: {Content-Type: [text/event-stream]}
    body:
      string: |+
        event: message_start
        data: {"type":"message_start","message":{"id":"msg_otel_2","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":40,"cache_read_input_tokens":2348,"output_tokens":1}}}

        event: content_block_start
        data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}

        event: content_block_delta
        data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"4 C and cloudy."}}

        event: content_block_stop
        data: {"type":"content_block_stop","index":0}

        event: message_delta
        data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":9}}

        event: message_stop
        data: {"type":"message_stop"}

'''


def timed(events: list[ModelEvent], t0: int = T0, step: int = 10) -> list[ModelEvent]:
    """The events as the pipeline stamps them: received_at advancing ``step`` ms per event."""
    return [dataclasses.replace(e, received_at=t0 + e.seq * step) for e in events]


# --- an OTLP/HTTP collector ----------------------------------------------------------------------


class Collector:
    """A real HTTP server taking OTLP/HTTP protobuf at /v1/traces; answers ``status``."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                collector.paths.append(self.path)
                assert self.headers.get("Content-Type") == "application/x-protobuf"
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector.requests.append(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(collector.status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[tuple[dict[str, Any], Span]]:
        """Every span received, with its resource's attributes."""
        out = []
        for request in self.requests:
            for resource_spans in request.resource_spans:
                resource = attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    out.extend((resource, span) for span in scope_spans.spans)
        return out

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def value_of(any_value: Any) -> Any:
    which = any_value.WhichOneof("value")
    if which == "array_value":
        return [value_of(v) for v in any_value.array_value.values]
    return getattr(any_value, which)


def attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: value_of(kv.value) for kv in pairs}


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector()
    yield server
    server.close()


def cli(*args: str, env: dict[str, str] | None = None, timeout: float = HANG_GUARD_S
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "modelevents.services.cli", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT,
                          env=dict(os.environ, **(env or {})))



def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` as a JSON object (fails on a line that is not one)."""
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert all(isinstance(line, dict) for line in lines)
    return lines


# --- JSON logs ---------------------------------------------------------------------------------


def test_a_worker_logs_json_lines_with_the_run_tenant_and_provider_of_a_dead_letter(
        settings: PipelineSettings, tmp_path: Path) -> None:
    stderr_path, stdout_path = tmp_path / "worker.err", tmp_path / "worker.out"
    with stderr_path.open("wb") as stderr, stdout_path.open("wb") as stdout:
        worker = subprocess.Popen(
            [sys.executable, "-m", "modelevents.services.cli", "--log-format", "json", "worker",
             *kafka_args(settings), "--partitions", str(settings.partitions),
             "--app-id", settings.app_id, "--workdir", str(tmp_path / "w"),
             "--session-timeout", "10"],
            stdout=stdout, stderr=stderr, start_new_session=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        deadline = time.monotonic() + HANG_GUARD_S
        while " ready: " not in stderr_path.read_text(errors="replace"):
            assert worker.poll() is None, stderr_path.read_text(errors="replace")[-4000:]
            assert time.monotonic() < deadline, "the worker did not get ready"
            time.sleep(0.1)
        # A frame naming an API no adapter reads: dead-lettered at stage translate.
        bad = ProviderFrame(frame_id="bad:0", run_key="run-logs-1", provider="openai",
                            api="openai-nonesuch", transport="stream", received_at=T0,
                            content_type="text/event-stream", body=b'{"type": "x"}',
                            tenant="acme", stream_id="bad", index=0)
        run(feed(settings, [bad]))
        published = run(collect(settings, lambda p: bool(p.dead)))
        assert published.dead[0].run_key == "run-logs-1"
        while "dead letter" not in stderr_path.read_text(errors="replace"):
            assert time.monotonic() < deadline, "no dead-letter line logged"
            time.sleep(0.1)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=HANG_GUARD_S)
    lines = json_lines(stderr_path.read_text())
    assert all({"ts", "level", "logger", "message"} <= set(line) for line in lines)
    assert all(line["ts"].endswith("Z") for line in lines)
    dead = [line for line in lines if line["message"].startswith("dead letter (translate)")]
    assert len(dead) == 1, lines
    assert dead[0]["level"] == "WARNING"
    assert dead[0]["logger"] == "modelevents.processor"
    assert (dead[0]["run_id"], dead[0]["tenant"], dead[0]["provider"]) == (
        "run-logs-1", "acme", "openai")
    assert "openai-nonesuch" in dead[0]["message"]
    # The worker's own lines (Faust's handlers replaced) are JSON too, at the level asked for.
    assert any(" ready: " in line["message"] and line["level"] == "INFO" for line in lines)


def test_a_gateway_in_json_mode_logs_its_own_and_uvicorns_lines_as_json(
        settings: PipelineSettings, tmp_path: Path) -> None:
    stderr_path = tmp_path / "gateway.err"
    gateway = start_gateway_process(settings, free_port(), stderr_path, "--log-format", "json")
    os.killpg(gateway.pid, signal.SIGTERM)  # once it answered ready
    assert gateway.wait(timeout=HANG_GUARD_S) == 0
    lines = json_lines(stderr_path.read_text())
    loggers = {line["logger"] for line in lines}
    assert {"modelevents.gateway", "uvicorn.error"} <= loggers, lines
    assert any(line["message"].startswith("gateway on http://") and line["level"] == "INFO"
               for line in lines)
    assert any(line["message"] == "gateway stopped" for line in lines)


def test_a_commands_error_is_a_json_line_in_json_mode_and_plain_text_otherwise(
        tmp_path: Path) -> None:
    missing = tmp_path / "no-such.sse"
    plain = cli("normalize", str(missing))
    assert plain.returncode == 2 and plain.stderr.startswith("modelevents: error: ")
    by_env = cli("normalize", str(missing), env={"MODELEVENTS_LOG_FORMAT": "json"})
    assert by_env.returncode == 2
    [line] = json_lines(by_env.stderr)
    assert line["level"] == "ERROR" and line["logger"] == "modelevents"
    assert line["message"].startswith("modelevents: error: ") and "no-such.sse" in line["message"]
    wrong = cli("normalize", str(missing), env={"MODELEVENTS_LOG_FORMAT": "yaml"})
    assert wrong.returncode == 2 and "MODELEVENTS_LOG_FORMAT='yaml'" in wrong.stderr
    assert "text, json" in wrong.stderr


# --- the OTel GenAI exporter --------------------------------------------------------------------


def test_finished_runs_reach_a_collector_as_genai_spans(make_settings, collector: Collector
                                                        ) -> None:
    settings = make_settings(partitions=2)
    loop = timed(normalize_bytes(CASSETTE, run_id="run-otel-1", tenant="acme").events)
    text = timed(normalize_bytes((FIXTURES / "openai-responses" / "text-with-usage.sse")
                                 .read_bytes(), run_id="run-otel-2").events, t0=T0 + 5000)
    # A run still awaiting its tool results: not finished, not exported.
    waiting = timed(normalize_bytes((FIXTURES / "openai-chat" / "tool-calls-finish-stop.sse")
                                    .read_bytes(), run_id="run-otel-3").events)
    assert waiting[-1].kind == "run.awaiting"
    # Interleaved, with a redelivered stretch of the first run (the consumer API drops it).
    records = [e for pair in zip(loop, text) for e in pair] + loop[len(text):] + loop[:5]
    run(publish(settings, records + waiting))

    done = cli("--log-format", "json", "otel", "export", "--endpoint", collector.endpoint,
               "--from", "earliest", "--idle-timeout", "3", "--service-name", "billing-traces",
               *kafka_args(settings))
    assert done.returncode == 0, done.stderr
    assert "exported 2 finished runs (6 spans)" in done.stdout, done.stdout
    assert "1 runs not finished" in done.stdout
    json_lines(done.stderr)
    assert collector.paths == ["/v1/traces", "/v1/traces"]  # one request per finished run

    spans = collector.spans()
    assert {resource["service.name"] for resource, _ in spans} == {"billing-traces"}
    by_run: dict[str, list[Span]] = {}
    for _, span in spans:
        by_run.setdefault(attributes(span.attributes)["modelevents.run_id"], []).append(span)
    assert set(by_run) == {"run-otel-1", "run-otel-2"}

    # The tool loop: a run span, two chat spans under it, the tool's span under the first.
    tree = by_run["run-otel-1"]
    assert len({s.trace_id for s in tree}) == 1
    [root] = [s for s in tree if s.name == "modelevents.run"]
    chats = sorted((s for s in tree if s.name.startswith("chat")), key=lambda s: s.start_time_unix_nano)
    [tool] = [s for s in tree if s.name.startswith("execute_tool")]
    assert len(tree) == 4 and root.parent_span_id == b""
    assert [c.parent_span_id for c in chats] == [root.span_id, root.span_id]
    assert tool.parent_span_id == chats[0].span_id
    assert [c.name for c in chats] == ["chat claude-haiku-4-5"] * 2
    assert all(c.kind == Span.SPAN_KIND_CLIENT for c in chats)
    assert tool.kind == Span.SPAN_KIND_INTERNAL

    first, second = (attributes(c.attributes) for c in chats)
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.provider.name"] == "anthropic"
    assert first["gen_ai.request.model"] == first["gen_ai.response.model"] == "claude-haiku-4-5"
    assert first["gen_ai.response.id"] == "msg_otel_1"
    assert first["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert first["modelevents.finish_reason"] == "tool_results"
    # Cached tokens are part of the input tokens (12 fresh + 2048 read + 300 written).
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (2360, 21)
    assert first["gen_ai.usage.cache_read.input_tokens"] == 2048
    assert first["gen_ai.usage.cache_creation.input_tokens"] == 300
    assert first["modelevents.tenant"] == "acme"
    assert second["gen_ai.response.id"] == "msg_otel_2"
    assert second["gen_ai.response.finish_reasons"] == ["end_turn"]
    assert (second["gen_ai.usage.input_tokens"], second["gen_ai.usage.output_tokens"]) == (2388, 9)
    assert second["gen_ai.usage.cache_read.input_tokens"] == 2348
    assert "gen_ai.usage.cache_creation.input_tokens" not in second

    tool_attrs = attributes(tool.attributes)
    assert tool_attrs["gen_ai.operation.name"] == "execute_tool"
    assert tool_attrs["gen_ai.tool.name"] == "get_weather"
    assert tool_attrs["gen_ai.tool.call.id"] == "toolu_otel_1"
    assert tool_attrs["gen_ai.tool.type"] == "function"

    # Timestamps are the events' received_at: the first call from seq 0 to its run.awaiting,
    # the second from its run.started to run.finished, the run over both.
    ms = 1_000_000
    awaiting = next(e for e in loop if e.kind == "run.awaiting")
    call_2 = [e for e in loop if e.kind == "run.started"][1]
    assert (chats[0].start_time_unix_nano, chats[0].end_time_unix_nano) == (
        T0 * ms, awaiting.received_at * ms)
    assert (chats[1].start_time_unix_nano, chats[1].end_time_unix_nano) == (
        call_2.received_at * ms, loop[-1].received_at * ms)
    assert (root.start_time_unix_nano, root.end_time_unix_nano) == (
        T0 * ms, loop[-1].received_at * ms)
    tool_call = next(e for e in loop if e.kind == "tool.call")
    assert tool.start_time_unix_nano == tool_call.received_at * ms
    root_attrs = attributes(root.attributes)
    assert root_attrs["modelevents.status"] == "completed"
    assert root_attrs["modelevents.calls"] == 2 and root_attrs["modelevents.partial"] is False

    # The OpenAI run: one call, its cache reads and reasoning tokens.
    [chat] = [s for s in by_run["run-otel-2"] if s.name.startswith("chat")]
    chat_attrs = attributes(chat.attributes)
    assert chat_attrs["gen_ai.provider.name"] == "openai"
    assert chat_attrs["gen_ai.response.model"] == "gpt-5-mini-2025-08-07"
    assert chat_attrs["gen_ai.response.id"] == "resp_text"
    assert chat_attrs["gen_ai.response.finish_reasons"] == ["completed"]
    assert chat_attrs["gen_ai.usage.cache_read.input_tokens"] == 32
    assert chat_attrs["modelevents.usage.reasoning_tokens"] == 8
    assert chat.start_time_unix_nano == (T0 + 5000) * ms


def test_a_collector_that_refuses_stops_the_export_with_an_error(make_settings) -> None:
    settings = make_settings(partitions=1)
    events = timed(normalize_bytes(CASSETTE, run_id="run-refused", tenant="acme").events)
    run(publish(settings, events))
    refusing = Collector(status=400)
    try:
        done = cli("otel", "export", "--endpoint", refusing.endpoint + "/v1/traces",
                   "--from", "earliest", "--idle-timeout", "3", "--give-up-after", "1",
                   *kafka_args(settings))
    finally:
        refusing.close()
    assert done.returncode == 2, done.stderr
    assert (f"modelevents: error: the collector at {refusing.endpoint}/v1/traces did not take "
            "the spans of run run-refused within 1 s") in done.stderr
    assert len(refusing.requests) >= 2  # tried again before giving up


def test_bad_endpoints_and_headers_are_clear_errors() -> None:
    bad = cli("otel", "export", "--endpoint", "localhost:4318", "--idle-timeout", "1")
    assert bad.returncode == 2 and "--endpoint 'localhost:4318': an http(s) URL" in bad.stderr
    header = cli("otel", "export", "--header", "x-api-key", "--idle-timeout", "1")
    assert header.returncode == 2 and "--header 'x-api-key': NAME=VALUE" in header.stderr
