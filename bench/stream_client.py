"""A raw asyncio streaming client for bench/proxy.py: when each SSE chunk of a response arrives.

One POST per connection (HTTP/1.1, the request pre-built), the response read as it comes: the
time of its first byte, then every SSE event (chunked or plain body) with the time of the read
that completed it and, when the event carries one, the simulator's stamp (``ts:<ns>``: the
CLOCK_MONOTONIC time of the simulator's write, services/simulator ``stamp`` knob). Far cheaper
per chunk than httpx, so the client is not what is measured. Times are ``time.monotonic_ns()``,
the same clock as the simulator's stamps (system-wide on Linux).
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field

STAMP = re.compile(rb"ts:(\d{6,20})")
# A text delta of bench/proxy.py's streams: stamped (ts:<ns>) or numbered (n:<index>).
DELTA = re.compile(rb"(?:ts|n):\d+ ")
ERROR = re.compile(rb'"error": ?\{')


@dataclass
class Stream:
    """What one streamed response gave."""

    status: int = 0
    ttfb_ns: int = 0  # request written → the response's first byte
    first_frame_ns: int = 0  # request written → its first SSE event with data
    chunks: int = 0  # SSE events with a data field
    deltas: int = 0  # of them, the bench's text deltas (DELTA)
    delays_ns: list[int] = field(default_factory=list)  # stamped events: arrival − stamp
    body_head: bytes = b""  # the start of an error answer's body


def request_bytes(host: str, port: int, path: str, body: bytes,
                  headers: dict[str, str] | None = None) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"host: {host}:{port}", "content-type: application/json",
             "accept: text/event-stream", f"content-length: {len(body)}",
             *(f"{k}: {v}" for k, v in (headers or {}).items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class _Body:
    """Incremental HTTP/1.1 body decoding (chunked or not) into SSE events."""

    def __init__(self, chunked: bool, length: int | None):
        self.chunked = chunked
        self.left = length  # of a body with a content-length
        self.raw = b""
        self.sse = b""
        self.done = length == 0

    def feed(self, data: bytes) -> list[bytes]:
        if not self.chunked:
            self.sse += data
            if self.left is not None:
                self.left -= len(data)
                self.done = self.left <= 0
        else:
            self.raw += data
            while True:
                line_end = self.raw.find(b"\r\n")
                if line_end < 0:
                    break
                size = int(self.raw[:line_end].split(b";")[0], 16)
                if size == 0:
                    self.done = True
                    break
                end = line_end + 2 + size
                if len(self.raw) < end + 2:
                    break
                self.sse += self.raw[line_end + 2:end]
                self.raw = self.raw[end + 2:]
        events = []
        while (cut := self.sse.find(b"\n\n")) >= 0:
            events.append(self.sse[:cut])
            self.sse = self.sse[cut + 2:]
        return events


async def stream(host: str, port: int, request: bytes) -> Stream:
    """Send ``request`` on a new connection and read its streamed answer to the end."""
    reader, writer = await asyncio.open_connection(host, port, limit=1 << 20)
    out = Stream()
    try:
        start = time.monotonic_ns()
        writer.write(request)
        head = b""
        while b"\r\n\r\n" not in head:
            data = await reader.read(1 << 16)
            if not out.ttfb_ns:
                out.ttfb_ns = time.monotonic_ns() - start
            if not data:
                raise ConnectionError("the connection closed before the response's head")
            head += data
        head, rest = head.split(b"\r\n\r\n", 1)
        out.status = int(head[9:12])
        lower = head.lower()
        length = re.search(rb"\r\ncontent-length: *(\d+)", lower)
        body = _Body(b"transfer-encoding: chunked" in lower,
                     int(length.group(1)) if length else None)
        arrived = time.monotonic_ns()
        data = rest
        while True:
            for event in body.feed(data):
                if b"data:" not in event:
                    continue
                out.chunks += 1
                if DELTA.search(event):
                    out.deltas += 1
                elif ERROR.search(event):
                    out.body_head = event[:500]  # an error event in a stream
                if not out.first_frame_ns:
                    out.first_frame_ns = arrived - start
                stamp = STAMP.search(event)
                if stamp:
                    out.delays_ns.append(arrived - int(stamp.group(1)))
            if body.done:
                break
            data = await reader.read(1 << 16)
            arrived = time.monotonic_ns()
            if not data:
                break
        if out.status != 200 and not out.body_head:
            out.body_head = (body.sse or body.raw or rest)[:500]
    finally:
        writer.close()
    return out


async def streams(host: str, port: int, requests: list[bytes], concurrency: int
                  ) -> tuple[list[Stream], float]:
    """Every request streamed, ``concurrency`` at a time; the results and the seconds taken."""
    queue = list(reversed(requests))
    results: list[Stream] = []

    async def worker() -> None:
        while queue:
            results.append(await stream(host, port, queue.pop()))

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results, time.perf_counter() - started
