"""The order in which one agent's outputs reach the log (``Lane``), and what computing a batch
gave for its second half (``Computed``): the processor's ordered output and checkpointing, with
``services/processor/outbox.py`` (which sends one batch's outputs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from modelevents.services.processor.outbox import Outbox, OutputProducer

TableWrite = tuple[Any, bytes, bytes | None]  # (table, key, value; None: deleted)


@dataclass
class Computed:
    """What computing a batch gave, for its second half (send, write, ack)."""

    outbox: Outbox
    writes: list[TableWrite]
    records: list[Any]  # to ack
    held: list[bytes]  # run keys held in the working state until the writes are done
    # Pieces of a delivery still incomplete: not acked with this batch (acked with the batch that
    # completes them; a crash before that delivers them again, from the first piece).
    pending: list[Any] = dataclass_field(default_factory=list)
    completed: list[Any] = dataclass_field(default_factory=list)  # earlier batches' pieces to ack


class Lane:
    """The order in which one agent's outputs reach the log: each batch's second half (send,
    write, ack) and the release timer's table writes, in tasks chained one after the other.

    Chained, a write reaches its changelog after every write queued before it, whichever task
    queued it: the release timer's deletion of a run's value cannot overtake, or be overtaken
    by, a batch's new value for the same run.
    """

    def __init__(self) -> None:
        self.output: OutputProducer | None = None  # the agent's outputs producer, while it runs
        self.in_flight: list[asyncio.Task] = []  # oldest first

    def chain(self, work: Awaitable[None], on_done: Callable[[asyncio.Task], None]) -> asyncio.Task:
        previous = self.in_flight[-1] if self.in_flight else None

        async def after_previous() -> None:
            if previous is not None:
                await previous  # a failure there fails this one too: nothing overtakes it
            await work

        task = asyncio.ensure_future(after_previous())
        task.add_done_callback(on_done)
        self.in_flight.append(task)
        return task

    async def wait(self, keep: int) -> None:
        """Until at most ``keep`` tasks are in flight."""
        while len(self.in_flight) > keep:
            await self.in_flight.pop(0)

    async def drain(self) -> None:
        """Until every task is done, without raising what one raised (its callback reported it)."""
        if self.in_flight:
            await asyncio.wait(self.in_flight)
        self.in_flight.clear()
