"""The run table and the agents' topic schema: :class:`RunTable`, :class:`RawRecords`.

The agents write their tables' changelog records themselves, with their batches' outputs, and
read and set the in-memory store (``memory://``) directly; so :class:`RunTable` chooses a key's
changelog partition by the key's hash, reads the store's dict, and notes a key's partition in the
store's ``_key_partition`` as faust-streaming 0.15.3's memory store does for what it recovers
(else a rebalance would not drop it). :class:`RawRecords` replaces the per-record decoder a
``faust.Schema`` compiles, Faust's only hook between a message and the agent's event.
"""

from __future__ import annotations

import logging
from typing import Any

import faust

from modelevents.services.kafka.clients import partition_for_key

__all__ = ["RawRecords", "RunTable"]


class RawRecords(faust.Schema):
    """A topic schema that hands an agent each record's key and value as the bytes they are.

    With the ``raw`` serializers Faust returns them unchanged too, but through two serializer
    lookups and calls per record (~5 % of a busy worker's time); the processor decodes values
    itself, so the event is made from the message directly. Only for topics an agent reads."""

    def compile(self, app: Any, **kwargs: Any) -> Any:
        create_event = app.create_event

        async def decode(message: Any, *, propagate: bool = False) -> Any:
            return create_event(message.key, message.value, message.headers, message)

        return decode


class RunTable(faust.Table):
    """A table whose changelog partition for a key is the partition the default partitioner
    gives that key — the partition of the source records keyed by it.

    Faust's own choice is the partition of the record being processed (wrong for a batch that
    spans partitions) or, with ``use_partitioner``, the producer's partitioner, which fails on a
    changelog whose metadata the producer has not fetched yet. The hash needs neither.
    """

    # Faust narrates table starts and stops; keep this subclass's narration under "faust" too
    # (a logger mode has not claimed for another class, or mode would replace it).
    logger = logging.getLogger("faust.tables.modelevents")

    def partition_for_key(self, key: Any) -> int:
        return partition_for_key(key, self.partitions or self.app.conf.topic_partitions)

    # The processor's agents write the changelog records themselves, with their batches' outputs
    # (services/processor/app.py, "Delivery"), and read and set the in-memory store (``memory://``)
    # directly:

    def lookup(self, key: bytes) -> Any:
        """The in-memory value of ``key``, or None: the store's dict read directly. Through the
        table a missing key costs a KeyError raised and caught in Faust's mapping layers
        (~1.5 µs; the common case: every frame looks up its key's alias, every new run its
        state)."""
        return self.data.data.get(key)

    def store_written(self, key: bytes, value: Any) -> None:
        """Set (None: delete) the in-memory value of ``key`` whose changelog record the caller
        wrote, without Faust's own changelog write.

        The key's partition is noted as Faust's memory store notes it for what it recovers, so
        that when a rebalance took the partition away, the store drops the key
        (``on_recovery_completed``) instead of keeping a value another worker now writes."""
        store: Any = self.data  # faust.stores.memory.Store
        if value is None:
            store.data.pop(key, None)
            store._key_partition.pop(key, None)
        else:
            store.data[key] = value
            store._key_partition[key] = self.partition_for_key(key)
