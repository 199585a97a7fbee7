"""A block's streamed pieces, held until its done event — up to a bound.

Adapters rebuild what the provider streamed in deltas (a message's text, a tool call's
arguments) to emit it whole on the done event. A run's adapters live in its state on a Kafka
changelog, which must stay under the record limit whatever the run's size
(``schemas/limits.py``), so a block holds at most :data:`HOLD_BYTES`. Past that it keeps only
the count: the done event then carries an empty field and ``elided`` naming the delta kind whose
concatenation is the value (``ModelEvent.elided``) — every delta is on ``events`` already, so a
consumer still rebuilds it exactly (``modelevents.schemas.pieces``' companion rule).
"""

from __future__ import annotations

__all__ = ["HOLD_BYTES", "Parts"]

# Per block: enough for any ordinary answer or tool call, small enough that a run with a few
# open blocks keeps its state well under one record.
HOLD_BYTES = 128 * 1024


class Parts:
    """The pieces of one block: ``add`` each delta, ``text()`` at the end."""

    __slots__ = ("items", "size", "elided")

    def __init__(self) -> None:
        self.items: list[str] = []
        self.size = 0  # UTF-8 bytes of everything added
        self.elided = False  # over HOLD_BYTES: the items were dropped

    def add(self, piece: str) -> None:
        # Once per delta of every block: one test on the way (size only grows, so a block is
        # elided exactly when its size is past the bound).
        size = self.size = self.size + (len(piece) if piece.isascii() else len(piece.encode()))
        if size > HOLD_BYTES:
            if not self.elided:
                self.items = []
                self.elided = True
            return
        self.items.append(piece)

    def text(self) -> str:
        """Everything added, or "" when it was too much to hold (see ``elided``)."""
        items = self.items
        if len(items) > 1:  # joined once: callers may ask again (a poll's every snapshot)
            items[:] = ["".join(items)]
        return items[0] if items else ""

    def __bool__(self) -> bool:
        return self.size > 0

    def __getstate__(self) -> tuple[list[str], int, bool]:
        return (self.items, self.size, self.elided)

    def __setstate__(self, state: tuple[list[str], int, bool]) -> None:
        self.items, self.size, self.elided = state
