"""A table recovery that stopped receiving its changelog helped along: :class:`RecoveryWatch`.

Now and then faust-streaming 0.15.3's recovery after a rebalance waits for ever for changelog
records its consumer already fetched. Seeing it stall needs the table manager's recovery
(``app.tables.recovery``: ``in_recovery``, ``active_offsets``, ``active_remaining()``), which
Faust's app interface does not expose; the records come again by ``Consumer.seek_wait`` (in the
consumer's own thread, as for :mod:`.ordering`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import faust

__all__ = ["RecoveryWatch"]

log = logging.getLogger("modelevents.processor")


class RecoveryWatch:
    """Helps a table recovery along that stopped receiving its changelog records.

    Now and then (a few rebalances in a hundred here) faust-streaming 0.15.3's recovery after a
    rebalance waits for ever: the consumer fetched the changelog records (its positions are at
    the end) but they never reached the recovery, which keeps logging "No event received for
    active tp". When recovery has made no progress for ``STALL_S`` seconds, the changelog
    partitions it still needs are sought back to where it is, which delivers the records again
    (the recovery applies each offset once).
    """

    STALL_S = 5.0
    CHECK_S = 1.0

    def __init__(self, app: faust.App) -> None:
        self.app = app
        self.watching: tuple[dict[Any, int], float] | None = None

    async def check(self) -> None:
        tables: Any = self.app.tables
        recovery = tables.recovery
        if not recovery.in_recovery or not recovery.need_recovery():
            self.watching = None
            return
        now = time.monotonic()
        offsets = dict(recovery.active_offsets)
        if self.watching is None or self.watching[0] != offsets:
            self.watching = (offsets, now)
            return
        if now - self.watching[1] < self.STALL_S:
            return
        self.watching = (offsets, now)
        for tp, remaining in recovery.active_remaining().items():
            if remaining > 0:
                position = max(offsets.get(tp, -1), -1) + 1
                log.warning("table recovery has not progressed for %.0f s on %s[%d] (%d records "
                            "to go): reading the changelog again from offset %d",
                            self.STALL_S, tp.topic, tp.partition, remaining, position)
                try:
                    await self.app.consumer.seek_wait({tp: position})
                except Exception as exc:
                    log.info("could not seek %s[%d]: %r", tp.topic, tp.partition, exc)
