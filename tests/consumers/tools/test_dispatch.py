"""The executor's lanes (consumers/tools/dispatch.py) on their own: events handed to ``put`` in
the order a subscription yields them, a handler that records what it did."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from modelevents.consumers.tools.dispatch import Lanes
from modelevents.schemas.errors import ConfigError


class _Event:
    """What the lanes read of an event: its tenant and run."""

    def __init__(self, tenant: str, run_id: str, name: str) -> None:
        self.tenant, self.run_id, self.name = tenant, run_id, name


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_runs_events_run_one_after_another_and_other_runs_alongside() -> None:
    log: list[str] = []
    released: list[str] = []

    async def go() -> None:
        b_done = asyncio.Event()

        async def handle(event: Any) -> None:
            log.append(f"start {event.name}")
            if event.name == "a1":
                await b_done.wait()  # only another run's call can open it
            if event.name == "b1":
                b_done.set()
            await asyncio.sleep(0)
            log.append(f"end {event.name}")

        lanes = Lanes(handle, max_concurrent=8)
        for name in ("a1", "a2", "b1"):
            event = _Event("t", name[0], name)
            await lanes.put(event, lambda name=name: released.append(name))  # type: ignore[arg-type]
        while lanes.running or lanes.queued:
            await asyncio.sleep(0)

    _run(go())
    assert log.index("end b1") < log.index("end a1") < log.index("start a2")
    assert sorted(released) == ["a1", "a2", "b1"]


def test_tenants_take_turns_and_never_more_than_the_bound_run() -> None:
    order: list[str] = []
    running = [0, 0]  # now, most

    async def go() -> None:
        gate = asyncio.Event()

        async def handle(event: Any) -> None:
            running[0] += 1
            running[1] = max(running[1], running[0])
            await gate.wait()
            order.append(event.tenant)
            running[0] -= 1

        lanes = Lanes(handle, max_concurrent=2)
        for n in range(20):
            await lanes.put(_Event("x", f"x{n}", "c"), lambda: None)  # type: ignore[arg-type]
        await lanes.put(_Event("y", "y0", "c"), lambda: None)  # type: ignore[arg-type]
        assert (lanes.running, lanes.queued) == (2, 19)
        while running[0] < 2:
            await asyncio.sleep(0)
        gate.set()
        while lanes.running or lanes.queued:
            await asyncio.sleep(0)

    _run(go())
    assert order.index("y") <= 3  # its turn after the two x calls that were running
    assert running[1] == 2 and len(order) == 21


def test_put_waits_while_max_queued_events_wait() -> None:
    async def go() -> tuple[bool, bool]:
        gate = asyncio.Event()

        async def handle(event: Any) -> None:
            await gate.wait()

        lanes = Lanes(handle, max_concurrent=1, max_queued=2)
        for n in range(3):  # one running, two queued
            await lanes.put(_Event("t", f"r{n}", "c"), lambda: None)  # type: ignore[arg-type]
        blocked = asyncio.ensure_future(lanes.put(_Event("t", "r3", "c"), lambda: None))  # type: ignore[arg-type]
        for _ in range(20):  # turns of the loop for it to get in, if it could
            await asyncio.sleep(0)
        waiting = not blocked.done()
        gate.set()
        await asyncio.wait_for(blocked, 5)
        return waiting, blocked.done()

    assert _run(go()) == (True, True)


def test_an_event_whose_handling_raises_is_never_released() -> None:
    released: list[str] = []

    async def go() -> None:
        async def handle(event: Any) -> None:
            if event.name == "bad":
                raise RuntimeError("boom")

        lanes = Lanes(handle, max_concurrent=4)
        await lanes.put(_Event("t", "a", "bad"), lambda: released.append("bad"))  # type: ignore[arg-type]
        await lanes.put(_Event("t", "b", "good"), lambda: released.append("good"))  # type: ignore[arg-type]
        while lanes.running:
            await asyncio.sleep(0)

    _run(go())
    assert released == ["good"]


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="max_concurrent_calls"):
        Lanes(lambda event: asyncio.sleep(0), max_concurrent=0)
