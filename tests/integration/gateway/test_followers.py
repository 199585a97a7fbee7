"""Followers of ``GET /v1/runs/{id}/events`` (issue #11 §3, slow clients), over real HTTP to a
gateway (uvicorn on loopback) and the real broker and worker: the followers of one run share one
reader of it (one Kafka consumer, however many followers), which stops when they leave; a
follower whose client stops reading is ended cleanly once it is too far behind, and resumes
with ``Last-Event-ID`` where it stopped. Memory is measured by bench/followers.py, not here.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from aiokafka import AIOKafkaConsumer

from modelevents.adapters.registry import normalize_bytes
from modelevents.adapters.sse import SSEDecoder
from modelevents.services.local.asgi_thread import ServedApp
from tests.integration.gateway.test_ownership import new_run_id, wait_for
from tests.integration.pipeline import HANG_GUARD_S, run
from tests.integration.simulated_gateway import sim, simulator, sse_events, start_gateway  # noqa: F401 - fixtures used by name

pytestmark = pytest.mark.kafka

LAGGED_TEXT = b"fell too far behind"


def chat_stream(deltas: int) -> list[bytes]:
    """An OpenAI Chat Completions stream of ``deltas`` text deltas, as its SSE events."""
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        doc = {"id": "chatcmpl-followers", "object": "chat.completion.chunk", "created": 1,
               "model": "gpt-4o-mini",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + orjson.dumps(doc) + b"\n\n"
    return ([chunk({"role": "assistant", "content": ""})]
            + [chunk({"content": f"w{i} "}) for i in range(deltas)]
            + [chunk({}, "stop"), b"data: [DONE]\n\n"])


def forward(gateway: ServedApp, run_id: str, events: list[bytes], **params: Any) -> None:
    answer = httpx.post(f"{gateway.url}/v1/runs/{run_id}/frames", content=b"".join(events),
                        params={"api": "openai-chat", **params}, timeout=HANG_GUARD_S,
                        headers={"content-type": "text/event-stream"})
    assert answer.status_code == 200, answer.text


def forward_in_parts(gateway: ServedApp, run_id: str, events: list[bytes], first: int,
                     part: int = 1000) -> None:
    """Events ``first``… of a stream, in bodies of ``part`` events (each acknowledged within
    the gateway's ack timeout on a loaded machine); the last one ends the stream."""
    for start in range(first, len(events), part):
        last = start + part >= len(events)
        forward(gateway, run_id, events[start:start + part], index=start,
                end="stream" if last else "none")


def expected_kinds(run_id: str, events: list[bytes]) -> list[str]:
    return [e.kind for e in normalize_bytes(b"".join(events), run_id=run_id,
                                            api="openai-chat", framing="sse").events]


@pytest.fixture
def running_consumers(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """Counts the Kafka consumers started and not stopped in this process (the gateway is
    served in a thread of it) from now on: the real consumers, their start and stop wrapped to
    note them. Not a count of sockets (a consumer opens and drops connections on its own
    schedule, and a count read at one instant failed on a loaded machine), nor a walk of
    gc.get_objects(), which from this thread could see a tuple the gateway's thread was still
    building and made CPython raise SystemError in aiokafka's decoder."""
    running: weakref.WeakSet[AIOKafkaConsumer] = weakref.WeakSet()
    lock = threading.Lock()
    start, stop = AIOKafkaConsumer.start, AIOKafkaConsumer.stop

    async def started(self: AIOKafkaConsumer) -> None:
        await start(self)
        with lock:
            running.add(self)

    async def stopped(self: AIOKafkaConsumer) -> None:
        with lock:
            running.discard(self)
        await stop(self)

    monkeypatch.setattr(AIOKafkaConsumer, "start", started)
    monkeypatch.setattr(AIOKafkaConsumer, "stop", stopped)

    def count() -> int:
        with lock:
            return sum(1 for consumer in running if consumer._closed is False)
    return count


def broker_connections(bootstrap: str) -> int:
    """Established TCP connections of this process (the gateway is served in a thread of it) to
    the broker: each Kafka consumer holds its own."""
    port = int(bootstrap.rsplit(":", 1)[1])
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            remote_port, state, inode = int(fields[2].rsplit(":", 1)[1], 16), fields[3], fields[9]
            count += remote_port == port and state == "01" and inode in inodes
    return count


def hub_of(gateway: ServedApp) -> Any:
    return gateway.app.state.gateway.followers


def test_followers_of_a_run_share_one_reader_that_stops_when_they_leave(start_gateway,
                                                                       start_worker,
                                                                       running_consumers):
    start_worker()
    gateway = start_gateway()
    run_id, stream, followers = new_run_id(), chat_stream(200), 40
    forward(gateway, run_id, stream[:100], end="none")
    idle = running_consumers()  # the views'
    got: list[list[tuple[int, str]]] = [[] for _ in range(followers)]

    async def follow(into: list[tuple[int, str]], client: httpx.AsyncClient) -> None:
        decoder = SSEDecoder(strict=True)
        async with client.stream("GET", f"{gateway.url}/v1/runs/{run_id}/events") as response:
            assert response.status_code == 200
            async for chunk in response.aiter_raw():
                into.extend((int(m.id), m.event) for m in decoder.feed(chunk) if m.id)

    async def all_followers() -> None:
        limits = httpx.Limits(max_connections=followers + 1)
        async with httpx.AsyncClient(timeout=HANG_GUARD_S, limits=limits) as client:
            tasks = [asyncio.create_task(follow(into, client)) for into in got]
            deadline = time.monotonic() + HANG_GUARD_S
            while not all(len(g) >= 50 for g in got):
                assert time.monotonic() < deadline, [len(g) for g in got]
                await asyncio.sleep(0.1)
            # Forty followers, one reader of the run: one Kafka consumer.
            assert running_consumers() - idle == 1
            await asyncio.to_thread(forward, gateway, run_id, stream[100:], index=100)
            await asyncio.gather(*tasks)

    run(all_followers())
    kinds = expected_kinds(run_id, stream)
    assert all(g == list(enumerate(kinds)) for g in got), [len(g) for g in got]
    wait_for("the reader's stop", lambda: running_consumers() == idle)


class StalledClient:
    """A follower whose client sends its request and then reads nothing (a tiny receive
    buffer), until :meth:`read_all`: what a slow or stuck EventSource is to the gateway."""

    def __init__(self, gateway: ServedApp, run_id: str) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect((gateway.host, gateway.port))
        self.sock.sendall(f"GET /v1/runs/{run_id}/events HTTP/1.1\r\nhost: x\r\n"
                          "accept: text/event-stream\r\n\r\n".encode())

    def read_all(self) -> bytes:
        """The response's body (chunked) up to its last chunk: the stream ended cleanly."""
        data = b""
        self.sock.settimeout(HANG_GUARD_S)
        while not data.endswith(b"\r\n0\r\n\r\n"):
            more = self.sock.recv(1 << 16)
            assert more, f"connection closed without the last chunk: {data[-300:]!r}"
            data += more
        self.sock.close()
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        return dechunk(body)


def dechunk(body: bytes) -> bytes:
    out, at = [], 0
    while True:
        line_end = body.index(b"\r\n", at)
        size = int(body[at:line_end], 16)
        if size == 0:
            return b"".join(out)
        out.append(body[line_end + 2:line_end + 2 + size])
        at = line_end + 2 + size + 2


def test_a_follower_too_far_behind_is_ended_cleanly_and_resumes(start_gateway, start_worker):
    start_worker()
    # Small queues and patience (the gateway config's follower limits), so that the stalled
    # client is behind after a few MB (the socket buffers) rather than after what the defaults
    # allow.
    gateway = start_gateway(follower_buffer_events=8, follower_queue_events=8,
                            follower_patience_s=0.5)
    hub = hub_of(gateway)
    run_id, stream = new_run_id(), chat_stream(20_000)
    forward(gateway, run_id, stream[:1], end="none")
    stalled = StalledClient(gateway, run_id)
    fast: list[list[tuple[int, str, dict[str, Any]]]] = []
    reader = threading.Thread(target=lambda: fast.append(sse_events(gateway, run_id)))
    reader.start()
    wait_for("both followers", lambda: hub.followers_of(run_id, "default") == 2)
    forward_in_parts(gateway, run_id, stream, 1)
    reader.join(HANG_GUARD_S)
    kinds = expected_kinds(run_id, stream)
    [everything] = fast
    assert [(seq, kind) for seq, kind, _ in everything] == list(enumerate(kinds))
    body = stalled.read_all()
    assert LAGGED_TEXT in body
    decoder = SSEDecoder(strict=True)
    ids = [int(m.id) for m in decoder.feed(body) if m.id]
    assert ids == list(range(len(ids))) and 0 < len(ids) < len(kinds)
    rest = sse_events(gateway, run_id, headers={"last-event-id": str(ids[-1])})
    assert [seq for seq, _, _ in rest] == list(range(len(ids), len(kinds)))
    assert rest[-1][1] == "run.finished"
    wait_for("the reader's stop", lambda: hub.readers == 0)
