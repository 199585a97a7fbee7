"""The decisions watcher (``modelevents decisions watch``): reads ``events``, ``runs``,
``receipts`` and ``decisions`` live and demotes a decision the moment a retest trigger fires,
by writing its next revision — status ``historical``, the trigger, expected and observed values
and the record that showed it — to ``decisions``, acknowledged before it is counted.

    watcher = Watcher(settings, resolve_capabilities=resolve)   # resolve: (p, api, model) -> dict
    await watcher.run(ready=event)                              # until cancelled

It reads without a consumer group, every partition, from the end (``from_beginning=True``: from
the start, to look back over what the topics hold): what happened while no watcher ran is not
seen unless asked for. The capability manifest entry is compared at start and every
``capabilities_every`` seconds. ``demoted`` counts demotions by trigger; ``checker.decisions``
holds the latest revision of every decision (the Prometheus gauge reads both).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.errors import KafkaError

from modelevents.consumers.decisions.checks import DEFAULT_WINDOW, Checker, Fired, Where
from modelevents.consumers.tools.receipts import decode_receipt, is_receipt
from modelevents.schemas import codec
from modelevents.schemas.decision_record import decode_decision, is_decision
from modelevents.schemas.errors import SchemaError
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.run_state import RunState
from modelevents.services.errors import KafkaUnavailable
from modelevents.services.kafka.clients import (
    LIVE_FETCH_MAX_WAIT_MS,
    assign_partitions,
    make_consumer,
    start_client,
    start_producer,
)
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.migration.decisions.make import demoted
from modelevents.services.migration.decisions.store import TOPIC, full_topic, publish

__all__ = ["Watcher"]

log = logging.getLogger("modelevents.decisions")

Resolver = Callable[[str, str, str], dict[str, Any] | None]


class Watcher:
    def __init__(self, settings: PipelineSettings, *, resolve_capabilities: Resolver | None = None,
                 capabilities_every: float = 60.0, window: int = DEFAULT_WINDOW,
                 margin: float = 0.0, from_beginning: bool = False) -> None:
        self.settings = settings
        self.resolve_capabilities = resolve_capabilities
        self.capabilities_every = capabilities_every
        self.from_beginning = from_beginning
        self.checker = Checker(window=window, margin=margin)
        self.demoted: Counter[str] = Counter()
        self._topics = {full_topic(settings, name): name
                        for name in ("events", "runs", "receipts", TOPIC)}

    async def run(self, ready: asyncio.Event | None = None) -> None:
        consumer = make_consumer(self.settings, fetch_max_wait_ms=LIVE_FETCH_MAX_WAIT_MS)
        await start_client(consumer, self.settings)
        producer = await start_producer(self.settings)
        try:
            assigned = []
            for full in self._topics:  # each call assigns its own topic's: collect, then all
                assigned += await assign_partitions(consumer, self.settings, full)
            consumer.assign(assigned)
            await self._load_decisions(consumer, [tp for tp in assigned
                                                  if self._topics[tp.topic] == TOPIC])
            live = [tp for tp in assigned if self._topics[tp.topic] != TOPIC]
            if self.from_beginning:
                await consumer.seek_to_beginning(*live)
            else:
                await consumer.seek_to_end(*live)
                for tp in live:  # resolve the end offsets now: what comes next is live
                    await consumer.position(tp)
            await self._check_capabilities(producer)
            checked = time.monotonic()
            log.info("watching %d current decisions of %d", len(self.checker.current()),
                     len(self.checker.decisions))
            if ready is not None:
                ready.set()
            while True:
                try:
                    batches = await consumer.getmany(timeout_ms=500)
                except KafkaError as exc:
                    raise KafkaUnavailable(self.settings.bootstrap_servers, str(exc)) from exc
                for tp, messages in batches.items():
                    for msg in messages:
                        await self._handle(producer, self._topics[tp.topic], msg)
                if time.monotonic() - checked >= self.capabilities_every:
                    checked = time.monotonic()
                    await self._check_capabilities(producer)
        finally:
            await consumer.stop()
            await producer.stop()

    async def _load_decisions(self, consumer: AIOKafkaConsumer, partitions: list[Any]) -> None:
        """Every decision the topic holds now, read to its end before anything live."""
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)
        while any([await consumer.position(tp) < end for tp, end in ends.items()]):
            batches = await consumer.getmany(*partitions, timeout_ms=500)
            for messages in batches.values():
                for msg in messages:
                    self._decision(msg.value)

    def _decision(self, raw: bytes | None) -> None:
        if is_decision(raw):
            self.checker.update(decode_decision(raw or b""))

    async def _handle(self, producer: AIOKafkaProducer, topic: str, msg: Any) -> None:
        where = Where(msg.topic, msg.partition, msg.offset)
        fired: list[Fired] = []
        try:
            if topic == TOPIC:
                self._decision(msg.value)
            elif topic == "receipts":
                if is_receipt(msg.value):
                    fired = self.checker.on_receipt(decode_receipt(msg.value), where)
            elif msg.value is not None:
                record = codec.decode(msg.value)
                if isinstance(record, ModelEvent):
                    fired = self.checker.on_event(record, msg.value, where)
                elif isinstance(record, RunState):
                    fired = self.checker.on_run_state(record, where)
        except SchemaError as exc:
            # Not the watcher's to judge: the worker dead-letters what it cannot read.
            log.debug("skipped %s/%d@%d: %s", msg.topic, msg.partition, msg.offset, exc)
            return
        await self._demote(producer, fired)

    async def _check_capabilities(self, producer: AIOKafkaProducer) -> None:
        if self.resolve_capabilities is not None:
            await self._demote(producer, self.checker.check_capabilities(self.resolve_capabilities))

    async def _demote(self, producer: AIOKafkaProducer, fired: list[Fired]) -> None:
        for found in fired:
            decision = self.checker.decisions[found.decision_id]
            if not decision.current:
                continue  # two triggers in one record: the first demoted it
            revision = demoted(decision, found.demotion)
            await publish(producer, self.settings, revision)
            self.checker.update(revision)
            self.demoted[found.demotion.trigger] += 1
            d = found.demotion
            log.warning("decision %s (bundle %s) demoted to historical evidence: %s [trigger "
                        "%s; run %s, event %s, %s/%s@%s]", decision.decision_id,
                        decision.bundle_name, d.reason, d.trigger, d.run_id, d.event_id,
                        d.topic, d.partition, d.offset)
