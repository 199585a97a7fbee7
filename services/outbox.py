"""Sending one batch's outputs: in order, every acknowledgement awaited, transient failures retried.

The processor acks a batch's source records only after its outputs are durable, so an output
that cannot be sent must stop the batch, not vanish. Resending is safe because every output is
idempotent (the same event under the same ``seq``, the same RunState, a dead letter more).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, KafkaTimeoutError

__all__ = ["Outbox", "transient"]

log = logging.getLogger("modelevents.processor")

# Waits between resends of what the broker did not acknowledge; the last one repeats.
RETRY_BACKOFF_S = (0.1, 0.5, 1.0, 2.0, 5.0)


class Outbox:
    """The outputs of one batch, sent in order and acknowledged before the batch is committed."""

    def __init__(self, producer: AIOKafkaProducer) -> None:
        self.producer = producer
        self.records: list[tuple[str, bytes | None, bytes, list[tuple[str, bytes]] | None]] = []

    def add(self, topic: str, key: bytes | None, value: bytes,
            headers: list[tuple[str, bytes]] | None = None) -> None:
        self.records.append((topic, key, value, headers))

    async def send_all(self) -> None:
        """Send every record and wait for the broker's acks. Transient failures are retried
        (resending is safe: every output is idempotent); anything else raises."""
        pending = self.records
        attempt = 0
        while pending:
            futures: list[Any] = []
            for position, (topic, key, value, headers) in enumerate(pending):
                try:
                    futures.append(await self.producer.send(topic, value, key=key, headers=headers))
                except KafkaError as exc:
                    # Not queued: this record and the rest are retried in order.
                    futures += [exc] * (len(pending) - position)
                    break
            results = await asyncio.gather(
                *(f for f in futures if not isinstance(f, BaseException)), return_exceptions=True)
            outcomes = iter(results)
            failed = []
            first_error: BaseException | None = None
            for record, future in zip(pending, futures):
                outcome = future if isinstance(future, BaseException) else next(outcomes)
                if isinstance(outcome, BaseException):
                    failed.append(record)
                    first_error = first_error or outcome
            if not failed:
                break
            if not transient(first_error):
                raise first_error  # type: ignore[misc]
            delay = RETRY_BACKOFF_S[min(attempt, len(RETRY_BACKOFF_S) - 1)]
            log.warning("%d of %d outputs not acknowledged (%r); resending in %.1f s",
                        len(failed), len(pending), first_error, delay)
            attempt += 1
            await asyncio.sleep(delay)
            pending = failed
        self.records = []


def transient(exc: BaseException | None) -> bool:
    return isinstance(exc, KafkaTimeoutError) or bool(getattr(exc, "retriable", False))
