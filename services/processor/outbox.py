"""Sending one batch's outputs: grouped per partition, every acknowledgement awaited, transient
failures retried.

The processor acks a batch's source records only after its outputs are durable, so an output
that cannot be sent must stop the batch, not vanish. Resending is safe because every output is
idempotent (the same event under the same ``seq``, the same RunState, a dead letter more).

The records of a batch are appended, per topic partition and in the order they were added, to
record batches of aiokafka's own (``producer.create_batch`` / ``send_batch``), one produce
future per record batch instead of one per record: aiokafka's ``send`` costs a future, a
partitioner call and an accumulator lookup for every record, which was a tenth of the worker's
time. Order is kept where Kafka keeps it — within a partition — and the idempotent producer
(acks=all) numbers these record batches like any other.

A producer the broker has given up on — its sequence numbers out of order (a retry after a
leader change overtaken by the batch behind it), its epoch fenced — cannot send again: aiokafka's
sender stops for good. The outbox then replaces it (:class:`OutputProducer`), logs why, and
resends what was not acknowledged through the new one: the worker goes on instead of failing the
batch (and, with it, every run of the partition until a restart).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import (
    InvalidProducerEpoch,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    OutOfOrderSequenceNumber,
    ProducerFenced,
    RecordListTooLargeError,
    RecordTooLargeError,
)

from modelevents.services.kafka.clients import partition_for_key

__all__ = ["Outbox", "OutputProducer", "transient", "too_large", "producer_lost"]

log = logging.getLogger("modelevents.processor")

# Waits between resends of what the broker did not acknowledge; the last one repeats.
RETRY_BACKOFF_S = (0.1, 0.5, 1.0, 2.0, 5.0)

_Record = tuple[str, bytes | None, bytes | None]  # (topic, key, value; None: a tombstone)


class OutputProducer:
    """The producer an agent's outboxes send through, replaced when the broker gave up on it.

    ``start`` makes a started producer (the processor's: idempotent, acks=all). Only one
    outbox of an agent sends at a time (they are chained), so a replacement never races a send.
    """

    def __init__(self, start: Callable[[], Awaitable[AIOKafkaProducer]]) -> None:
        self._start = start
        self.current: AIOKafkaProducer | None = None
        self.replaced = 0  # how many times, for the log and the tests

    async def start(self) -> AIOKafkaProducer:
        self.current = await self._start()
        return self.current

    async def replace(self, why: BaseException) -> None:
        old = self.current
        log.warning("the broker gave up on the outputs' producer (%r): replacing it and resending "
                    "what was not acknowledged", why)
        self.current = await self._start()
        self.replaced += 1
        if old is not None:
            try:
                await asyncio.wait_for(old.stop(), timeout=5.0)
            except Exception:
                pass

    async def stop(self) -> None:
        if self.current is not None:
            await self.current.stop()
            self.current = None


class Outbox:
    """The outputs of one batch, acknowledged before the batch is committed.

    ``partitions``: the partition count of every topic written to (the pipeline's topics all
    have the same); a record is sent to the partition its key hashes to, as aiokafka's default
    partitioner (murmur2) would send it. A record without key goes through ``producer.send``.
    """

    def __init__(self, output: OutputProducer, partitions: int) -> None:
        self.output = output
        self.partitions = partitions
        self.records: list[_Record] = []
        # Records the producer or the broker refused as too large (a topic configured with a
        # smaller max.message.bytes than the project's record limit): never retried — they can
        # never succeed — but handed back, with why, for the caller to dead-letter.
        self.refused: list[tuple[_Record, BaseException]] = []
        self._one_per_batch = False  # after a record batch was refused as too large

    def add(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        self.records.append((topic, key, value))

    def __len__(self) -> int:
        return len(self.records)

    async def send_all(self) -> None:
        """Send every record and wait for the broker's acks. Transient failures are retried
        (resending is safe: every output is idempotent); a record refused as too large is left
        out and noted in ``refused``; anything else raises."""
        pending = self.records
        attempt = 0
        while pending:
            producer = self.output.current
            assert producer is not None, "the outputs' producer is not started"
            sent: list[tuple[list[_Record], Any]] = []  # (records, future or the send's error)
            for records, batch, topic, partition in self._batches(producer, pending):
                try:
                    if batch is None:
                        topic, key, value = records[0]
                        future = await producer.send(topic, value, key=key)
                    else:
                        future = await producer.send_batch(batch, topic, partition=partition)
                except KafkaError as exc:
                    future = exc  # not queued: retried with the others that failed
                sent.append((records, future))
            results = await asyncio.gather(
                *(f for _, f in sent if not isinstance(f, BaseException)), return_exceptions=True)
            outcomes = iter(results)
            failed: list[_Record] = []
            first_error: BaseException | None = None
            for records, future in sent:
                outcome = future if isinstance(future, BaseException) else next(outcomes)
                if isinstance(outcome, BaseException) and too_large(outcome):
                    if len(records) > 1:  # the batch as a whole: each record on its own again
                        failed += records
                        continue
                    self.refused.append((records[0], outcome))
                elif isinstance(outcome, BaseException):
                    failed += records
                    first_error = first_error or outcome
            if not failed:
                break
            if first_error is None:  # only batches refused as too large: resent record by record
                pending, attempt = failed, attempt + 1
                self._one_per_batch = True
                continue
            if producer_lost(first_error):
                await self.output.replace(first_error)
            elif not transient(first_error):
                raise first_error
            delay = RETRY_BACKOFF_S[min(attempt, len(RETRY_BACKOFF_S) - 1)]
            log.warning("%d of %d outputs not acknowledged (%r); resending in %.1f s",
                        len(failed), len(pending), first_error, delay)
            attempt += 1
            await asyncio.sleep(delay)
            pending = failed
        self.records = []

    def _batches(self, producer: AIOKafkaProducer, records: list[_Record],
                 ) -> Iterator[tuple[list[_Record], Any, str, int]]:
        """(records, record batch, topic, partition) per topic partition, in the order of
        ``records`` within each; a record batch holds as much as the producer's batch size lets
        it. A record without key, or one too big for a record batch of its own, comes with
        ``None`` for ``producer.send``."""
        if self._one_per_batch:  # find the record that is too large: each is sent on its own
            for record in records:
                yield [record], None, record[0], -1
            return
        by_partition: dict[tuple[str, int], list[_Record]] = {}
        for record in records:
            topic, key, _value = record
            if key is None:
                yield [record], None, topic, -1
                continue
            by_partition.setdefault((topic, partition_for_key(key, self.partitions)), []).append(record)
        create = producer.create_batch
        for (topic, partition), group in by_partition.items():
            batch = create()
            members: list[_Record] = []
            for record in group:
                if batch.append(key=record[1], value=record[2], timestamp=None) is None:
                    if members:  # full: send it, start the next
                        yield members, batch, topic, partition
                        batch, members = create(), []
                        if batch.append(key=record[1], value=record[2], timestamp=None) is not None:
                            members.append(record)
                            continue
                    yield [record], None, topic, partition  # larger than a record batch
                    continue
                members.append(record)
            if members:
                yield members, batch, topic, partition


def too_large(exc: BaseException) -> bool:
    """Whether the producer or the broker refused a record for its size (never transient)."""
    return isinstance(exc, (MessageSizeTooLargeError, RecordTooLargeError, RecordListTooLargeError))


def producer_lost(exc: BaseException) -> bool:
    """Whether the broker gave up on the producer itself: it cannot send again, a new one can."""
    return isinstance(exc, (OutOfOrderSequenceNumber, ProducerFenced, InvalidProducerEpoch))


def transient(exc: BaseException | None) -> bool:
    return isinstance(exc, KafkaTimeoutError) or bool(getattr(exc, "retriable", False))
