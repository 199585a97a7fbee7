"""One run's ModelEvents read from ``events``, each ``seq`` once, in order, of one tenant only.

- :func:`run_history` reads them up to what the topic holds now (only the partition the run's
  key maps to, from its start: cost grows with the partition, not the run — fine for the
  gateway's interactive use; bulk readers use ``replay``); :func:`live_run_events` reads that
  and then goes on with what the gateway's one tail of ``events`` (tail.py) reads, until
  the run finished or the caller stops reading (followers of one run share one such reader:
  followers.py).
- Every record is authorized, not only the request: only events of ``tenant`` (the run id's
  owner, ``owners.py``) are passed on. A key can hold events of another tenant — a run that
  expired and was started afresh by someone else before run ids had owners, or any writer that
  bypassed the gateway — and those are neither shown nor allowed to take a ``seq`` of the
  owner's run. A record written twice by an at-least-once retry is dropped here, as every
  consumer of ``events`` must.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator

from modelevents.schemas.events import ModelEvent
from modelevents.services.gateway.events.tail import EventsTail
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings

__all__ = ["live_run_events", "run_history", "in_seq_order", "IDLE_TICK_S"]

# How long live_run_events waits for the next event of a run before it reports that it is still
# waiting (the SSE route sends a comment as a keep-alive); reading goes on after that.
IDLE_TICK_S = 15.0


async def live_run_events(tail: EventsTail, settings: PipelineSettings, run_id: str,
                          tenant: str | None, *, idle_tick: float = IDLE_TICK_S,
                          ) -> AsyncIterator[ModelEvent | None]:
    """The run's events of ``tenant`` (None: any) in order, each once, until ``run.finished``
    (or the caller stops iterating); ``None`` every ``idle_tick`` s while nothing arrives (a
    keep-alive tick). What ``events`` holds is read from the run's partition; what comes after
    from the gateway's one tail of ``events`` (tail.py), subscribed to first, so that
    nothing falls between the two (the overlap is dropped by seq)."""
    subscription = await tail.subscribe(run_id)
    try:
        # No idle timeout: it counts only this run's records, and a history cut short on a
        # big partition would hold every later event back for the seqs it never read.
        history = clients.read_records(settings, "events", run_id=run_id, timeout=float("inf"),
                                       to_end=True)

        async def records() -> AsyncIterator[clients.Record | None]:
            async for record in history:
                yield record
            async for record in subscription.records(idle_tick):
                yield record

        async for event in in_seq_order(records(), -1, tenant):
            yield event
            if event is not None and event.kind == "run.finished":
                return
    finally:
        subscription.close()


async def run_history(settings: PipelineSettings, run_id: str, tenant: str | None, *,
                      after_seq: int = -1) -> AsyncGenerator[ModelEvent, None]:
    """The run's events of ``tenant`` with ``seq > after_seq`` that ``events`` holds now, in
    order, each once."""
    records = clients.read_records(settings, "events", run_id=run_id, timeout=float("inf"),
                                   to_end=True)  # to the end as it was: never cut short
    async for event in in_seq_order(records, after_seq, tenant):
        if event is not None:
            yield event


async def in_seq_order(records: AsyncIterator[clients.Record | None], after_seq: int,
                       tenant: str | None) -> AsyncIterator[ModelEvent | None]:
    """Events of ``tenant`` from ``seq`` after_seq + 1 on, each seq once (a record written twice
    by an at-least-once retry is dropped); ``None`` ticks pass through."""
    expected = after_seq + 1
    held: dict[int, ModelEvent] = {}
    async for record in records:
        if record is None:
            yield None
            continue
        event = record.value
        if not isinstance(event, ModelEvent) or event.seq is None or event.seq < expected:
            continue  # not an event, or a duplicate of one already passed on
        if tenant is not None and event.tenant != tenant:
            continue  # another tenant's record under this key: never the owner's
        held[event.seq] = event
        while expected in held:
            ready = held.pop(expected)
            expected += 1
            yield ready
