"""Webhook deliveries in single flight: one send per (tenant, provider, webhook-id).

A provider sends a delivery again when it got no 2xx in time, and may send it several times at
once. Each copy written would be another frame, and each thin webhook another fetch with the
tenant's key. So the first copy starts *the* send of the delivery — a task that queues the frame
on the producer, waits for Kafka's acknowledgement and then schedules the fetch — and every copy,
the first included, waits for that one task:

- acknowledged within ``ack_timeout_s`` → 200;
- not yet → 503 (Retry-After), but the task goes on: aiokafka keeps the record queued and writes
  it once the broker is back. A retry then joins the same task (still pending: it waits again;
  acknowledged meanwhile: 200 at once), and nothing is written twice;
- the task failed (the record expired unsent, or Kafka refused it) → forgotten, so the next
  retry sends anew: nothing of the failed one was kept.

Memory is bounded: acknowledged deliveries are remembered for ``dedupe_ttl_s`` and at most
``dedupe_cache_size`` of them (the oldest forgotten first). Forgetting is safe: a delivery sent
again keeps its frame_id, and the processor drops the copy.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Deliveries", "Delivery", "DeliveryKey"]

log = logging.getLogger("modelevents.gateway.webhooks")

# (tenant, provider, webhook-id)
DeliveryKey = tuple[str, str, str]


@dataclass
class Delivery:
    """The one send of a delivery; ``answer`` is the JSON body of its 200 once acknowledged."""

    task: asyncio.Task
    answer: dict[str, Any] | None = None
    acked_at: float | None = None
    waiters: int = field(default=0)

    async def wait(self, timeout_s: float) -> dict[str, Any]:
        """The answer once acknowledged; TimeoutError after ``timeout_s`` (the send goes on);
        the send's own error when it failed."""
        if self.answer is not None:
            return self.answer
        self.waiters += 1
        try:
            async with asyncio.timeout(timeout_s):
                # shield: a waiter that gives up (or whose client left) does not cancel the send.
                return await asyncio.shield(self.task)
        finally:
            self.waiters -= 1


class Deliveries:
    """The deliveries in flight and those acknowledged recently (see the module docstring)."""

    def __init__(self, size: int, ttl_s: float, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.size = size
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: OrderedDict[DeliveryKey, Delivery] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: DeliveryKey) -> Delivery | None:
        """The delivery's send in flight or acknowledged within the TTL; None otherwise."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.acked_at is not None and self._clock() - entry.acked_at > self.ttl_s:
            del self._entries[key]
            return None
        return entry

    def begin(self, key: DeliveryKey,
              send: Callable[[], Coroutine[Any, Any, dict[str, Any]]]) -> Delivery:
        """Start the delivery's one send (``send()`` gives the 200's body once acknowledged)."""
        entry = Delivery(asyncio.create_task(send(), name=f"webhook delivery {key}"))
        self._entries[key] = entry
        entry.task.add_done_callback(lambda task: self._settled(key, entry, task))
        self._evict()
        return entry

    def _settled(self, key: DeliveryKey, entry: Delivery, task: asyncio.Task) -> None:
        failed = task.cancelled() or task.exception() is not None
        if failed:
            # Nothing was kept: the next retry must send again, not find this.
            if self._entries.get(key) is entry:
                del self._entries[key]
            if not task.cancelled() and entry.waiters == 0:
                log.warning("webhook delivery %s/%s %s not written (no request waits for it; "
                            "the provider's retry sends it again): %s", key[1], key[0], key[2],
                            task.exception())
            return
        entry.answer = task.result()
        entry.acked_at = self._clock()
        if self.size <= 0 and self._entries.get(key) is entry:
            del self._entries[key]

    def _evict(self) -> None:
        # The oldest acknowledged deliveries go first; one in flight stays (its requests wait on
        # it, and there are only as many as requests in progress).
        excess = len(self._entries) - self.size
        doomed: list[DeliveryKey] = []
        for key, entry in self._entries.items():
            if len(doomed) >= excess:
                break
            if entry.answer is not None:
                doomed.append(key)
        for key in doomed:
            del self._entries[key]

    async def close(self) -> None:
        """Cancel sends still in flight (the gateway is stopping; the producer was flushed)."""
        pending = [e.task for e in self._entries.values() if not e.task.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
