"""The demo's downstream half (services/cli/demo_stages.py) without Kafka: its policy, that the
recordings it plays ask for what its tools database holds, and its OTLP/HTTP collector. The whole
demo against the real broker: tests/integration/cli/test_demo.py."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from modelevents.adapters.registry import normalize_bytes
from modelevents.consumers.otel_genai import RunFolder, SpanExporter
from modelevents.consumers.tools.sqlite_tools import make_registry
from modelevents.services.cli import demo_stages
from tests.paths import FIXTURES


def _tool_calls(scenario: str) -> list[tuple[str, dict]]:
    path = FIXTURES / f"{scenario}.sse"
    events = normalize_bytes(path.read_bytes(), run_id="r", source_name=path.name).events
    return [(e.payload.tool_name, json.loads(e.payload.arguments))  # type: ignore[union-attr]
            for e in events if e.kind == "tool.call"]


def test_the_recordings_ask_for_what_the_demo_seeds_and_its_policy_allows() -> None:
    scenarios = dict(demo_stages.TOOL_SESSIONS)
    weather = _tool_calls(scenarios["tools-weather"])
    assert sorted(a["city"] for _, a in weather) == sorted(c for c, *_ in demo_stages.WEATHER)
    assert _tool_calls(scenarios["tools-note"]) == [
        ("add_note", {"notebook": demo_stages.NOTEBOOK, "text": demo_stages.NOTE})]
    with tempfile.TemporaryDirectory() as tmp:
        tools = {c.name: c for c in make_registry(db=Path(tmp) / "t.db")}
    policy, tenant = demo_stages.demo_policy(), demo_stages.TOOLS_TENANT
    for _, arguments in weather:
        assert policy.check(tenant, "r", tools["get_weather"], arguments).verdict == "allow"
    [(_, note)] = _tool_calls(scenarios["tools-note"])
    assert policy.check(tenant, "r", tools["add_note"], note).verdict == "approve"
    assert policy.check(tenant, "r", tools["add_note"], {**note, "notebook": "other"}
                        ).verdict == "deny"
    assert policy.check("default", "r", tools["get_weather"], weather[0][1]).verdict == "deny"
    rules = policy.tenant(tenant)
    assert rules is not None and rules.auto_continue and rules.continue_target


def test_the_collector_decodes_the_spans_an_exporter_sends() -> None:
    path = FIXTURES / "cassettes" / "anthropic-tool-loop.yaml"
    events = normalize_bytes(path.read_bytes(), run_id="r", source_name=path.name).events
    folder = RunFolder()
    [run] = [r for r in map(folder.feed, events) if r is not None]
    collector = demo_stages.SpanCollector()
    exporter = SpanExporter(collector.endpoint, give_up_after=5.0)
    try:
        sent = exporter.export(run)
    finally:
        exporter.close()
        collector.close()
    assert sent == len(collector.spans) == collector.requests + len(run.calls) + sum(
        len(call.tools) for call in run.calls)
    assert collector.spans[-1] == "modelevents.run" and collector.bytes > 0
    assert any(name.startswith("execute_tool ") for name in collector.spans)


def test_demo_help_names_every_stage_and_keep() -> None:
    result = subprocess.run([sys.executable, "-m", "modelevents.services.cli", "demo", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    for stage in ("normalize", "tool executor", "approval", "archive", "OpenTelemetry", "UI",
                  "--keep"):
        assert stage in text, stage
