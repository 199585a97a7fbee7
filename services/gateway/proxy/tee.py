"""How proxied frames reach ``frames`` without the client ever waiting for Kafka.

:class:`FrameTee` is the interface the proxy's relay writes through: ``offer`` hands over a
call's frames and returns at once; ``accepting`` says whether a tenant may be served now (False
only when Kafka is unreachable and the tenant is ``fail_closed``: the proxy answers 503 before
calling the provider). :class:`ProducerTee` is the simple implementation: one background task
writes the offered frames, in the order offered, with the gateway's producer (acks=all), a batch
at a time; Kafka not acknowledging a batch within ``ack_timeout_s`` marks it unreachable — the
batch is counted and logged as lost, never silently — until a probe of the topics succeeds.
A disk journal that keeps the frames through an outage implements the same interface.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Protocol

from modelevents.schemas.frames import ProviderFrame
from modelevents.services.gateway.state import Gateway
from modelevents.services.kafka import topics
from modelevents.services.kafka.clients import await_acks, send_frame

__all__ = ["FrameTee", "ProducerTee"]

log = logging.getLogger("modelevents.gateway.proxy")

PROBE_EVERY_S = 1.0


class FrameTee(Protocol):
    def offer(self, frames: list[ProviderFrame], tenant: str) -> None: ...   # returns at once, never raises
    def accepting(self, tenant: str) -> bool: ...   # False: Kafka unreachable AND tenant is fail_closed (answer 503 before calling the provider)


class ProducerTee:
    """Frames written in the background by the gateway's producer (see the module docstring)."""

    def __init__(self, gateway: Gateway, fail_closed: list[str]) -> None:
        self.gateway = gateway
        self.fail_closed = frozenset(fail_closed)
        self.reachable = True
        self.lost = 0  # frames Kafka did not acknowledge (logged as they are lost)
        self._pending: deque[ProviderFrame] = deque()
        self._wake = asyncio.Event()
        self._writer: asyncio.Task[None] | None = None
        self._probe: asyncio.Task[None] | None = None
        self._closing = False

    def offer(self, frames: list[ProviderFrame], tenant: str) -> None:
        if not frames:
            return
        self._pending.extend(frames)
        self._wake.set()
        if self._writer is None:
            try:
                self._writer = asyncio.get_running_loop().create_task(
                    self._write(), name="proxy frame tee")
            except RuntimeError:  # no loop: nothing can write them; said, not silent
                self._lose(list(self._pending), "no event loop runs the tee")
                self._pending.clear()

    def accepting(self, tenant: str) -> bool:
        return self.reachable or tenant not in self.fail_closed

    async def close(self, timeout_s: float) -> None:
        """Write what is pending (for ``timeout_s`` at most), then stop."""
        self._closing = True
        self._wake.set()
        if self._writer is not None:
            try:
                async with asyncio.timeout(timeout_s):
                    await asyncio.shield(self._writer)
            except TimeoutError:
                self._writer.cancel()
        if self._probe is not None:
            self._probe.cancel()
        if self._pending:
            self._lose(list(self._pending), "the gateway stopped before Kafka took them")
            self._pending.clear()

    async def _write(self) -> None:
        while True:
            if not self._pending:
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = list(self._pending)
            self._pending.clear()
            await self._write_batch(batch)

    async def _write_batch(self, batch: list[ProviderFrame]) -> None:
        gateway = self.gateway
        try:
            async with asyncio.timeout(gateway.config.ack_timeout_s):
                futures = [await send_frame(gateway.producer, gateway.settings, frame)
                           for frame in batch]
                await await_acks(gateway.settings, futures)
        except Exception as exc:  # no acknowledgement in time, or Kafka refused: not written
            self._lose(batch, f"{type(exc).__name__}: {exc}")
            self._unreachable()
            return
        gateway.count_written(batch)
        self.reachable = True

    def _lose(self, frames: list[ProviderFrame], why: str) -> None:
        self.lost += len(frames)
        runs = sorted({frame.run_key for frame in frames})
        log.error("proxy: %d frames of %d runs not written to Kafka (%s); runs: %s",
                  len(frames), len(runs), why, ", ".join(runs[:10]))

    def _unreachable(self) -> None:
        self.reachable = False
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(self._until_reachable(),
                                                                 name="proxy kafka probe")

    async def _until_reachable(self) -> None:
        settings = self.gateway.settings
        while not self.reachable:
            await asyncio.sleep(PROBE_EVERY_S)
            try:
                await asyncio.wait_for(topics.verify_topics(settings), 5.0)
            except Exception:  # still away: probe again
                continue
            self.reachable = True
