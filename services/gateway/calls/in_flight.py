"""The calls this gateway process made, per run: :class:`LocalRuns`.

Each call of a run is carried out in a task of its own (``CallRunner.run``), one call of a run at
a time: the next call of a run waits for the one in flight to end (409 until then). Provider
object ids are remembered with the run whose call named them, so that a webhook naming the object
goes to its run. Bounded: beyond ``keep`` runs, those whose calls ended longest ago are forgotten
(their state and their calls record stay on Kafka).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from modelevents.schemas.ids import new_call_tag
from modelevents.services.gateway.calls.runner import CallRunner
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode

__all__ = ["LocalRuns"]

log = logging.getLogger("modelevents.gateway.runs")


@dataclass
class _RunCalls:
    runners: list[CallRunner] = field(default_factory=list)
    task: asyncio.Task[Any] | None = None  # the call in flight (or the settling after a cancel)


class LocalRuns:
    """The calls this gateway process made, per run (bounded: beyond ``keep``, the runs whose
    calls ended longest ago are forgotten — their state and their calls record stay on Kafka)."""

    def __init__(self, keep: int = 10_000) -> None:
        self.keep = keep
        self._runs: dict[str, _RunCalls] = {}
        # Provider object id → the run whose call it is (the calls of the runs kept above).
        self._objects: dict[str, str] = {}

    # --- calls --------------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        return sum(1 for calls in self._runs.values() if calls.task is not None)

    def busy(self, run_id: str) -> bool:
        calls = self._runs.get(run_id)
        return calls is not None and calls.task is not None

    def next_tag(self, run_id: str) -> str:
        """The tag of the run's next call; 409 while a call of the run is in flight."""
        calls = self._runs.get(run_id)
        if calls is not None and calls.task is not None:
            raise GatewayProblem(ProblemCode.conflict, (
                f"call {calls.runners[-1].call.call_tag} of run {run_id!r} is still in flight; "
                "wait for it to end (GET the run) before sending its next call"))
        # A random part: another gateway process (or this one after a restart) may have made
        # calls of the same run, and frame ids must never collide within a run.
        count = len(calls.runners) if calls is not None else 0
        return new_call_tag(count)  # schemas/ids.py: the audit reads the same format

    def start(self, runner: CallRunner, work: Any = None) -> None:
        """Carry out the runner's call (``work``: instead of ``runner.run()``) in a task."""
        run_id = runner.call.run_id
        calls = self._runs.pop(run_id, None) or _RunCalls()
        self._runs[run_id] = calls  # most recently used last
        calls.runners.append(runner)
        if runner.outcome.object_id is not None:  # a read-back of an object known already
            self._objects[runner.outcome.object_id] = run_id
        runner.on_object_id = lambda object_id: self._objects.__setitem__(object_id, run_id)
        self._track(calls, work if work is not None else runner.run(),
                    f"run {run_id} {runner.call.call_tag}")
        excess = len(self._runs) - self.keep
        for old in [k for k, c in self._runs.items() if c.task is None][:max(0, excess)]:
            for forgotten in self._runs.pop(old).runners:
                if forgotten.outcome.object_id is not None:
                    self._objects.pop(forgotten.outcome.object_id, None)

    def run_of_object(self, object_id: str, tenant: str) -> str | None:
        """The run of one of this process's calls whose provider object is ``object_id``, if
        that call was made for ``tenant``."""
        run_id = self._objects.get(object_id)
        runner = self.latest(run_id) if run_id is not None else None
        return run_id if runner is not None and runner.call.tenant == tenant else None

    def settle(self, runner: CallRunner) -> None:
        """Follow a call whose polling ended (e.g. after a cancel) to its terminal status."""
        self._track(self._runs[runner.call.run_id], runner.settle(),
                    f"settle {runner.call.run_id} {runner.call.call_tag}")

    def _track(self, calls: _RunCalls, work: Any, name: str) -> None:
        task = asyncio.create_task(work, name=name)
        calls.task = task
        task.add_done_callback(lambda done: self._done(calls, done))

    def _done(self, calls: _RunCalls, task: asyncio.Task[Any]) -> None:
        if calls.task is task:
            calls.task = None
        if not task.cancelled() and task.exception() is not None:
            log.error("a call failed in the gateway", exc_info=task.exception())

    def latest(self, run_id: str) -> CallRunner | None:
        calls = self._runs.get(run_id)
        return calls.runners[-1] if calls is not None else None

    def describe(self, run_id: str) -> list[dict[str, Any]]:
        calls = self._runs.get(run_id)
        if calls is None:
            return []
        out = []
        for runner in calls.runners:
            outcome = runner.outcome
            out.append({
                "call": runner.call.call_tag, "provider": runner.call.provider,
                "api": runner.call.api, "model": runner.call.model,
                "background": runner.call.background, "stream": runner.call.stream,
                "in_flight": runner is calls.runners[-1] and calls.task is not None,
                "provider_object_id": outcome.object_id, "provider_status": outcome.status,
                "streams": outcome.streams, "resumed": outcome.resumed,
                "retries": outcome.retries, "polls": outcome.polls,
                "frames": outcome.frames, "error": outcome.error, "notes": outcome.notes})
        return out

    async def close(self) -> None:
        tasks = [c.task for c in self._runs.values() if c.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
