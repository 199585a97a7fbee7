"""The calls waiting for an approval, and the decisions that came before theirs: where the
executor looks a decision up — one dict lookup, never a read of ``events``.

A decision applies to a waiting call only when its tenant, run id and approval id are all the
call's (:meth:`ApprovalBook.take`); approval ids are random and bound to the arguments' hash
(``services/run_logic/executor_events.new_approval_id``), so no tenant can name another's
approval, nor one not asked yet. A waiting call is written to ``receipts`` as an
``awaiting_approval`` record holding the call itself (:func:`held_call`), and read back by a
restarted executor (:meth:`ApprovalBook.restore`): it still finds the call a decision names.

A decision that finds no waiting call is kept per (tenant, run, approval) — at most
:data:`EARLY_DECISIONS`, the least recently kept dropped first — and applied should that very
approval be asked again (the same call proposed again after a restart).

An approval whose call was decided is remembered as answered (:meth:`ApprovalBook.answered`,
as many as early decisions): its decision read again — redelivered after the executor died
between the final receipt and the ``tool.result`` — sends that result again, never nothing.

    book = ApprovalBook()
    book.park(Waiting(approval_id, tenant, run_id, operation, hashed, tool_call_event))
    waiting = book.take(decision.tenant, decision.run_id, approval_id)   # None: not this one
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass, fields, replace

from modelevents.consumers.tools.receipts import ToolReceipt
from modelevents.schemas import codec
from modelevents.schemas.errors import SchemaError
from modelevents.schemas.events import ModelEvent, ToolCall
from modelevents.schemas.limits import MAX_RECORD_BYTES
from modelevents.services.run_logic.executor_events import RunOf

__all__ = ["ApprovalBook", "Waiting", "EarlyDecision", "Answered", "AWAITING", "EARLY_DECISIONS",
           "HELD_CALL_BYTES", "held_call"]

log = logging.getLogger(__name__)

# The phase of the receipt that records a call waiting for its approval.
AWAITING = "awaiting_approval"
# How many decisions without a waiting call are kept (about 200 bytes each).
EARLY_DECISIONS = 10_000
# The largest tool.call held on an awaiting receipt: the rest of the receipt fits beside it in
# one record. A larger call is refused rather than asked for.
HELD_CALL_BYTES = MAX_RECORD_BYTES - 64 * 1024


@dataclass(frozen=True)
class Waiting:
    """A call waiting for ``approval_id``: the tool.call (the event, or its encoded record as
    read back from a receipt) with the arguments that were asked for."""

    approval_id: str
    tenant: str
    run_id: str
    operation_id: str
    arguments_hash: str
    call: ModelEvent | bytes

    def event(self) -> ModelEvent:
        if isinstance(self.call, ModelEvent):
            return self.call
        event = codec.decode(self.call)
        if not isinstance(event, ModelEvent) or not isinstance(event.payload, ToolCall):
            raise SchemaError(f"the call held for approval {self.approval_id} is not a tool.call")
        return event


@dataclass(frozen=True)
class EarlyDecision:
    granted: bool
    arguments_hash: str | None


@dataclass(frozen=True)
class Answered:
    """A decided approval: its operation, and the run its tool.result is written to."""

    operation_id: str
    run: RunOf


def _answered(waiting: Waiting) -> Answered | None:
    try:
        event = waiting.event()
    except SchemaError:
        return None
    return Answered(waiting.operation_id, RunOf(event.run_id, event.tenant, event.provider,
                                                event.api, event.model))


def held_call(event: ModelEvent, arguments: str) -> tuple[ModelEvent, bytes]:
    """The tool.call as it is held for its approval — a plain event with the arguments asked
    for (whole: never elided) — and its encoded record for the awaiting receipt."""
    plain = ModelEvent(**{f.name: getattr(event, f.name) for f in fields(ModelEvent)})
    assert isinstance(plain.payload, ToolCall)
    held = replace(plain, elided=None, piece=None,
                   payload=replace(plain.payload, arguments=arguments))
    return held, codec.encode(held)


class ApprovalBook:
    def __init__(self, early_limit: int = EARLY_DECISIONS) -> None:
        self.early_limit = early_limit
        self._waiting: dict[str, Waiting] = {}  # approval id → the call waiting for it
        self._of_operation: dict[str, str] = {}  # operation id → its approval id
        self._early: OrderedDict[tuple[str, str, str], EarlyDecision] = OrderedDict()
        self._answered: OrderedDict[tuple[str, str, str], Answered] = OrderedDict()

    def __len__(self) -> int:
        return len(self._waiting)

    @property
    def early_count(self) -> int:
        return len(self._early)

    def park(self, waiting: Waiting) -> EarlyDecision | None:
        """Hold ``waiting``; the decision kept for it already, if one came first."""
        self.withdraw(waiting.operation_id)
        self._waiting[waiting.approval_id] = waiting
        self._of_operation[waiting.operation_id] = waiting.approval_id
        return self._early.pop((waiting.tenant, waiting.run_id, waiting.approval_id), None)

    def of_operation(self, operation_id: str) -> Waiting | None:
        approval = self._of_operation.get(operation_id)
        return None if approval is None else self._waiting.get(approval)

    def take(self, tenant: str, run_id: str, approval_id: str) -> Waiting | None:
        """The call a decision of ``tenant`` on run ``run_id`` for ``approval_id`` decides, no
        longer waiting; None when no call of that tenant and run waits for it."""
        waiting = self._waiting.get(approval_id)
        if waiting is None or waiting.tenant != tenant or waiting.run_id != run_id:
            return None
        self.withdraw(waiting.operation_id)
        self._note_answered(waiting)
        return waiting

    def answered(self, tenant: str, run_id: str, approval_id: str) -> Answered | None:
        """The decided approval of ``tenant``'s run ``run_id`` named ``approval_id``, if any."""
        return self._answered.get((tenant, run_id, approval_id))

    def _note_answered(self, waiting: Waiting) -> None:
        answered = _answered(waiting)
        if answered is None:
            return
        key = (waiting.tenant, waiting.run_id, waiting.approval_id)
        self._answered[key] = answered
        self._answered.move_to_end(key)
        while len(self._answered) > self.early_limit:
            self._answered.popitem(last=False)

    def withdraw(self, operation_id: str) -> Waiting | None:
        approval = self._of_operation.pop(operation_id, None)
        return None if approval is None else self._waiting.pop(approval, None)

    def keep_early(self, tenant: str, run_id: str, approval_id: str,
                   decision: EarlyDecision) -> None:
        key = (tenant, run_id, approval_id)
        self._early[key] = decision
        self._early.move_to_end(key)
        while len(self._early) > self.early_limit:
            self._early.popitem(last=False)

    def restore(self, receipt: ToolReceipt) -> bool:
        """Take in a receipt read back from ``receipts``: an awaiting one parks its call (True:
        it is no attempt); a final one ends its operation's wait."""
        if receipt.phase != AWAITING:
            if receipt.phase == "finished" and receipt.result is not None:  # the final one
                waiting = self.withdraw(receipt.operation_id)
                if waiting is not None:
                    self._note_answered(waiting)
            return False
        if receipt.approval_id and receipt.arguments_hash and receipt.held_call:
            self.park(Waiting(receipt.approval_id, receipt.tenant, receipt.run_id,
                              receipt.operation_id, receipt.arguments_hash, receipt.held_call))
        else:
            log.warning("awaiting receipt of %s without its approval or call: skipped",
                        receipt.operation_id)
        return True
