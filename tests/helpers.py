"""Small helpers that many tests use, written once.

Reading an event list (``kinds``, ``of_kind``, ``text_of``), running one adapter over frames
(``feed_all``) and taking a free local port (``free_port``) mean the same thing in every test
file; a file that needs something different defines its own helper under another name.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from typing import Any

from modelevents.adapters.base import Adapter
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame


def kinds(events: list[ModelEvent]) -> list[str]:
    return [e.kind for e in events]


def of_kind(events: list[ModelEvent], kind: str) -> list[Any]:
    """The payloads of the events of ``kind``, in order."""
    return [e.payload for e in events if e.kind == kind]


def text_of(events: list[ModelEvent], output_index: int = 0) -> str:
    """The text of output ``output_index``, joined from its deltas."""
    return "".join(p.text for p in of_kind(events, "text.delta") if p.output_index == output_index)


def feed_all(adapter: Adapter, frames: Iterable[ProviderFrame]) -> list[ModelEvent]:
    """Every event ``adapter`` emits for ``frames``, then for the end of the stream."""
    events: list[ModelEvent] = []
    for frame in frames:
        events += adapter.feed(frame)
    return events + adapter.close()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_port_pair() -> int:
    """A port N on 127.0.0.1 with N+1 free too, right now: a local broker's listener and its
    controller (a lone free port's neighbour is often some client's ephemeral port)."""
    for _ in range(100):
        port = free_port()
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two neighbouring free ports on 127.0.0.1 in 100 tries")
