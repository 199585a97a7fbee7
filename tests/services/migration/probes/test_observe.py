"""observe.judge: each capability confirmed by its own sign among the run's events,
contradicted by the provider's "not supported" or a refusal, inconclusive otherwise — never
confirmed by a call that merely succeeded where the capability has a sign of its own."""

from __future__ import annotations

import pytest

from modelevents.services.migration.probes.observe import Outcome, judge


def outcome(*events: dict, **extra: object) -> Outcome:
    return Outcome("run-1", [{"seq": i, "model": "m-2025", **e} for i, e in enumerate(events)],
                   **extra)  # type: ignore[arg-type]


STARTED = {"kind": "run.started", "status": "in_progress"}
DONE = {"kind": "run.finished", "status": "completed", "reason": "end_turn"}
TEXT = {"kind": "text.done", "text": "ok"}


@pytest.mark.parametrize(("capability", "events", "evidence"), [
    ("tools", [STARTED, {"kind": "tool.call", "tool_name": "probe_echo"}], "tool.call"),
    ("parallel_tool_calls", [STARTED, {"kind": "tool.call"}, {"kind": "tool.call"}],
     "2 tool.call events in one turn"),
    ("structured_output", [STARTED, {"kind": "structured.done", "valid": True}, DONE],
     "structured.done valid"),
    ("structured_output", [STARTED, {"kind": "text.done", "text": '{"answer": "Paris"}'}, DONE],
     "text.done is a JSON object"),
    ("reasoning", [STARTED, {"kind": "reasoning.done"}, TEXT, DONE], "reasoning events"),
    ("background", [{**STARTED, "provider_object_id": "resp_1"}, DONE], "polled to completed"),
    ("prompt_caching", [STARTED, {"kind": "usage", "cache_read_tokens": 0}, DONE],
     "cache_read_tokens (0)"),
    ("citations", [STARTED, {"kind": "citation"}, DONE], "1 citation events"),
    ("hosted_tools.web_search", [STARTED, {"kind": "hosted.call", "tool_type": "web_search"}],
     "hosted.call of tool_type web_search"),
    ("input.image", [STARTED, TEXT, DONE], "the run finished completed"),
])
def test_a_capability_is_confirmed_by_its_own_sign(capability, events, evidence):
    observed = judge(capability, outcome(*events))
    assert observed.observed == "confirmed" and evidence in observed.evidence
    assert observed.run_id == "run-1" and observed.model_snapshot == "m-2025"
    assert observed.event_kinds == list(dict.fromkeys(e["kind"] for e in events))


@pytest.mark.parametrize("capability", [
    "tools", "parallel_tool_calls", "reasoning", "citations", "hosted_tools.web_search",
    "prompt_caching"])
def test_a_plain_answer_does_not_confirm_a_capability_with_a_sign(capability):
    events = [STARTED, {"kind": "tool.call"}, TEXT, DONE] if capability == "parallel_tool_calls" \
        else [STARTED, TEXT, {"kind": "usage"}, DONE]
    assert judge(capability, outcome(*events)).observed == "inconclusive"


def test_the_providers_not_supported_contradicts_with_its_message():
    error = {"kind": "error", "error_type": "invalid_request", "message": "no images here",
             "http_status": 400}
    observed = judge("input.image", outcome(STARTED, error, {**DONE, "status": "failed"}))
    assert (observed.observed, observed.error, observed.http_status) == (
        "contradicted", "no images here", 400)
    assert observed.evidence == "error event (invalid_request, HTTP 400)"


@pytest.mark.parametrize(("error_type", "status"), [
    ("rate_limited", 429), ("authentication", 401), ("server_error", 500),
    ("provider_error", 503)])
def test_errors_that_say_nothing_of_the_capability_are_inconclusive(error_type, status):
    error = {"kind": "error", "error_type": error_type, "message": "x", "http_status": status}
    assert judge("tools", outcome(STARTED, error)).observed == "inconclusive"


def test_a_refusal_contradicts_and_an_invalid_structured_answer_too():
    refusal = judge("input.image", outcome(STARTED, {"kind": "refusal", "text": "I can't"}))
    assert (refusal.observed, refusal.error) == ("contradicted", "I can't")
    invalid = judge("structured_output", outcome(
        STARTED, {"kind": "structured.done", "valid": False, "error": "answer missing"}, DONE))
    assert (invalid.observed, invalid.error) == ("contradicted", "answer missing")


def test_a_gateway_refusal_or_an_unsettled_run_is_inconclusive():
    refused = judge("tools", Outcome("run-1", refused_status=422,
                                     refused_detail="egress_rejected: not allowed"))
    assert (refused.observed, refused.http_status) == ("inconclusive", 422)
    assert "nothing reached the provider" in refused.evidence
    late = judge("tools", outcome(STARTED, unsettled="the run did not settle within 60 s"))
    assert (late.observed, late.evidence) == ("inconclusive", "the run did not settle within 60 s")
