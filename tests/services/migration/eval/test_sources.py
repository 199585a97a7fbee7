"""Evidence gathered from Kafka values (services/migration/eval/sources.py) and the live eval's
request and settling rule (live.py): each value told apart by its header, pieces joined, the
latest state kept, what cannot be read counted, never raised."""

from __future__ import annotations

from dataclasses import replace

from modelevents.consumers.tools.receipts import decode_receipt, encode_receipt, is_receipt
from modelevents.schemas import codec
from modelevents.schemas.pieces import split_event
from modelevents.schemas.run_input import encode as encode_run_input
from modelevents.schemas.run_input_pieces import packet_records
from modelevents.schemas.run_state import RunState
from modelevents.services.migration.eval.corpus import load_corpus
from modelevents.services.migration.eval.evidence import digest
from modelevents.services.migration.eval.live import LivePlan, request_for, settled
from modelevents.services.migration.eval.sources import EvidenceBook
from modelevents.services.run_logic.run_machine import run_state_of
from tests.services.migration.eval.runs import bundle, receipt, run_of

CORPUS = load_corpus("example")
CHAT = bundle("chat", "openai", "openai-chat", "gpt-4o-mini")


def _receipt(value: bytes):
    return decode_receipt(value) if is_receipt(value) else None


def test_every_kind_of_value_lands_in_its_run():
    run = run_of("one-tool", "openai-chat/tool-call", CHAT)
    call_id = digest(run).tool_calls[0][1]
    done = receipt(run.run_id, call_id, "get_weather", "succeeded")
    state = run_state_of(run.events)
    values = [encode_run_input(run.inputs[0]), *map(codec.encode, run.events),
              codec.encode(replace(state, last_seq=state.last_seq - 1)), codec.encode(state),
              encode_receipt(done), b"not a record", None]
    book = EvidenceBook(_receipt).feed_all(values)
    (gathered,) = book.runs()
    assert [e.seq for e in gathered.events] == [e.seq for e in run.events]
    assert gathered.inputs == run.inputs and gathered.receipts == [done]
    assert gathered.state == state  # the latest state, not the one before it
    assert book.unreadable == 1


def test_events_and_packets_cut_into_pieces_are_joined():
    run = run_of("long-context", "openai-chat/text", CHAT)
    packet = replace(run.inputs[0], request=run.inputs[0].request + " " * 2_000_000)
    text_done = next(e for e in run.events if e.kind == "text.done")
    big = replace(text_done, payload=replace(text_done.payload, text="Paris " * 300_000))
    pieces = split_event(big)
    assert len(pieces) > 1
    values = [v for _, v in packet_records(packet)]
    assert len(values) > 1
    values += [codec.encode(e) for e in run.events if e is not text_done]
    values += [codec.encode(p) for p in pieces]
    (gathered,) = EvidenceBook(_receipt).feed_all(values).runs()
    assert gathered.inputs == [packet]
    assert any(e.kind == "text.done" and len(e.payload.text) == len(big.payload.text)
               for e in gathered.events)


def test_only_the_wanted_runs_are_kept():
    a = run_of("refusal", "openai-chat/refusal", CHAT, nonce="a")
    b = run_of("refusal", "openai-chat/refusal", CHAT, nonce="b")
    book = EvidenceBook(_receipt, wanted={a.run_id}.__contains__)
    book.feed_all(codec.encode(e) for e in [*a.events, *b.events])
    assert [r.run_id for r in book.runs()] == [a.run_id]


def test_a_live_request_is_the_bundle_rendering_of_the_task_with_the_bundles_model():
    task = CORPUS.task("schema-extraction")
    body = request_for(CHAT, task, "eval.schema-extraction.0.x", LivePlan(
        CORPUS, [CHAT], tenant="acme", on_simulator=True))
    assert body["bundle"] == CHAT.bundle_id and body["run_id"] == "eval.schema-extraction.0.x"
    assert body["instructions"] == CHAT.instruction.text and body["tenant"] == "acme"
    # On the simulator too: the bundle's own target (the simulator knows the task by its
    # conversation, services/simulator/eval_tasks.py).
    assert body["target"] == {"provider": "openai", "api": "openai-chat",
                              "model": "gpt-4o-mini"}
    # The task's schema, since the bundle sets none.
    assert body["structured_output"]["name"] == "city"
    assert request_for(CHAT, task, "eval.schema-extraction.0.x", LivePlan(
        CORPUS, [CHAT], tenant="acme")) == body


def test_a_run_is_settled_when_it_ended_or_waits_on_nothing_the_executor_owes():
    state = RunState(run_id="r", tenant="t")
    assert not settled(replace(state, status="in_progress"))
    assert not settled(replace(state, status="waiting_for_tool", open_tool_calls=["c1"]))
    assert settled(replace(state, status="waiting_for_tool"))
    assert settled(replace(state, status="waiting_for_approval"))
    assert settled(replace(state, status="incomplete"))
