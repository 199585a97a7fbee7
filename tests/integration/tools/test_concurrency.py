"""The tool executor's scheduling (consumers/tools/dispatch.py) against the real broker and worker:
calls of different runs at once, a run's calls in order, tenants in turn, the bound, and an
executor SIGKILLed with calls in flight.

The tools here block on gates that only the behaviour under test can open (another run's call,
the test once the executor holds what it read), so every assertion is on order, never on time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiokafka import TopicPartition

from modelevents.consumers.tools.contract import ToolContract, ToolError
from modelevents.consumers.tools.executor import Executor
from modelevents.consumers.tools.policy import Policy
from modelevents.consumers.tools.registry import ToolRegistry
from modelevents.schemas.events import RunAwaiting, RunStarted, ToolCall
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from tests.integration.pipeline import run
from tests.integration.simulated_gateway import settings  # noqa: F401 (fixture)
from tests.integration.tools.test_executor import (  # noqa: F401 (fixtures)
    SETTLE_S,
    RunningExecutor,
    _event,
    db,
    events_of,
    fault,
    invocations,
    receipts_of,
    results_of,
)
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.kafka

GATE_S = 30.0  # a gate never opened fails the call that waits on it (sequential handling)


class Probe:
    """A read tool ``probe`` whose calls log when they start and end, and wait on or open named
    gates (arguments ``{"name": ..., "wait": gate?, "open": gate?}``)."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str]] = []  # (start|end, name)
        self.gates: dict[str, threading.Event] = {}
        self.running = 0
        self.peak = 0
        self._lock = threading.Lock()

    def gate(self, name: str) -> threading.Event:
        with self._lock:
            return self.gates.setdefault(name, threading.Event())

    def _run(self, arguments: dict[str, Any], context: Any) -> Any:
        name = arguments["name"]
        with self._lock:
            self.log.append(("start", name))
            self.running += 1
            self.peak = max(self.peak, self.running)
        try:
            if "wait" in arguments and not self.gate(arguments["wait"]).wait(GATE_S):
                raise ToolError("permanent", f"gate {arguments['wait']} never opened")
            if "open" in arguments:
                self.gate(arguments["open"]).set()
            return {"name": name}
        finally:
            with self._lock:
                self.running -= 1
                self.log.append(("end", name))

    def registry(self) -> ToolRegistry:
        return ToolRegistry([ToolContract(
            name="probe", run=self._run, timeout_s=GATE_S + 30, max_attempts=1,
            parameters={"type": "object", "properties": {
                "name": {"type": "string"}, "wait": {"type": "string"},
                "open": {"type": "string"}}, "required": ["name"]})])

    def at(self, phase: str, name: str) -> int:
        return self.log.index((phase, name))


def probe_args(name: str, **gates: str) -> str:
    return orjson.dumps({"name": name, **gates}).decode()


def write_runs(settings: PipelineSettings, runs: list[tuple[str, str, list[tuple[str, str]]]],
               tool: str = "probe") -> None:
    """Runs (run id, tenant, calls as (call id, arguments of ``tool``)) on ``ingest`` in one
    go."""
    async def write() -> None:
        producer = await clients.start_producer(settings)
        try:
            futures = []
            for run_id, tenant, calls in runs:
                events = [_event(run_id, tenant, "run.started", RunStarted(status="in_progress"),
                                 "started")]
                events += [_event(run_id, tenant, "tool.call", ToolCall(0, tool, call, args),
                                  f"call-{call}") for call, args in calls]
                events.append(_event(run_id, tenant, "run.awaiting",
                                     RunAwaiting("tool_results"), "awaiting"))
                futures += [await clients.send_record(producer, settings, "ingest", run_id, e)
                            for e in events]
            await clients.await_acks(settings, futures)
        finally:
            await producer.stop()
    run(write())


def new_run() -> str:
    return f"run_{uuid.uuid4().hex[:12]}"


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + SETTLE_S
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen"
        time.sleep(0.02)


def start(settings: PipelineSettings, probe: Probe, tenants: list[str],
          max_concurrent: int) -> RunningExecutor:
    policy = Policy.from_dict({"tenants": {t: {} for t in tenants}})
    return RunningExecutor(Executor(probe.registry(), policy, settings, tenant=tenants,
                                    group=f"tools-{uuid.uuid4().hex[:8]}",
                                    max_concurrent_calls=max_concurrent))


def test_a_slow_call_of_one_run_does_not_hold_another_runs_call_and_a_run_keeps_its_order(
        settings):
    tenant = f"t{uuid.uuid4().hex[:10]}"
    probe = Probe()
    executor = start(settings, probe, [tenant], max_concurrent=8)
    try:
        a, b = new_run(), new_run()
        # a1 waits for b1, which comes after it: handled one after another, a1 never ends well.
        write_runs(settings, [(a, tenant, [("a1", probe_args("a1", wait="b")),
                                           ("a2", probe_args("a2"))])])
        wait_until(lambda: ("start", "a1") in probe.log, "a1 started")
        write_runs(settings, [(b, tenant, [("b1", probe_args("b1", open="b"))])])
        results = results_of(settings, a, 2)
        results_of(settings, b, 1)
    finally:
        executor.stop()
    assert not results["a1"].payload.is_error, results["a1"].payload.output
    assert probe.at("start", "a1") < probe.at("end", "b1") < probe.at("end", "a1")
    assert probe.at("end", "a1") < probe.at("start", "a2")  # a2 waited for a1 to finish


def test_a_flooding_tenant_takes_turns_with_another_tenants_call(settings):
    flood, other = f"x{uuid.uuid4().hex[:10]}", f"y{uuid.uuid4().hex[:10]}"
    probe = Probe()
    executor = start(settings, probe, [flood, other], max_concurrent=2)
    lanes = executor.executor
    floods = [new_run() for _ in range(30)]
    try:
        write_runs(settings, [(r, flood, [(f"x{n}", probe_args(f"x{n}", wait="go"))])
                              for n, r in enumerate(floods)])
        wait_until(lambda: lanes.lanes is not None and (lanes.lanes.running,
                                                        lanes.lanes.queued) == (2, 28),
                   "the flood read and queued")
        lone = new_run()
        write_runs(settings, [(lone, other, [("y0", probe_args("y0"))])])
        wait_until(lambda: lanes.lanes is not None and lanes.lanes.queued == 29,
                   "the other tenant's call read")
        probe.gate("go").set()
        results_of(settings, lone, 1)
        for r in floods:
            results_of(settings, r, 1)
    finally:
        probe.gate("go").set()
        executor.stop()
    starts = [name for phase, name in probe.log if phase == "start"]
    # Two flood calls were running; one more starts as the first ends, then the other tenant's
    # turn — not after the 28 flood calls queued before it.
    assert starts.index("y0") <= 3, starts


def test_never_more_calls_run_at_once_than_the_bound(settings):
    tenant = f"t{uuid.uuid4().hex[:10]}"
    probe = Probe()
    executor = start(settings, probe, [tenant], max_concurrent=3)
    lanes = executor.executor
    runs = [new_run() for _ in range(8)]
    try:
        write_runs(settings, [(r, tenant, [(f"c{n}", probe_args(f"c{n}", wait="go"))])
                              for n, r in enumerate(runs)])
        # All read: three tools running, five waiting in their lanes.
        wait_until(lambda: probe.running == 3 and lanes.lanes is not None
                   and lanes.lanes.queued == 5, "three running, five queued")
        probe.gate("go").set()
        answered = [results_of(settings, r, 1) for r in runs]
    finally:
        probe.gate("go").set()
        executor.stop()
    assert probe.peak == 3
    assert all(not result[f"c{n}"].payload.is_error for n, result in enumerate(answered))


# --- SIGKILL with calls in flight -----------------------------------------------------------


def _committed(settings: PipelineSettings, group: str, partition: int) -> int | None:
    async def read() -> int | None:
        consumer = clients.make_consumer(settings, group_id=group)
        await consumer.start()
        try:
            return await consumer.committed(TopicPartition(settings.topic("events"), partition))
        finally:
            await consumer.stop()
    return run(read())


def _offset_of_call(settings: PipelineSettings, run_id: str) -> tuple[int, int]:
    async def read() -> tuple[int, int]:
        async for record in clients.read_records(settings, "events", run_id=run_id,
                                                 to_end=True, timeout=2.0):
            if record is not None and getattr(record.value, "kind", "") == "tool.call":
                return record.partition, record.offset
        raise AssertionError(f"no tool.call of {run_id} on events")
    return run(read())


@contextmanager
def stopped_after(process: subprocess.Popen[bytes]) -> Iterator[subprocess.Popen[bytes]]:
    """``process``, stopped (SIGINT) when the block ends unless it ended already."""
    try:
        yield process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(30)


def test_an_executor_killed_with_calls_in_flight_answers_each_once_after_restart(
        settings, db, tmp_path: Path):
    tenant = f"t{uuid.uuid4().hex[:10]}"
    policy = tmp_path / "policy.yaml"
    policy.write_bytes(orjson.dumps({"tenants": {tenant: {}}}))
    group = f"tools-{tenant}"
    log = tmp_path / "executor.log"

    def executor() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "modelevents.services.cli", "tools", "run", "--db", str(db),
             "--policy", str(policy), "--tenant", tenant, "--group", group,
             "--max-concurrent", "8", "--bootstrap-servers", settings.bootstrap_servers,
             "--prefix", settings.topic_prefix],
            stdout=log.open("ab"), stderr=subprocess.STDOUT, cwd=REPO_ROOT,
            env={**os.environ, "MODELEVENTS_PARTITIONS": str(settings.partitions)})

    weather = '{"city": "Paris"}'
    # The slow call: its backend answers 429, retry in 300 s — in flight until the kill.
    fault(db, "get_weather", "rate_limited", 1, 300.0)
    with stopped_after(executor()) as first:
        slow = new_run()
        write_runs(settings, [(slow, tenant, [("s1", weather)])], tool="get_weather")
        wait_until(lambda: any(r.phase == "finished" for r in receipts_of(settings, slow)),
                   "the slow call's first attempt")
        partition, slow_offset = _offset_of_call(settings, slow)
        # Quick calls after it, on its partition: they finish while it is in flight.
        quick = []
        while len(quick) < 6:
            candidate = new_run()
            if clients.partition_for_key(clients.run_key_bytes(candidate),
                                         settings.partitions) == partition:
                quick.append(candidate)
        write_runs(settings, [(r, tenant, [(f"q{n}", weather)]) for n, r in enumerate(quick)],
                   tool="get_weather")
        for r in quick:
            results_of(settings, r, 1)
        # The group commits up to the slow call, not past it, though all after it finished.
        wait_until(lambda: _committed(settings, group, partition) == slow_offset,
                   "a commit up to the call in flight")
        assert first.poll() is None, log.read_text()
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        assert invocations(db, "get_weather") == 1 + len(quick)
        with stopped_after(executor()):
            answer = results_of(settings, slow, 1)["s1"].payload
    assert not answer.is_error, answer.output
    for r in [slow, *quick]:
        results = [e for e in events_of(settings, r, lambda es: True, "events")
                   if e.kind == "tool.result"]
        assert len(results) == 1, (r, results)
    for r in quick:  # redelivered after the restart, answered from their receipts
        assert [x.phase for x in receipts_of(settings, r)] == ["started", "finished"]
    assert invocations(db, "get_weather") == 2 + len(quick)  # the slow one's retry, no other
