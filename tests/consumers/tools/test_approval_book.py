"""The approval book (consumers/tools/approval_book.py): a decision finds its call only with the
call's tenant, run and approval id; decisions without a call are kept per (tenant, run, approval)
and bounded; a restarted executor finds waiting calls from their receipts."""

from __future__ import annotations

from modelevents.consumers.tools.approval_book import (
    AWAITING,
    ApprovalBook,
    EarlyDecision,
    Waiting,
    held_call,
)
from modelevents.consumers.tools.receipts import ToolReceipt, decode_receipt, encode_receipt
from modelevents.schemas.events import Envelope, EventSource, ModelEvent, ToolCall
from modelevents.services.run_logic.executor_events import (
    arguments_hash,
    hash_of_approval,
    new_approval_id,
)

HASHED = arguments_hash({"notebook": "team", "text": "hi"})


def call_event(run_id: str = "run_a", tenant: str = "acme") -> ModelEvent:
    return ModelEvent(event_id="e1", run_id=run_id, tenant=tenant, provider="openai",
                      api="openai-responses", model="m", kind="tool.call",
                      source=EventSource(frame_id="f", index=0, transport="sse"),
                      received_at=1, adapter="test/1",
                      envelope=Envelope(content_type="application/json", body=b"{}"),
                      payload=ToolCall(0, "add_note", "c1", '{"text":"hi","notebook":"team"}'),
                      seq=3)


def waiting(approval: str, tenant: str = "acme", run_id: str = "run_a") -> Waiting:
    return Waiting(approval, tenant, run_id, "op_1", HASHED, call_event(run_id, tenant))


def test_approval_ids_are_fresh_and_name_the_arguments_hash():
    first, second = new_approval_id(HASHED), new_approval_id(HASHED)
    assert first != second and hash_of_approval(first) == HASHED
    assert arguments_hash({"text": "hi", "notebook": "team"}) == HASHED  # key order is moot
    assert hash_of_approval("apr_0123456789abcdef01234567") is None


def test_a_decision_of_another_tenant_or_run_finds_no_call():
    book = ApprovalBook()
    approval = new_approval_id(HASHED)
    book.park(waiting(approval))
    assert book.take("other", "run_a", approval) is None
    assert book.take("acme", "run_b", approval) is None
    assert book.take("acme", "run_a", "apr_guess") is None
    assert book.take("acme", "run_a", approval) is not None
    assert book.take("acme", "run_a", approval) is None and len(book) == 0


def test_early_decisions_are_kept_per_tenant_run_and_approval_and_bounded():
    book = ApprovalBook(early_limit=3)
    for n in range(5):
        book.keep_early("acme", "run_a", f"apr_{n}", EarlyDecision(True, None))
    assert book.early_count == 3  # the two oldest dropped
    book.keep_early("other", "run_a", "apr_x", EarlyDecision(True, None))
    assert book.park(waiting("apr_x")) is None  # kept for another tenant: not this call's
    assert book.park(waiting("apr_4", run_id="run_a")) == EarlyDecision(True, None)
    assert book.park(waiting("apr_0")) is None  # dropped by the bound


def test_a_restarted_executor_finds_the_waiting_call_in_its_receipt_until_it_is_final():
    approval = new_approval_id(HASHED)
    held, encoded = held_call(call_event(), '{"notebook":"team","text":"hi"}')
    receipt = ToolReceipt("op_1", "k", "run_a", "acme", "add_note", "c1", "1", 0, AWAITING, 1,
                          approval_id=approval, arguments_hash=HASHED, held_call=encoded)
    book = ApprovalBook()
    assert book.restore(decode_receipt(encode_receipt(receipt)))
    found = book.of_operation("op_1")
    assert found is not None and found.event() == held
    assert found.event().payload.arguments == '{"notebook":"team","text":"hi"}'  # type: ignore
    started = ToolReceipt("op_1", "k", "run_a", "acme", "add_note", "c1", "1", 1, "started", 2)
    assert not book.restore(started) and book.of_operation("op_1") is not None
    final = ToolReceipt("op_1", "k", "run_a", "acme", "add_note", "c1", "1", 1, "finished", 2,
                        outcome="succeeded", result="{}")
    assert not book.restore(final) and book.of_operation("op_1") is None
