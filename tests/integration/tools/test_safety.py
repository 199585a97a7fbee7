"""The tool executor never runs an effect twice and never falls over on one call (issue #27):
against the real broker and worker, the executor in-process or as `modelevents tools run`
(SIGKILL included).

- a write without a reconcile hook, killed mid-effect, is not run again: it ends ``unknown``,
  and the run is flagged for reconciliation, not continued;
- whatever a tool returns or raises (what JSON cannot hold, more than a Kafka record) becomes
  text, and an exception after the tool returned never makes a write "failed" or runs it again;
- hostile arguments, from a tenant allowed nothing and from an allowed one, are refused one by
  one, and a harmless call after them is answered by the same process;
- arguments too large for their ``tool.call`` (elided) are rebuilt from the run's deltas.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from modelevents.consumers.tools.executor import Executor
from modelevents.schemas.run_state import RunState
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local import feeder
from tests.integration.pipeline import feed, run, with_end_markers
from tests.integration.processor.test_big_runs import responses_tool_run
from tests.integration.tools import awkward_tools
from tests.integration.tools import test_executor as tools
from tests.integration.tools.test_executor import (  # noqa: F401 (fixtures)
    RunningExecutor,
    db,
    settings,
    start_executor,
    tenant,
)
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.kafka


def _process(settings: PipelineSettings, options: list[str], policy: Path, tenants: list[str],
             group: str, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "modelevents.services.cli", "tools", "run", *options,
         "--policy", str(policy), *[a for t in tenants for a in ("--tenant", t)],
         "--group", group, "--bootstrap-servers", settings.bootstrap_servers,
         "--prefix", settings.topic_prefix],
        stdout=log.open("ab"), stderr=subprocess.STDOUT, cwd=REPO_ROOT,
        env={**os.environ, "MODELEVENTS_PARTITIONS": str(settings.partitions)})


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


def _state(settings: PipelineSettings, run_id: str) -> RunState:
    async def read() -> list[RunState]:
        return [r.value async for r in clients.read_records(settings, "runs", run_id=run_id,
                                                            to_end=True, timeout=2.0)
                if r is not None and isinstance(r.value, RunState)]
    return run(read())[-1]


def _about(event: Any) -> dict[str, Any]:
    return orjson.loads(event.envelope.body)


@pytest.fixture
def awkward(settings: PipelineSettings, tmp_path: Path, tenant: str) -> Iterator[Executor]:
    running = RunningExecutor(Executor(
        awkward_tools.make_registry(tmp_path / "effects"),
        tools.policy_for(tenant, approve_writes=False), settings, tenant=tenant,
        group=f"tools-{uuid.uuid4().hex[:8]}", retry_backoff_s=0.05))
    yield running.executor
    running.stop()


# --- no effect twice --------------------------------------------------------------------------


def test_a_write_killed_mid_effect_without_a_reconcile_hook_ends_unknown_and_runs_once(
        settings, tenant, tmp_path):
    policy = tmp_path / "policy.json"
    policy.write_bytes(orjson.dumps({"tenants": {tenant: {"approve_writes": False}}}))
    effects, log = tmp_path / "effects", tmp_path / "executor.log"
    options = ["--tools", "tests.integration.tools.awkward_tools", "--db", str(effects)]
    group = f"tools-{tenant}"
    first = _process(settings, options, policy, [tenant], group, log)
    try:
        run_id = tools.propose(settings, tenant, [("append_line", "c1", '{"text": "paid"}')])
        deadline = time.monotonic() + tools.SETTLE_S
        while awkward_tools.effects(effects) == []:  # the effect happened; the tool blocks
            assert time.monotonic() < deadline and first.poll() is None, log.read_text()
            time.sleep(0.02)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert [r.phase for r in tools.receipts_of(settings, run_id)] == ["started"]
        second = _process(settings, options, policy, [tenant], group, log)
        try:
            result = tools.results_of(settings, run_id, 1)["c1"]
            assert second.poll() is None, log.read_text()
        finally:
            _stop(second)
    finally:
        if first.poll() is None:
            first.kill()
    assert awkward_tools.effects(effects) == ["paid"]  # once: not run again
    assert result.payload.is_error and "unknown" in result.payload.output
    assert "not run again" in result.payload.output
    assert _about(result)["outcome"] == "unknown"
    final = tools.receipts_of(settings, run_id)[-1]
    assert (final.phase, final.outcome, final.attempt) == ("finished", "unknown", 1)
    # The run waits for the application, flagged: it neither goes on nor looks clean.
    tools.events_of(settings, run_id, lambda es: any(e.kind == "tool.result" for e in es), "result")
    state = _state(settings, run_id)
    assert state.status == "waiting_for_tool" and state.needs_reconciliation
    assert any("outcome is unknown" in note for note in state.reconciliation_notes)


def test_an_exception_after_a_write_returned_neither_fails_it_nor_runs_it_again(
        settings, awkward, tenant, tmp_path):
    run_id = tools.propose(settings, tenant, [("write_then_raise", "c1", '{"text": "shipped"}')])
    result = tools.results_of(settings, run_id, 1)["c1"]
    final = [r for r in tools.receipts_of(settings, run_id) if r.phase == "finished"]
    assert [(r.outcome, r.error_class) for r in final] == [("succeeded", "internal")]
    assert not result.payload.is_error and "ran and returned" in result.payload.output
    assert "RuntimeError" in result.payload.output
    time.sleep(1)  # a retry, were there one, would have appended by now
    assert awkward_tools.effects(tmp_path / "effects") == ["shipped"]


# --- shaping what a tool returns or raises ----------------------------------------------------


def test_what_json_cannot_hold_and_what_a_record_cannot_hold_become_text(
        settings, awkward, tenant):
    kinds = [*awkward_tools.ODD_KINDS, "huge_error", "huge_exception"]
    run_id = tools.propose(settings, tenant, [("odd_output", kind, orjson.dumps({"kind": kind}).decode())
                                        for kind in kinds])
    results = tools.results_of(settings, run_id, len(kinds))
    out = {kind: e.payload for kind, e in results.items()}
    assert orjson.loads(out["decimal"].output) == {"price": "12.50"}
    assert orjson.loads(out["set"].output) == {"tags": ["a", "b"]}
    assert orjson.loads(out["bytes"].output) == {"blob": "base64:AP8="}
    assert orjson.loads(out["int_key"].output) == {"1": "one", "(2, 3)": "pair"}
    assert orjson.loads(out["object"].output) == {"thing": "Opaque()"}
    assert "[cut: nested too deep" in out["deep"].output
    assert "[cut: nested too deep" in out["cycle"].output
    assert "[output truncated: 2000000 bytes" in out["huge"].output
    assert len(out["huge"].output) < 300_000 and _about(results["huge"])["truncated"]
    for kind in ("huge_error", "huge_exception"):
        assert out[kind].is_error and len(out[kind].output) < 10_000, kind
        assert "[output truncated" in out[kind].output or "[truncated" in out[kind].output
    assert not any(out[k].is_error for k in awkward_tools.ODD_KINDS)
    receipts = tools.receipts_of(settings, run_id)
    assert sorted(r.tool_call_id for r in receipts if r.phase == "finished") == sorted(kinds)


# --- hostile arguments ------------------------------------------------------------------------


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


HOSTILE = {
    "deep_1000": '{"city": ' + _deep(1000) + "}",
    "deep_top": _deep(1000),
    "deep_10000": '{"notebook": "team", "text": ' + _deep(10_000) + "}",
    "deep_objects": '{"a":' * 2000 + "1" + "}" * 2000,
    "deep_200": '{"city": "Paris", "unit": ' + _deep(200) + "}",
    "string": '"Paris"',
    "number": "42",
    "null": "null",
    "array": '["Paris"]',
    "nan": '{"city": NaN}',
    "infinity": '{"city": 1e999}',
    "huge_int": '{"city": 123456789012345678901234567890}',
    "lone_surrogate": '{"city": "\\ud800"}',
    "huge_string": '{"city": "' + "x" * 700_000 + '"}',
    "huge_note": tools.note_args("team", "y" * 700_000),
    "empty": "",
    "not_json": "{city: Paris",
}


def test_hostile_arguments_are_refused_and_a_harmless_call_after_them_is_answered(
        settings, db, tmp_path):
    allowed, nobody = f"t{uuid.uuid4().hex[:10]}", f"t{uuid.uuid4().hex[:10]}"
    policy = tmp_path / "policy.json"  # `nobody` is not in it: it may call nothing
    policy.write_bytes(orjson.dumps({"tenants": {allowed: tools.WRITER}}))
    log, group = tmp_path / "executor.log", f"tools-{allowed}"
    options = ["--db", str(db)]  # the shipped examples: get_weather, add_note
    process = _process(settings, options, policy, [allowed, nobody], group, log)
    runs: dict[str, str] = {}
    try:
        for who in (nobody, allowed):
            calls = [(tool, f"{tool}-{name}", arguments) for name, arguments in HOSTILE.items()
                     for tool in ("get_weather", "add_note")]
            runs[who] = tools.propose(settings, who, calls)
        harmless = tools.propose(settings, allowed, [("get_weather", "ok", '{"city": "Rome"}')])
        answer = tools.results_of(settings, harmless, 1)["ok"].payload
        assert not answer.is_error and orjson.loads(answer.output)["city"] == "Rome"
        assert process.poll() is None, log.read_text()[-3000:]
        for who, run_id in runs.items():
            results = tools.results_of(settings, run_id, 2 * len(HOSTILE))
            assert all(r.payload.is_error for r in results.values()), who
            assert all(len(r.payload.output) < 10_000 for r in results.values()), who
    finally:
        _stop(process)
    assert tools.invocations(db, "add_note") == 0
    ran = tools.invocations(db, "get_weather")
    # Restarted, the same group: nothing is run again and nothing crashes.
    again = _process(settings, options, policy, [allowed, nobody], group, log)
    try:
        later = tools.propose(settings, allowed, [("get_weather", "ok", '{"city": "Paris"}')])
        assert not tools.results_of(settings, later, 1)["ok"].payload.is_error
        assert again.poll() is None, log.read_text()[-3000:]
    finally:
        _stop(again)
    assert tools.invocations(db, "get_weather") == ran + 1 and tools.invocations(db, "add_note") == 0


# --- elided arguments -------------------------------------------------------------------------


def test_arguments_elided_from_their_tool_call_are_rebuilt_not_run_as_empty(
        settings, start_executor, tenant, db, tmp_path):
    # 300 KB of JSON whitespace: over what a tool.call carries, still {"city": "Paris"}.
    arguments = '{"city": "Paris"' + " " * 300_000 + "}"
    path = tmp_path / "big-call.sse"
    path.write_bytes(responses_tool_run(arguments, "get_weather", whole_at_done=False))
    fed = feeder.frames_for_file(path, tenant=tenant, run_id=f"run_{uuid.uuid4().hex[:12]}")
    start_executor(tools.policy_for(tenant))
    run(feed(settings, with_end_markers(fed.frames)))
    events = tools.events_of(settings, fed.run_id, lambda es: any(e.kind == "tool.result" for e in es),
                       "the result of the elided call")
    [call] = [e for e in events if e.kind == "tool.call"]
    assert call.elided is not None and call.payload.arguments == ""
    [result] = [e for e in events if e.kind == "tool.result"]
    assert not result.payload.is_error, result.payload.output
    assert orjson.loads(result.payload.output)["city"] == "Paris"
    assert tools.invocations(db, "get_weather") == 1
    assert tools.finished(tools.receipts_of(settings, fed.run_id)) == [(1, "succeeded", None)]
