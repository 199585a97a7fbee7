"""The downstream half of ``modelevents demo`` (services/cli/commands/demo.py): what the consumers
do with the runs the upstream half left on the demo's topics, each stage one line of what it
proved.

1. **tools** — the tool executor (``consumers/tools``, the SQLite example tools) in this process,
   its own consumer group, a policy for the tenant ``demo-tools`` only: two runs started through
   the gateway for that tenant; one asks for ``get_weather`` twice (executed, receipts written,
   the run continued through the gateway by ``auto_continue``, completed), the other for the
   write ``add_note``, which waits for an approval the demo grants over HTTP
   (``POST /v1/runs/{id}/approvals/{approval_id}``) before the note is written to SQLite.
2. **archive** — the audit archive of the demo's topics up to their ends (``audit run
   --until-end``), then ``audit verify``: the chain, every run, every tool result's receipt.
3. **otel** — this demo's finished runs exported as OpenTelemetry GenAI spans over OTLP/HTTP to
   a collector in this process, which decodes what it receives.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import shutil
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from modelevents.services.errors import DemoError
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["TOOLS_TENANT", "NOTEBOOK", "NOTE", "ToolsOutcome", "run_tools", "archive_and_verify",
           "export_spans", "SpanCollector"]

TOOLS_TENANT = "demo-tools"
NOTEBOOK = "demo"
NOTE = "Pack an umbrella for Paris"  # what tool-call-write-note.sse asks add_note to write
# The cities tool-call-parallel.sse asks get_weather for, in the tools' weather table.
WEATHER = (("Paris", 14.0, "cloudy"), ("Rome", 21.0, "sunny"))
# Where auto_continue sends a run's next call once its tool results are in.
CONTINUE_TARGET = {"provider": "anthropic", "api": "anthropic-messages",
                   "model": "sim:anthropic-messages/text"}
# (label, simulator scenario) of the runs the executor serves.
TOOL_SESSIONS = (("tools-weather", "openai-responses/tool-call-parallel"),
                 ("tools-note", "openai-responses/tool-call-write-note"))
TERMINAL = frozenset({"completed", "incomplete", "failed", "cancelled"})

Say = Callable[[str], None]


def demo_policy() -> Any:
    from modelevents.consumers.tools.policy import Policy

    return Policy.from_dict({"tenants": {TOOLS_TENANT: {
        "tools": ["get_weather", "add_note"], "scopes": {"add_note": [f"notebook:{NOTEBOOK}"]},
        "max_calls_per_run": 5, "approve_writes": True, "auto_continue": True,
        "continue_target": CONTINUE_TARGET}}})


@dataclass
class ToolsOutcome:
    run_ids: dict[str, str]  # label → run id
    states: dict[str, dict[str, Any]] = field(default_factory=dict)  # run id → final state
    finals: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # run id → (tool,
    # outcome) of its final receipts
    approval: str | None = None
    notes: list[tuple[int, str, str]] = field(default_factory=list)  # (id, notebook, text)
    continued: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        weather, note = (self.run_ids[label] for label, _ in TOOL_SESSIONS)
        return (all(self.states.get(r, {}).get("status") == "completed"
                    for r in self.run_ids.values())
                and sorted(self.finals.get(weather, [])) == [("get_weather", "succeeded")] * 2
                and self.finals.get(note) == [("add_note", "succeeded")]
                and [n[1:] for n in self.notes] == [(NOTEBOOK, NOTE)]
                and sorted(self.continued) == sorted(self.run_ids.values()))


async def _racing(step: Awaitable[Any], executor: asyncio.Task, deadline: float,
                  what: str) -> Any:
    """``step``, unless the executor ends first (an error) or the deadline passes."""
    task = asyncio.ensure_future(step)
    done, _ = await asyncio.wait({task, executor}, timeout=max(0.0, deadline - time.monotonic()),
                                 return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        return task.result()
    task.cancel()
    if executor in done:
        executor.result()  # its exception, if any
        raise DemoError(f"the tool executor stopped while {what}")
    raise DemoError(f"timed out {what}")


async def _state_until(http: Any, run_id: str, ready: Callable[[dict[str, Any]], bool]
                       ) -> dict[str, Any]:
    while True:
        answer = await http.get(f"/v1/runs/{run_id}")
        state = answer.json().get("state") if answer.status_code == 200 else None
        if state is not None and ready(state):
            return dict(state)
        await asyncio.sleep(0.1)


async def _grant(http: Any, run_id: str) -> str:
    """Grant the approval ``run_id`` waits for, as an operator would over HTTP."""
    state = await _state_until(http, run_id, lambda s: bool(s.get("pending_approvals")))
    [approval] = state["pending_approvals"]
    answer = await http.post(f"/v1/runs/{run_id}/approvals/{approval}", json={
        "granted": True, "reason": "the demo grants it", "decided_by": "modelevents demo"})
    if answer.status_code != 202:
        raise DemoError(f"granting approval {approval} of {run_id} answered "
                        f"{answer.status_code}: {answer.text}")
    return str(approval)


async def run_tools(settings: PipelineSettings, gateway_url: str, tag: str, workdir: Path,
                    deadline: float, say: Say) -> ToolsOutcome:
    import httpx

    from modelevents.consumers.tools.executor import Executor
    from modelevents.consumers.tools.sqlite_tools import make_registry

    db = workdir / "tools.db"
    db.unlink(missing_ok=True)
    registry = make_registry(db=db)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:
        conn.executemany("INSERT INTO weather VALUES (?, ?, ?)", WEATHER)
    executor = Executor(registry, demo_policy(), settings, group=f"{settings.app_id}-tools",
                        gateway_url=gateway_url, tenant=TOOLS_TENANT)
    outcome = ToolsOutcome({label: f"demo-{tag}-{label}" for label, _ in TOOL_SESSIONS})
    ready = asyncio.Event()
    running = asyncio.create_task(executor.run(ready=ready.set))
    try:
        await _racing(ready.wait(), running, deadline, "starting the tool executor")
        say(f"  tool executor: group {executor.group}, tenant {TOOLS_TENANT}, tools "
            f"{', '.join(c.name for c in registry)}, SQLite {db}")
        declarations = [contract.declaration() for contract in registry]
        async with httpx.AsyncClient(base_url=gateway_url, timeout=30) as http:
            for label, scenario in TOOL_SESSIONS:
                run_id = outcome.run_ids[label]
                answer = await http.post("/v1/runs", json={
                    "run_id": run_id, "tenant": TOOLS_TENANT, "max_output_tokens": 512,
                    "target": {"provider": "openai", "api": "openai-responses",
                               "model": f"sim:{scenario}"},
                    "transcript": [{"role": "user", "parts": [{"type": "text", "text": (
                        "Weather in Paris and Rome?" if label == "tools-weather"
                        else "Note for me: pack an umbrella for Paris")}]}],
                    "tools": declarations})
                if answer.status_code != 202:
                    raise DemoError(f"POST /v1/runs for {label} answered {answer.status_code}: "
                                    f"{answer.text}")
                say(f"  POST {gateway_url}/v1/runs → 202 {run_id} (tenant {TOOLS_TENANT}, "
                    f"{scenario})")
            note_run = outcome.run_ids["tools-note"]
            outcome.approval = await _racing(_grant(http, note_run), running, deadline,
                                             f"waiting for {note_run} to ask an approval")
            say(f"  {note_run}: add_note asked approval {outcome.approval}; granted: POST "
                f"{gateway_url}/v1/runs/{note_run}/approvals/{outcome.approval} → 202")
            for run_id in outcome.run_ids.values():
                outcome.states[run_id] = await _racing(
                    _state_until(http, run_id, lambda s: s["status"] in TERMINAL
                                 and not s["open_tool_calls"]),
                    running, deadline, f"waiting for {run_id} to end")
    finally:
        running.cancel()
        # What stopped it early was raised already (_racing), or shows in the outcome.
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await running
    for receipt in executor.receipts.values():
        if receipt.run_id in outcome.states and receipt.phase == "finished":
            outcome.finals.setdefault(receipt.run_id, []).append(
                (receipt.tool_name, receipt.outcome or "?"))
    if executor.continuation is not None:
        outcome.continued = list(executor.continuation.posted)
    with contextlib.closing(sqlite3.connect(db)) as conn:
        outcome.notes = conn.execute("SELECT id, notebook, text FROM notes").fetchall()
    return outcome


def report_tools(outcome: ToolsOutcome, db: Path) -> None:
    weather, note = (outcome.run_ids[label] for label, _ in TOOL_SESSIONS)
    for run_id, what in ((weather, "get_weather ×2 (Paris, Rome)"),
                         (note, f"add_note, approval {outcome.approval} granted over HTTP")):
        state = outcome.states.get(run_id, {})
        finals = ", ".join(f"{tool} {result}" for tool, result in outcome.finals.get(run_id, []))
        print(f"tools: {run_id}: {what} → receipts: {finals or 'none'}; "
              f"{'continued through the gateway' if run_id in outcome.continued else 'not continued'}"
              f" → {state.get('status', '?')}")
    rows = "; ".join(f"note #{i} in notebook {book!r}: {text!r}" for i, book, text in outcome.notes)
    print(f"tools: SQLite {db}: {rows or 'no note written'}")
    print(f"tools: {'✓' if outcome.ok else '✗'} the executor ran both runs' calls under policy, "
          "the write only once granted, and each run completed on its continuation")


# --- the archive --------------------------------------------------------------------------------


def archive_and_verify(settings: PipelineSettings, out: Path, tag: str,
                       tool_runs: list[str]) -> tuple[bool, Any]:
    """Archive the demo's topics up to their ends into ``out`` (afresh), verify it; (ok, report)."""
    from modelevents.consumers.audit.verify import verify_archive
    from modelevents.consumers.audit.writer import archive_topics

    shutil.rmtree(out, ignore_errors=True)
    asyncio.run(archive_topics(settings, out, group=f"{settings.app_id}-audit-{tag}",
                               until_end=True))
    report = verify_archive(out)
    s = report.summary()
    mine = [f for f in report.problems if f"demo-{tag}-" in f.where
            or f.check in ("files", "chain", "records")]
    receipts = {run_id: len(report.receipts.get(run_id, [])) for run_id in tool_runs}
    # Each tool call: a started and a finished receipt; the write also its awaiting_approval one.
    ok = report.ok and not mine and all(receipts.values())
    print(f"archive: {'verified' if ok else 'NOT verified'}: {s['events']} events, "
          f"{s['receipts']} receipts ({', '.join(f'{n} of {r}' for r, n in receipts.items())}), "
          f"{s['runs']} runs in {s['files']} files, "
          f"{'chain intact' if report.ok else f'{len(report.problems)} problems'} ({out})")
    for finding in report.problems[:10]:
        print(f"  {finding.line('FAIL')}")
    return ok, report


# --- OpenTelemetry ------------------------------------------------------------------------------


def _body_of(request: BaseHTTPRequestHandler) -> bytes:
    """A POST's body, gunzipped when the exporter compressed it."""
    body = request.rfile.read(int(request.headers.get("Content-Length", 0)))
    gzipped = request.headers.get("Content-Encoding") == "gzip"
    return gzip.decompress(body) if gzipped else body


class SpanCollector:
    """An OTLP/HTTP collector in this process: takes ``POST /v1/traces`` (protobuf), decodes each
    request with opentelemetry-proto and counts the spans."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        self.requests = 0
        self.spans: list[str] = []  # span names, as received
        self.bytes = 0
        lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = _body_of(self)
                request = ExportTraceServiceRequest.FromString(body)
                with lock:
                    collector.requests += 1
                    collector.bytes += len(body)
                    collector.spans += [span.name for resource in request.resource_spans
                                        for scope in resource.scope_spans for span in scope.spans]
                # An empty ExportTraceServiceResponse (all spans taken) is zero bytes.
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *_: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, name="otlp-collector",
                         daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def export_spans(settings: PipelineSettings, finished: list[str]) -> bool:
    """Export the runs ``finished`` (their events on ``events``) to an in-process collector."""
    from modelevents.consumers.client import subscribe
    from modelevents.consumers.otel_genai import KINDS, RunFolder, SpanExporter

    collector = SpanCollector()
    exporter = SpanExporter(collector.endpoint, give_up_after=10.0)
    folder, exported = RunFolder(), set()
    try:
        with subscribe("events", run_ids=finished, kinds=KINDS, settings=settings,
                       idle_timeout=5.0) as events:
            for event in events:
                run = folder.feed(event)
                if run is not None:
                    exporter.export(run)
                    exported.add(run.run_id)
                    if exported >= set(finished):
                        break
    finally:
        exporter.close()
        collector.close()
    tools = sum(name.startswith("execute_tool") for name in collector.spans)
    ok = exported == set(finished) and len(collector.spans) == exporter.spans > 0
    print(f"otel: {'✓' if ok else '✗'} {exporter.runs} finished runs exported as "
          f"{exporter.spans} GenAI spans; the in-process collector received {len(collector.spans)} "
          f"spans ({tools} execute_tool) in {collector.requests} OTLP/HTTP requests, "
          f"{collector.bytes:,} bytes")
    return ok
