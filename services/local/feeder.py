"""A recorded provider stream → the ProviderFrames a gateway would publish, and publishing them.

``frames_for_file`` cuts a file (SSE, JSON lines, a streamed JSON array, one JSON object, or a VCR
cassette) into ProviderFrames the way ``modelevents normalize`` reads it — same framing and API
detection, same run id, same ``frame_id`` (``f"{stream_id}:{index}"``; a cassette's model calls
are streams ``i1``, ``i2``, ...) — and stamps them as the gateway does: api, provider, tenant,
run key, transport (``sse`` for streamed bodies, ``poll`` for a whole object), HTTP status of a
cassette interaction. So the events the pipeline derives from fed frames carry the same event ids
as ``normalize`` prints for the file.

The end of a recorded input is part of its meaning (a stream cut short ends in
``stream_truncated``), so whoever publishes frames follows them with end-of-input markers
(``schemas/end_of_input.py``: ``with_end_markers(fed.frames)``). ``frames_for_file`` returns the provider's frames only; ``modelevents feed`` adds the markers.

``feed_frames`` publishes frames on the frames topic through an idempotent producer, optionally
duplicating some (a duplicate is the SAME frame — same frame_id, same bytes — sent again right
after or a few frames later, as a gateway retry or a re-delivered webhook would) and pacing the
sends at a rate. The demo, the CLI (``modelevents feed``) and the tests share both.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from aiokafka import AIOKafkaProducer

from modelevents.adapters.cassette import Interaction, looks_like_cassette, read_cassette
from modelevents.adapters.framing import detect_framing, frames_from_bytes
from modelevents.adapters.limits import InputLimits, current_limits, using_limits
from modelevents.adapters.registry import (
    ADAPTERS,
    cassette_streams,
    decoded_docs,
    default_run_id,
    detect_api,
    resolve_api,
)
from modelevents.schemas.end_of_input import is_end_of_input
from modelevents.schemas.errors import DetectionError, InputError
from modelevents.schemas.frames import ProviderFrame
from modelevents.services.kafka.clients import await_acks, send_frame
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["FeedInput", "FeedStats", "frames_for_bytes", "frames_for_file", "feed_frames",
           "duplicate_plan"]

# Futures awaited in chunks: bounded memory for big files, while the producer still batches.
_ACK_CHUNK = 2000
# A duplicate is re-sent this many frames after its original at most.
_MAX_DUPLICATE_DELAY = 5


class FeedInput(NamedTuple):
    run_id: str
    api: str  # "a+b" when a cassette mixes APIs
    frames: list[ProviderFrame]


@dataclass
class FeedStats:
    frames: int = 0  # distinct frames
    sent: int = 0  # records sent, duplicates included
    duplicates: int = 0
    run_keys: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def rate(self) -> float:
        return self.sent / self.seconds if self.seconds > 0 else 0.0


def _now_ms() -> int:
    return int(time.time() * 1000)


def frames_for_file(path: str | Path, *, api: str = "auto", framing: str = "auto",
                    run_id: str | None = None, tenant: str = "default",
                    received_at: int | None = None,
                    on_skip: Callable[[str], None] | None = None,
                    limits: InputLimits | None = None) -> FeedInput:
    """The frames of one recorded run; ``-`` reads standard input. Raises InputError subclasses.

    ``run_id`` defaults to normalize's (file stem + content hash); ``received_at`` (epoch ms,
    default now) is stamped on every frame; ``on_skip`` hears about cassette interactions that are
    not model calls. The whole input is cut under ``limits`` (adapters/limits.py; default: those
    in effect) before anything is returned, so nothing of an input past a limit is ever sent.
    """
    if str(path) == "-":
        body, name = sys.stdin.buffer.read(), "stdin"
    else:
        try:
            body, name = Path(path).read_bytes(), str(path)
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    with using_limits(limits or current_limits(), source=name):
        return frames_for_bytes(body, source_name=name, api=api, framing=framing, run_id=run_id,
                                tenant=tenant, received_at=received_at, on_skip=on_skip)


def frames_for_bytes(body: bytes, *, source_name: str | None = None, api: str = "auto",
                     framing: str = "auto", run_id: str | None = None, tenant: str = "default",
                     received_at: int | None = None,
                     on_skip: Callable[[str], None] | None = None) -> FeedInput:
    """:func:`frames_for_file` for bytes already read."""
    body = bytes(body)
    candidates = resolve_api(api)
    run_id = run_id or default_run_id(body, source_name)
    stamp = _now_ms() if received_at is None else received_at
    if framing == "cassette" or (framing == "auto" and looks_like_cassette(body)):
        chosen, frames = _cassette_frames(read_cassette(body), candidates, run_id, on_skip)
    else:
        if framing == "auto":
            framing = detect_framing(body)
        frames = frames_from_bytes(body, run_key=run_id, provider="", api="", framing=framing)
        if not frames:
            raise InputError(f"{source_name or 'the input'} holds no frames: nothing to feed")
        chosen = candidates[0] if len(candidates) == 1 else detect_api(
            decoded_docs(frames), candidates=candidates)
        provider = ADAPTERS[chosen].default_provider
        for frame in frames:
            frame.api, frame.provider = chosen, provider
    for frame in frames:
        frame.tenant = tenant
        frame.received_at = stamp
    return FeedInput(run_id, chosen, frames)


def _cassette_frames(interactions: list[Interaction], candidates: tuple[str, ...], run_id: str,
                     on_skip: Callable[[str], None] | None) -> tuple[str, list[ProviderFrame]]:
    frames: list[ProviderFrame] = []
    apis: list[str] = []
    for stream in cassette_streams(interactions, candidates, run_id, on_skip or (lambda _m: None)):
        frames += stream.frames
        apis.append(stream.api)
    if not frames:
        raise DetectionError("the cassette holds no model API call that modelevents can read")
    return "+".join(dict.fromkeys(apis)), frames


def duplicate_plan(count: int, duplicate: float, seed: int = 0,
                   barriers: Sequence[bool] | None = None) -> list[int]:
    """The send order of ``count`` frames (indexes) with duplicates mixed in.

    Each frame is duplicated with probability ``duplicate``; its copy goes out right after it or
    up to a few frames later. Deterministic for a seed; originals keep their relative order.
    ``barriers[i]`` marks a frame that is never duplicated and that no copy may pass: the
    end-of-input markers, which a gateway writes once itself (a copy after "this stream ended"
    would be read as the start of a new stream).
    """
    if not 0.0 <= duplicate <= 1.0:
        raise InputError(f"duplicate rate {duplicate} is not between 0 and 1")
    barrier = list(barriers) if barriers is not None else [False] * count
    # For each position: the last position a copy may be sent after (before the next barrier).
    limit = [0] * count
    last = count - 1
    for i in range(count - 1, -1, -1):
        if barrier[i]:
            last = i - 1
        limit[i] = last
    rng = random.Random(seed)
    pending: dict[int, list[int]] = {}  # position among originals → copies due after it
    for i in range(count):
        if duplicate and not barrier[i] and rng.random() < duplicate:
            due = min(limit[i], i + rng.randint(0, _MAX_DUPLICATE_DELAY))
            pending.setdefault(due, []).append(i)
    order: list[int] = []
    for i in range(count):
        order.append(i)
        order.extend(pending.get(i, ()))
    return order


async def feed_frames(producer: AIOKafkaProducer, settings: PipelineSettings,
                      frames: Sequence[ProviderFrame], duplicate: float = 0.0,
                      rate: float | None = None, seed: int = 0,
                      progress: Callable[[FeedStats], None] | None = None,
                      progress_every: float = 1.0, stamp: bool = False) -> FeedStats:
    """Publish ``frames`` on the frames topic (keyed by run key), in order, and wait for the acks.

    ``stamp``: set each frame's ``received_at`` to the time it is first sent (a copy sent again
    keeps it), as the gateway stamps a frame when it receives it — the run's events then carry
    the times of their frames, and its state's start, end and duration are the feed's (with one
    stamp for all, a fed run lasted 0 ms);
    ``duplicate``: probability that a frame is sent twice (see :func:`duplicate_plan`; markers
    are never duplicated, and no copy is sent after its stream's marker);
    ``rate``: records per second, duplicates included (None: as fast as the producer goes);
    ``progress``: called with the running stats about every ``progress_every`` seconds.
    """
    if rate is not None and rate <= 0:
        raise InputError(f"rate {rate} must be a positive number of frames per second")
    order = duplicate_plan(len(frames), duplicate, seed,
                           barriers=[is_end_of_input(f) for f in frames])
    stats = FeedStats(frames=len(frames), run_keys=list(dict.fromkeys(f.run_key for f in frames)))
    start = time.monotonic()
    last_report = start
    pending: list[asyncio.Future] = []
    seen: set[int] = set()
    for n, index in enumerate(order):
        if rate is not None:
            # Pace against the start, not the previous send: no drift over long feeds.
            delay = start + n / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        if stamp and index not in seen:
            frames[index].received_at = _now_ms()
        pending.append(await send_frame(producer, settings, frames[index]))
        stats.sent += 1
        if index in seen:
            stats.duplicates += 1
        seen.add(index)
        if len(pending) >= _ACK_CHUNK:
            await await_acks(settings, pending)
            pending.clear()
        if progress is not None and time.monotonic() - last_report >= progress_every:
            last_report = time.monotonic()
            stats.seconds = last_report - start
            progress(stats)
    await await_acks(settings, pending)
    stats.seconds = time.monotonic() - start
    return stats
