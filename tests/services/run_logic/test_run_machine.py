"""The run state machine over hand-built event sequences."""

from __future__ import annotations

import orjson
import pytest

from modelevents.schemas import events as ev
from modelevents.services.run_logic.executor_events import tool_result_event
from modelevents.services.run_logic.run_machine import Outcome, RunMachine, run_state_of
from tests.schemas.sample_records import model_event


def event(kind: str, payload, seq: int = -1) -> ev.ModelEvent:
    e = model_event(kind, seq=seq)
    e.payload = payload
    return e


def started(status="in_progress", oid="resp_1", seq=-1):
    return event("run.started", ev.RunStarted(status=status, provider_object_id=oid), seq)


def finished(status="completed", reason="end_turn", seq=-1):
    return event("run.finished", ev.RunFinished(status=status, reason=reason, raw_reason=reason), seq)


def awaiting(reason="tool_results", seq=-1):
    return event("run.awaiting", ev.RunAwaiting(reason=reason), seq)


def tool_call(call_id="call_1", seq=-1):
    return event("tool.call", ev.ToolCall(0, "f", call_id, "{}", arguments_valid=True), seq)


def tool_result(call_id="call_1", seq=-1):
    return event("tool.result", ev.ToolResult("f", call_id, "ok"), seq)


def usage(i, o, seq=-1):
    return event("usage", ev.Usage(input_tokens=i, output_tokens=o, total_tokens=i + o), seq)


def test_plain_run_completes():
    st = run_state_of([started(), usage(3, 4), finished()])
    assert (st.status, st.reason, st.needs_reconciliation) == ("completed", "end_turn", False)
    assert st.provider_object_ids == ["resp_1"]
    assert st.usage.total_tokens == 7


def test_background_run_goes_through_queued():
    m = RunMachine.new("r")
    m.apply(started(status="queued"))
    assert m.state.status == "queued"
    m.apply(event("run.status", ev.RunStatus(status="in_progress")))
    assert m.state.status == "in_progress"


def test_tool_loop_spans_provider_calls_and_sums_usage():
    st = run_state_of([
        started(oid="resp_1"), tool_call(), usage(10, 5), awaiting(),
        tool_result(),
        started(oid="resp_2"), usage(20, 7), finished(),
    ])
    assert st.status == "completed"
    assert st.open_tool_calls == []
    assert st.provider_object_ids == ["resp_1", "resp_2"]
    assert (st.usage.input_tokens, st.usage.output_tokens) == (30, 12)


def test_awaiting_tool_results_is_not_finished():
    st = run_state_of([started(), tool_call(), awaiting()])
    assert (st.status, st.reason, st.open_tool_calls) == ("waiting_for_tool", "tool_results", ["call_1"])
    assert not st.terminal


def test_a_tool_result_of_unknown_outcome_leaves_the_run_waiting_and_flagged():
    def executor_result(call_id: str, outcome: str) -> ev.ModelEvent:
        return tool_result_event(tool_call(call_id), "f", call_id, "may have happened", True,
                                 orjson.dumps({"outcome": outcome}), "application/json", 0)
    st = run_state_of([started(), tool_call("a"), tool_call("b"), awaiting(),
                       executor_result("a", "failed"), executor_result("b", "unknown")])
    assert (st.status, st.open_tool_calls, st.needs_reconciliation) == (
        "waiting_for_tool", [], True)
    assert st.reconciliation_notes == ["tool call b: its outcome is unknown (it may have acted "
                                       "and was not retried); reconcile it before the run goes on"]


def test_pause_turn_waits_for_continuation():
    st = run_state_of([started(), awaiting("continuation")])
    assert (st.status, st.reason) == ("waiting_for_tool", "continuation")


def test_approval_waits_then_resolves():
    st = run_state_of([
        started(), event("approval.requested", ev.Approval("apr_1")), awaiting("approval")])
    assert (st.status, st.pending_approvals) == ("waiting_for_approval", ["apr_1"])
    st2 = run_state_of([started(), event("approval.requested", ev.Approval("apr_1")),
                        awaiting("approval"), event("approval.resolved", ev.Approval("apr_1", decision="approved")),
                        started(oid="resp_2"), finished()])
    assert (st2.status, st2.pending_approvals) == ("completed", [])


def test_transition_after_terminal_is_flagged_not_raised():
    m = RunMachine.new("r")
    for e in (started(), finished()):
        assert m.apply(e) is Outcome.APPLIED
    assert m.apply(started(oid="resp_9")) is Outcome.ILLEGAL
    assert m.state.status == "completed"
    assert m.state.needs_reconciliation
    assert "after the run ended completed" in m.state.reconciliation_notes[0]


def test_same_terminal_twice_is_idempotent():
    m = RunMachine.new("r")
    m.apply(started())
    m.apply(finished())
    assert m.apply(finished()) is Outcome.APPLIED
    assert not m.state.needs_reconciliation


def test_conflicting_terminal_is_flagged():
    m = RunMachine.new("r")
    m.apply(started())
    m.apply(finished())
    assert m.apply(finished(status="failed", reason="error")) is Outcome.ILLEGAL
    assert m.state.status == "completed" and m.state.needs_reconciliation


def test_truncated_stream_flags_the_live_run():
    st = run_state_of([started(), event("error", ev.Error("stream_truncated", "cut", retryable=True))])
    assert st.status == "in_progress"
    assert st.needs_reconciliation
    assert st.last_error.startswith("stream_truncated")


def test_missing_provider_frames_flag_the_run():
    st = run_state_of([started(), event("error", ev.Error("sequence_gap", "sequence_number 6..40 never arrived")),
                       finished()])
    assert st.status == "completed" and st.needs_reconciliation
    assert "6..40" in st.reconciliation_notes[0]


def test_unknown_event_fails_safe():
    st = run_state_of([started(), tool_call(), event("unknown", ev.Unknown("response.new_thing")), awaiting()])
    assert st.needs_reconciliation
    assert "response.new_thing" in st.reconciliation_notes[0]


def test_result_for_unproposed_call_is_illegal():
    m = RunMachine.new("r")
    m.apply(started())
    assert m.apply(tool_result("call_x")) is Outcome.ILLEGAL
    assert m.state.needs_reconciliation


def test_sequenced_events_dedupe_and_flag_gaps():
    m = RunMachine.new("r")
    assert m.apply(started(seq=0)) is Outcome.APPLIED
    assert m.apply(started(seq=0)) is Outcome.DUPLICATE
    assert m.state.event_count == 1
    m.apply(finished(seq=2))
    assert m.state.last_seq == 2
    assert m.state.needs_reconciliation and "seq gap" in m.state.reconciliation_notes[0]


@pytest.mark.parametrize("status", ["completed", "incomplete", "failed", "cancelled"])
def test_every_terminal_status(status):
    st = run_state_of([started(), finished(status=status, reason="x")])
    assert st.status == status and st.terminal and st.finished_at is not None
