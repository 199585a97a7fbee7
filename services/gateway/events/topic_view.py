"""A view of one whole topic in the gateway's memory: read from the beginning, then followed.

:class:`TopicView` reads every partition of its topic from offset 0 when it starts and then
follows it, handing each record to :meth:`TopicView.apply` (the subclass keeps what it needs:
``run_states.RunStates`` the latest RunState per run, ``owners.RunOwners`` the first claim per run
id). It says when it has read what the topic held at its start (:attr:`TopicView.caught_up`: a
run not in the view is then really unknown, not just not read yet) and how far it has read each
partition (:meth:`TopicView.wait_read`: a claim written by this gateway is known to the view
once the view passed its offset, with every earlier record of its partition).

A broker that goes away is retried every 2 s; the view is read again from the start, which the
subclasses' :meth:`apply` must bear (it does: the latest state is the latest again, the first
claim the first again).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["TopicView"]

log = logging.getLogger(__name__)

RETRY_S = 2.0


class TopicView:
    """Reads topic ``name`` (logical) from its beginning and follows it (module docstring)."""

    def __init__(self, settings: PipelineSettings, name: str) -> None:
        self.settings = settings
        self.topic = settings.topic(name)
        self.caught_up = asyncio.Event()
        # Partition → the offset after the last record read (what wait_read compares with).
        self.read_to: dict[int, int] = {}
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None

    def apply(self, message: Any) -> bool:
        """Take one consumed record (aiokafka's ConsumerRecord); True when the view changed."""
        raise NotImplementedError

    async def start(self) -> None:
        self._task = asyncio.create_task(self._follow(), name=f"view-{self.topic}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``predicate()`` holds (checked after each batch read); its last value."""
        async with self._changed:
            try:
                await asyncio.wait_for(self._changed.wait_for(predicate), timeout)
            except TimeoutError:
                pass
            return predicate()

    async def wait_read(self, partition: int, offset: int, timeout: float) -> bool:
        """Whether the view read ``partition`` past ``offset`` within ``timeout`` seconds."""
        return await self.wait_until(lambda: self.read_to.get(partition, 0) > offset, timeout)

    async def _follow(self) -> None:
        while True:
            try:
                await self._read()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("reading %s failed (%r); retrying in %g s", self.topic, exc, RETRY_S)
                await asyncio.sleep(RETRY_S)

    async def _read(self) -> None:
        consumer = clients.make_consumer(self.settings)
        await clients.start_client(consumer, self.settings)
        try:
            assigned = await self._assign(consumer)
            ends = await consumer.end_offsets(assigned)
            pending = {tp for tp, end in ends.items() if end > 0}
            while True:
                if not pending:
                    self.caught_up.set()
                try:
                    batches = await consumer.getmany(timeout_ms=500)
                except KafkaError as exc:
                    raise clients.KafkaUnavailable(self.settings.bootstrap_servers,
                                                    str(exc)) from exc
                for tp, messages in batches.items():
                    for message in messages:
                        self.apply(message)
                    self.read_to[tp.partition] = max(self.read_to.get(tp.partition, 0),
                                                     messages[-1].offset + 1)
                # Compaction (or a control record) can leave an end offset beyond the last
                # record: the position says where reading really is.
                for tp in assigned:
                    position = await consumer.position(tp)
                    self.read_to[tp.partition] = max(self.read_to.get(tp.partition, 0), position)
                    if tp in pending and position >= ends[tp]:
                        pending.discard(tp)
                async with self._changed:
                    self._changed.notify_all()
        finally:
            await consumer.stop()

    async def _assign(self, consumer: Any) -> list[TopicPartition]:
        partitions = consumer.partitions_for_topic(self.topic) or set()
        if not partitions:
            await consumer._client.force_metadata_update()
            partitions = consumer.partitions_for_topic(self.topic) or set()
        if not partitions:
            raise clients.KafkaUnavailable(self.settings.bootstrap_servers,
                                            f"topic {self.topic} has no partitions (yet)")
        assigned = [TopicPartition(self.topic, p) for p in sorted(partitions)]
        consumer.assign(assigned)
        await consumer.seek_to_beginning(*assigned)
        return assigned
