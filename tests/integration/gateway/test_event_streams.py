"""``GET /v1/events?run=…`` (several runs' events on one SSE connection, issue #15) over real
HTTP to a gateway on loopback, the real broker and worker: each run's events once, in seq order,
with the run in each id; a run named with ``@seq`` goes on after it; a run nobody owns ends with
its own ``stream.end`` while the others go on; malformed asks are refused whole and clearly. And
the followed runs are read through one Kafka consumer, however many.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import httpx
import orjson
import pytest

from modelevents.adapters.sse import SSEDecoder
from tests.integration.gateway.test_followers import (
    chat_stream,
    expected_kinds,
    forward,
    hub_of,
    running_consumers,  # noqa: F401 - a fixture, used by name
)
from tests.integration.gateway.test_ownership import new_run_id, wait_for
from tests.integration.pipeline import HANG_GUARD_S, run
from tests.integration.simulated_gateway import sim, simulator, start_gateway  # noqa: F401 - fixtures used by name

pytestmark = pytest.mark.kafka


def read_stream(url: str, params: list[tuple[str, str]]) -> list[tuple[str | None, str, str]]:
    """(id, event, data) of every SSE event ``GET /v1/events`` sends until it ends. The
    gateway's keep-alives never let a read time out, so a stream still open after
    HANG_GUARD_S fails here: a test whose runs never end fails instead of hanging the suite."""
    out = []
    decoder = SSEDecoder(strict=True)
    deadline = time.monotonic() + HANG_GUARD_S
    with httpx.stream("GET", f"{url}/v1/events", params=params, timeout=HANG_GUARD_S) as answer:
        assert answer.status_code == 200, answer.read()
        assert answer.headers["content-type"].startswith("text/event-stream")
        for chunk in answer.iter_raw():
            out.extend((m.id, m.event, m.data) for m in decoder.feed(chunk))
            assert time.monotonic() < deadline, f"the stream did not end: {out[-3:]}"
    return out


def by_run(events: list[tuple[str | None, str, str]]) -> dict[str, list[tuple[int, str]]]:
    runs: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for event_id, kind, _data in events:
        if event_id and kind != "stream.end":  # an SSE parser keeps the last id for it
            run_id, _, seq = event_id.rpartition("@")
            runs[run_id].append((int(seq), kind))
    return runs


def ends(events: list[tuple[str | None, str, str]]) -> dict[str, dict]:
    return {(end := orjson.loads(data))["run_id"]: end
            for _id, kind, data in events if kind == "stream.end"}


def test_several_runs_on_one_stream_each_in_order_and_a_stranger_ended_alone(start_gateway,
                                                                            start_worker):
    start_worker()
    gateway = start_gateway()
    runs = [new_run_id() for _ in range(3)]
    stream = chat_stream(30)
    for run_id in runs:
        forward(gateway, run_id, stream[:10], end="none")
    nobody = new_run_id()
    got: list = []

    async def follow() -> None:
        got.extend(await asyncio.to_thread(
            read_stream, gateway.url,
            [("run", runs[0]), ("run", f"{runs[1]}@4"), ("run", nobody), ("run", runs[2])]))

    async def scenario() -> None:
        task = asyncio.create_task(follow())
        wait = time.monotonic() + HANG_GUARD_S
        while sum(hub_of(gateway).followers_of(r, "default") for r in runs) < 3:
            assert time.monotonic() < wait, "the stream did not follow the three runs"
            await asyncio.sleep(0.1)
        for run_id in runs:
            await asyncio.to_thread(forward, gateway, run_id, stream[10:], index=10)
        await task

    run(scenario())
    kinds = list(enumerate(expected_kinds(runs[0], stream)))
    seen = by_run(got)
    assert seen[runs[0]] == kinds and seen[runs[2]] == kinds
    assert seen[runs[1]] == kinds[5:]  # after seq 4
    assert nobody not in seen
    finished = ends(got)
    assert {r: finished[r]["reason"] for r in runs} == dict.fromkeys(runs, "finished")
    assert finished[nobody]["reason"] == "not_found" and finished[nobody]["status"] == 404
    # Asked again after each run's last seq: every run ended, nothing more to send.
    again = read_stream(gateway.url, [("run", f"{r}@{kinds[-1][0]}") for r in runs])
    assert not by_run(again) and set(ends(again)) == set(runs)


def test_followed_runs_share_one_consumer_of_events(start_gateway, start_worker,
                                                   running_consumers):
    start_worker()
    gateway = start_gateway()
    runs = [new_run_id() for _ in range(6)]
    stream = chat_stream(10)
    for run_id in runs:
        forward(gateway, run_id, stream[:5], end="none")
    idle = running_consumers()  # the views'
    done: list = []

    async def scenario() -> None:
        task = asyncio.create_task(asyncio.to_thread(
            read_stream, gateway.url, [("run", r) for r in runs]))
        wait = time.monotonic() + HANG_GUARD_S
        while sum(hub_of(gateway).followers_of(r, "default") for r in runs) < len(runs):
            assert time.monotonic() < wait, "the stream did not follow every run"
            await asyncio.sleep(0.1)
        # Six runs followed live through one tail of `events`, not a consumer per run.
        assert running_consumers() - idle == 1
        for run_id in runs:
            await asyncio.to_thread(forward, gateway, run_id, stream[5:], index=5)
        done.extend(await task)

    run(scenario())
    assert set(ends(done)) == set(runs)
    assert hub_of(gateway).readers == 0
    wait_for("the tail's stop", lambda: not hub_of(gateway).tail.running)


@pytest.mark.parametrize("params, says", [
    ([], "name the runs to follow"),
    ([("run", "run_a@x")], "after '@' comes the seq"),
    ([("run", "run_a"), ("run", "run_a@3")], "named twice"),
    ([("run", f"run_{n}") for n in range(51)], "at most 50"),
])
def test_a_malformed_ask_is_refused_whole_and_says_why(start_gateway, params, says):
    gateway = start_gateway()
    answer = httpx.get(f"{gateway.url}/v1/events", params=params, timeout=HANG_GUARD_S)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/problem+json")
    assert says in answer.json()["detail"]
