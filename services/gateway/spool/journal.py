"""The gateway's FrameTee: teed frames go to Kafka, and to a local journal while Kafka is away.

    tee = JournalTee(config.journal, journal_directory(config), publish, probe, metrics)
    await tee.start()        # a journal left by the last process goes to Kafka before new frames
    tee.offer(frames, tenant)  # queued (bounded memory); returns at once, never raises
    tee.accepting(tenant)    # False: Kafka away and the tenant fail_closed (or the journal full
                             # under on_full: fail_closed)
    await tee.stop()         # what is queued goes to Kafka or the journal; the journal closed

One writer task takes the queue in order. While the journal is empty, a batch goes to Kafka
with the gateway's producer; one not acknowledged within ``deadline_s`` goes to the journal
(``segments.py``), and so does every batch after it, so that a run's frames stay in order. The
writer then tries the journal's oldest records on Kafka (backing off while it is away), deletes
what Kafka acknowledged, and sends directly again once the journal is empty. At-least-once: a
batch that timed out may still reach Kafka and is sent again from the journal; the journal
keeps each frame's encoded record, so its ``frame_id`` (stream id and index) is the same and the
worker's adapters drop the second copy.

Nothing is dropped silently: frames the journal has no room for (``max_bytes``, then
``on_full``), that do not fit the memory queue (``queue_bytes``), or that cannot be journaled
(a disk error, a directory another process holds) are counted in
``modelevents_gateway_frames_dropped_total{reason}`` and logged with their run. Frames still
only queued in memory when the process is killed are lost: the queue is the one window, and it
is short while the writer keeps up (the memory bound caps it).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from modelevents.schemas import codec
from modelevents.schemas.errors import ModelEventsError
from modelevents.schemas.frames import ProviderFrame
from modelevents.services.gateway.config import GatewayConfig, JournalConfig
from modelevents.services.gateway.metrics import GatewayMetrics
from modelevents.services.gateway.spool.segments import SegmentLog
from modelevents.services.settings.xdg import state_dir

__all__ = ["JournalTee", "journal_directory"]

log = logging.getLogger("modelevents.gateway.journal")

T = TypeVar("T")

# A frame's cost in the memory queue beyond its body (its other fields, the deque's slot).
_FRAME_OVERHEAD = 256
# One write to Kafka: at most this many frames, about this many bytes.
_BATCH_FRAMES = 5000
_BATCH_BYTES = 4 * 1024 * 1024
# While Kafka is away: the first retry after this long, doubling up to the second.
_RETRY_FIRST_S = 0.25
_RETRY_MAX_S = 5.0
# Idle, with fail_closed tenants or Kafka away: whether it answers, asked this often.
_WATCH_S = 1.0

_WHY = {
    "journal_full": "the frame journal is full (gateway.journal.max_bytes)",
    "journal_unavailable": "the frame journal cannot be written",
    "queue_full": "more frames wait for Kafka than gateway.journal.queue_bytes holds",
    "stopped": "offered after the gateway stopped its tee",
    "undecodable": "a journal record no longer decodes as a frame",
}


def journal_directory(config: GatewayConfig) -> Path:
    """``<journal.directory>/<instance_id>/<frames topic>``: a gateway's journal, found again by
    the next process with its instance id, and never sent to another topic than it was for."""
    root = config.journal.directory or state_dir("gateway-journal")
    return root / config.instance_id / config.kafka.topic("frames")


class JournalTee:
    """The production :class:`~modelevents.services.gateway.spool.tee.FrameTee`.

    ``publish(frames)`` writes frames to Kafka and returns once acknowledged, raising a
    ModelEventsError (KafkaUnavailable) when they were not within the deadline; ``probe()``
    says whether Kafka answers (used while it is away and the journal holds nothing to try)."""

    def __init__(self, config: JournalConfig, directory: Path,
                 publish: Callable[[list[ProviderFrame]], Awaitable[Any]],
                 probe: Callable[[], Awaitable[bool]], metrics: GatewayMetrics,
                 fail_closed: Collection[str] = ()) -> None:
        self.config = config
        self.directory = directory
        self._publish = publish
        self._probe = probe
        self.metrics = metrics
        self._fail_closed = frozenset(fail_closed)  # the proxy's tenants that fail closed
        self._queue: deque[ProviderFrame] = deque()
        self._queued_bytes = 0
        self._wake = asyncio.Event()
        self._journal: SegmentLog | None = None
        self._journal_error: str | None = None
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="frame-journal")
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._stopped = False
        self.spooling = False  # the journal holds frames: new ones go behind them
        self.kafka_up = True
        self.journal_full = False

    # --- FrameTee -------------------------------------------------------------------------------

    def offer(self, frames: list[ProviderFrame], tenant: str) -> None:
        """Queue ``frames`` for Kafka; called on the gateway's event loop."""
        try:
            if self._stopped:
                self._drop(frames, "stopped")
                return
            limit = self.config.queue_bytes
            refused: list[ProviderFrame] = []
            for frame in frames:
                size = len(frame.body) + _FRAME_OVERHEAD
                if self._queued_bytes + size > limit:
                    refused.append(frame)
                    continue
                self._queue.append(frame)
                self._queued_bytes += size
            self._wake.set()
            if refused:
                self._drop(refused, "queue_full")
        except Exception:  # the proxy's stream must go on whatever happens here
            log.exception("teeing %d frames of tenant %s failed", len(frames), tenant)

    def accepting(self, tenant: str) -> bool:
        if not self.kafka_up and tenant in self._fail_closed:
            return False
        return not (self.journal_full and self.config.on_full == "fail_closed")

    # --- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        """Open a journal a previous process left (its frames go to Kafka first, before any
        frame offered now) and start the writer."""
        self._warn_about_other_journals()
        if any(self.directory.glob("*.seg")):
            journal = await self._open_journal()
            if journal is not None and journal.records:
                log.info("frame journal %s holds %d frames (%d bytes) from before: writing them "
                         "to Kafka ahead of new frames", self.directory, journal.records,
                         journal.size)
                self.spooling = True
        self._task = asyncio.create_task(self._write(), name="frame journal writer")
        self._task.add_done_callback(_writer_ended)

    async def stop(self) -> None:
        """Write what is queued (to Kafka within the deadline, else to the journal), then close
        the journal; frames offered after this are dropped (counted)."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        self._stopped = True
        if self._journal is not None:
            await self._in_thread(self._journal.close)
        self._executor.shutdown(wait=True)

    # --- the writer -----------------------------------------------------------------------------

    async def _write(self) -> None:
        loop = asyncio.get_running_loop()
        retry_at, backoff = 0.0, _RETRY_FIRST_S
        while True:
            if self.spooling:
                if self._queue:
                    await self._spool(self._take(everything=True))
                if self._stopping:
                    return  # what the journal holds is the next process's to write
                if loop.time() >= retry_at:
                    if await self._drain_batch():
                        backoff = _RETRY_FIRST_S
                        continue
                    retry_at, backoff = loop.time() + backoff, min(backoff * 2, _RETRY_MAX_S)
                if self.spooling:
                    await self._wait(retry_at - loop.time())
                continue
            if not self._queue:
                if self._stopping:
                    return
                if self._fail_closed or not self.kafka_up:
                    # Idle: only a question tells whether Kafka is there for the next call of
                    # a fail_closed tenant (and when it is back, once nothing is left to send).
                    if loop.time() >= retry_at:
                        self._kafka_answered(await self._answers())
                        retry_at = loop.time() + _WATCH_S
                    await self._wait(retry_at - loop.time())
                else:
                    await self._wait(None)
                continue
            if self.config.linger_ms and not self._stopping:
                # Frames of concurrent streams arrive one at a time; gathered for a moment they
                # share produce requests (nobody waits for them: the clients were served).
                await asyncio.sleep(self.config.linger_ms / 1000)
            batch = self._take()
            try:
                await self._publish(batch)
            except Exception as exc:
                self._kafka_away(exc, len(batch))
                self.spooling = True
                await self._spool(batch)
                retry_at, backoff = loop.time() + _RETRY_FIRST_S, 2 * _RETRY_FIRST_S
            else:
                self.kafka_up = True

    async def _wait(self, timeout: float | None) -> None:
        """Until a frame is offered, the tee stops, or ``timeout`` seconds pass."""
        if self._queue or self._stopping:
            return
        self._wake.clear()
        try:
            async with asyncio.timeout(None if timeout is None else max(timeout, 0.0)):
                await self._wake.wait()
        except TimeoutError:
            pass

    def _take(self, everything: bool = False) -> list[ProviderFrame]:
        queue = self._queue
        batch: list[ProviderFrame] = []
        size = 0
        while queue and (everything or (len(batch) < _BATCH_FRAMES and size < _BATCH_BYTES)):
            frame = queue.popleft()
            batch.append(frame)
            size += len(frame.body) + _FRAME_OVERHEAD
        self._queued_bytes -= size
        return batch

    async def _answers(self) -> bool:
        try:
            async with asyncio.timeout(self.config.deadline_s):
                return await self._probe()
        except Exception:
            return False

    def _kafka_answered(self, answered: bool) -> None:
        if answered != self.kafka_up:
            if answered:
                log.info("Kafka answers again")
            else:
                log.warning("Kafka does not answer within %g s: fail_closed tenants' calls "
                            "are refused until it does", self.config.deadline_s)
        self.kafka_up = answered

    def _kafka_away(self, exc: BaseException, count: int) -> None:
        if self.kafka_up:
            log.warning("Kafka did not take %d teed frames within %g s (%s): frames go to the "
                        "journal %s until it does", count, self.config.deadline_s, exc,
                        self.directory)
        self.kafka_up = False

    # --- the journal ----------------------------------------------------------------------------

    async def _spool(self, frames: list[ProviderFrame]) -> None:
        """Append ``frames`` to the journal, in order; what does not fit is dropped (counted)."""
        if not frames:
            return
        journal = await self._open_journal()
        if journal is None:
            self.journal_full = True
            self._drop(frames, "journal_unavailable")
            return
        try:
            taken = await self._in_thread(_append, journal, frames)
        except OSError as exc:
            log.error("frame journal %s: appending failed: %s", self.directory, exc)
            taken, reason = 0, "journal_unavailable"
        else:
            reason = "journal_full"
        self.metrics.frames_spooled.inc(taken)
        self._gauge(journal)
        self.journal_full = taken < len(frames)
        if self.journal_full:
            self._drop(frames[taken:], reason)

    async def _drain_batch(self) -> bool:
        """Write the journal's oldest records to Kafka and forget them once acknowledged;
        whether any were (False: Kafka is still away, or the journal is empty)."""
        journal = self._journal
        if journal is None or journal.records == 0:
            self.spooling = False
            return False
        batch = await self._in_thread(journal.peek, _BATCH_FRAMES, _BATCH_BYTES)
        if not batch.payloads and batch.end == journal.cursor:
            log.error("frame journal %s: %d records held but none readable", self.directory,
                      journal.records)
            return False  # retried after the backoff, not in a loop
        frames = []
        for payload in batch.payloads:
            try:
                frame = codec.decode(payload)
            except ModelEventsError as exc:
                log.error("frame journal %s: a record does not decode (%s)", self.directory, exc)
                self.metrics.frames_dropped.labels("undecodable").inc()
                continue
            if isinstance(frame, ProviderFrame):
                frames.append(frame)
        if frames:
            try:
                await self._publish(frames)
            except Exception as exc:
                self._kafka_away(exc, len(frames))
                return False
        await self._in_thread(journal.ack, batch.end)
        self.metrics.frames_drained.inc(len(frames))
        self._gauge(journal)
        if not self.kafka_up:
            log.info("Kafka takes frames again: writing the journal's %d frames to it",
                     journal.records + len(frames))
        self.kafka_up = True
        self.journal_full = False
        if journal.records == 0:
            self.spooling = False
            log.info("frame journal %s drained: frames go to Kafka directly", self.directory)
        return True

    async def _open_journal(self) -> SegmentLog | None:
        if self._journal is not None:
            return self._journal
        try:
            self._journal = await self._in_thread(SegmentLog.open, self.directory,
                                                  self.config.max_bytes)
        except (OSError, ModelEventsError) as exc:
            if self._journal_error is None:
                log.error("frame journal %s cannot be opened: %s", self.directory, exc)
            self._journal_error = str(exc)
            return None
        self._journal_error = None
        self._gauge(self._journal)
        return self._journal

    def _warn_about_other_journals(self) -> None:
        # A changed topic prefix leaves the old topic's journal where this one does not look.
        for other in self.directory.parent.glob("*"):
            if other != self.directory and other.is_dir() and any(other.glob("*.seg")):
                log.warning("frame journal %s holds frames for another frames topic (%s) than "
                            "this gateway writes; they stay there until a gateway writing "
                            "that topic starts with this instance id", other, other.name)

    def _gauge(self, journal: SegmentLog) -> None:
        self.metrics.journal_frames.set(journal.records)
        self.metrics.journal_bytes.set(journal.size)

    def _drop(self, frames: list[ProviderFrame], reason: str) -> None:
        """Count and log frames neither written nor kept: never a silent drop."""
        if not frames:
            return
        self.metrics.frames_dropped.labels(reason).inc(len(frames))
        per_run = Counter((frame.run_key, frame.tenant) for frame in frames)
        for (run_key, tenant), count in per_run.items():
            log.error("%d teed frames of run %s (tenant %s) dropped: %s", count, run_key,
                      tenant, _WHY[reason])

    async def _in_thread(self, work: Callable[..., T], *args: Any) -> T:
        # One thread of its own: the journal's file work never blocks the event loop, and
        # never runs twice at once.
        return await asyncio.get_running_loop().run_in_executor(self._executor, work, *args)


def _writer_ended(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and (error := task.exception()) is not None:
        # Frames offered from now on wait in memory until queue_bytes, then are dropped.
        log.error("the frame journal's writer failed", exc_info=error)


def _append(journal: SegmentLog, frames: list[ProviderFrame]) -> int:
    return journal.append([codec.encode(frame) for frame in frames])
