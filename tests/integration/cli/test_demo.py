"""`modelevents demo`, the README's main job, run as a user runs it against the real broker."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelevents.consumers.audit.verify import verify_archive
from modelevents.consumers.tools.receipts import decode_receipt
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.run_state import RunState
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings

pytestmark = pytest.mark.kafka

HANG_GUARD_S = 300  # a demo that hangs fails the test instead of the suite


def _demo(kafka_broker: str, state: Path, *args: str) -> tuple[list[str], dict[str, str]]:
    prefix = f"demo{uuid.uuid4().hex[:8]}."
    env = {**os.environ, "KAFKA_BOOTSTRAP_SERVERS": kafka_broker, "XDG_STATE_HOME": str(state)}
    command = [sys.executable, "-m", "modelevents.services.cli", "demo", "--prefix", prefix,
               "--rate", "1000", "--duplicate", "0.3", *args]
    return command, env


def _read(settings: PipelineSettings, topic: str) -> list[Any]:
    """Every record of ``topic`` of the demo's prefix, as it is on the broker now."""
    async def read() -> list[Any]:
        return [r async for r in clients.read_records(settings, topic, to_end=True, timeout=2.0)
                if r is not None]
    return asyncio.run(read())


def test_demo_plays_every_api_through_the_gateway_and_the_pipeline_and_matches_normalize(
        kafka_broker, tmp_path):
    command, env = _demo(kafka_broker, tmp_path)
    result = subprocess.run(command, capture_output=True, text=True, env=env,
                            timeout=HANG_GUARD_S)
    out = result.stdout
    print(out, result.stderr)  # shown when the test fails
    assert result.returncode == 0, out + result.stderr
    assert "all runs match" in out
    for api in ("openai-responses", "openai-chat", "anthropic-messages", "gemini-interactions",
                "gemini-generate"):
        assert api in out
    # Eight recordings fed as frames, seven runs through the gateway and the simulator (one
    # polled in the background, whose events no recording gives offline).
    assert out.count("✓ as normalize") == 14
    assert out.count("✓ completed as polled") == 1
    assert len(re.findall(r"^demo-\S+ +gateway ", out, re.MULTILINE)) == 7
    assert "duplicates" in out and "(0 duplicates)" not in out
    # Each answered 202: seven upstream runs, two for the tool executor.
    assert len(re.findall(r"POST http://127\.0\.0\.1:\d+/v1/runs → 202", result.stderr)) == 9
    # The worker's state and log in the demo's state directory under $XDG_STATE_HOME.
    state_dir = tmp_path / "modelevents" / "demo"
    log = state_dir / "worker.log"
    assert f"(log: {log})" in result.stderr and log.stat().st_size > 0

    # --- the downstream half, from its output and from what it left on the topics ----------------
    settings = dataclasses.replace(PipelineSettings(bootstrap_servers=kafka_broker),
                                   topic_prefix=command[command.index("--prefix") + 1])
    [weather] = re.findall(r"^tools: (demo-\w+-tools-weather): get_weather", out, re.MULTILINE)
    [note] = re.findall(r"^tools: (demo-\w+-tools-note): add_note", out, re.MULTILINE)
    assert "tools: ✓" in out, out
    states: dict[str, RunState] = {}
    for record in _read(settings, "runs"):
        states[record.value.run_id] = record.value
    for run_id in (weather, note):
        final = states[run_id]
        assert (final.status, final.tenant, final.open_tool_calls, final.needs_reconciliation) == (
            "completed", "demo-tools", [], False), final
    receipts = [decode_receipt(r.raw) for r in _read(settings, "receipts")]
    assert sorted((r.tool_name, r.phase, r.outcome) for r in receipts if r.run_id == weather) == (
        [("get_weather", "finished", "succeeded")] * 2 + [("get_weather", "started", None)] * 2)
    assert sorted((r.phase, r.outcome) for r in receipts if r.run_id == note) == [
        ("awaiting_approval", None), ("finished", "succeeded"), ("started", None)]
    events: list[ModelEvent] = [r.value for r in _read(settings, "events")
                                if r.value.run_id == note]
    [asked] = [e.payload for e in events if e.kind == "approval.requested"]
    [resolved] = [e.payload for e in events if e.kind == "approval.resolved"]
    assert resolved.approval_id == asked.approval_id and resolved.decision == "granted"
    assert f"approval {asked.approval_id} granted over HTTP" in out
    # Each run went on through the gateway after its results: two provider calls, completed.
    assert sum(e.kind == "run.started" for e in events) == 2
    with sqlite3.connect(state_dir / "tools.db") as db:
        assert db.execute("SELECT notebook, text FROM notes").fetchall() == [
            ("demo", "Pack an umbrella for Paris")]
    # The archive the demo wrote verifies on its own, with both tool runs' receipts.
    assert re.search(r"^archive: verified: \d+ events, \d+ receipts .*chain intact", out,
                     re.MULTILINE), out
    report = verify_archive(state_dir / "archive")
    assert report.ok, report.problems
    assert len(report.receipts[weather]) == 4 and len(report.receipts[note]) == 3
    assert report.events == sum(1 for _ in _read(settings, "events"))
    # Every run that ended (on `runs`) was exported, and the collector received its spans.
    ended = [s for s in states.values() if s.status in ("completed", "incomplete", "failed",
                                                        "cancelled")]
    otel = re.search(r"^otel: ✓ (\d+) finished runs exported as (\d+) GenAI spans; the in-process "
                     r"collector received (\d+) spans \((\d+) execute_tool\)", out, re.MULTILINE)
    assert otel, out
    runs, sent, received, tools = map(int, otel.groups())
    assert runs == len(ended) and sent == received >= 2 * runs and tools >= 3
    assert re.search(r"^UI: http://127\.0\.0\.1:\d+/ui ", out, re.MULTILINE)


def test_demo_keep_leaves_the_gateway_and_its_ui_running_until_stopped(kafka_broker, tmp_path):
    command, env = _demo(kafka_broker, tmp_path, "--keep")
    with open(tmp_path / "stderr", "w") as stderr:
        demo = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True,
                                env=env)
        try:
            lines = []
            assert demo.stdout is not None
            for line in demo.stdout:  # until the demo says it keeps running
                lines.append(line)
                if line.startswith("kept running"):
                    break
            out = "".join(lines)
            assert "all runs match" in out, out + (tmp_path / "stderr").read_text()
            [ui] = re.findall(r"^UI: (http://127\.0\.0\.1:\d+/ui) ", out, re.MULTILINE)
            assert f"(UI {ui})" in lines[-1] and "Ctrl-C stops" in lines[-1]
            time.sleep(1)  # still there a moment later, not only while the demo was ending
            page = httpx.get(ui, timeout=30, follow_redirects=True)
            assert page.status_code == 200 and "<html" in page.text.lower()
            assert httpx.get(ui.replace("/ui", "/v1/runs"), timeout=30).json()["runs"]
            demo.send_signal(signal.SIGINT)  # Ctrl-C
            assert demo.wait(timeout=60) == 0
        finally:
            if demo.poll() is None:
                demo.kill()
                demo.wait()
    with pytest.raises(httpx.ConnectError):
        httpx.get(ui, timeout=5)
