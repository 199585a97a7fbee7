"""Each provider API's facts (adapters/api_facts.py), declared beside its adapter: what the
gateway and the simulator rely on when they talk to that API."""

from __future__ import annotations

import orjson
import pytest

from modelevents.adapters.errors import UnknownApi
from modelevents.adapters.registry import ADAPTERS, API_FACTS, api_facts, webhook_api
from modelevents.adapters.requests import RENDERERS
from modelevents.adapters.requests.anthropic_messages import ANTHROPIC_VERSION
from modelevents.schemas.errors import DetectionError

APIS = ("openai-responses", "openai-chat", "anthropic-messages", "gemini-generate",
        "gemini-interactions")


def test_every_registered_api_has_facts_of_its_own_name_and_provider():
    assert set(API_FACTS) == set(ADAPTERS) == set(RENDERERS) == set(APIS)
    for api, facts in API_FACTS.items():
        assert facts.api == api
        assert facts.provider == ADAPTERS[api].default_provider == RENDERERS[api].PROVIDER


def test_an_unknown_api_is_refused_naming_the_known_ones():
    with pytest.raises(UnknownApi) as refused:
        api_facts("openai-assistants")
    assert isinstance(refused.value, DetectionError)
    message = str(refused.value)
    assert "'openai-assistants'" in message
    for api in APIS:
        assert api in message


# --- follow-ups: what the gateway may do after the create call -----------------------------


def test_a_background_response_is_read_back_cancelled_and_resumed_after_its_sequence_number():
    follow_up = api_facts("openai-responses").follow_up
    assert follow_up.get.format(id="resp_1") == "/v1/responses/resp_1"
    assert follow_up.cancel.format(id="resp_1") == "/v1/responses/resp_1/cancel"
    assert follow_up.resume_param == "starting_after"
    assert follow_up.resume_background_only


def test_an_interaction_is_read_back_cancelled_and_resumed_after_its_last_event_id():
    follow_up = api_facts("gemini-interactions").follow_up
    assert follow_up.get.format(id="int_1") == "/v1beta/interactions/int_1"
    assert follow_up.cancel.format(id="int_1") == "/v1beta/interactions/int_1/cancel"
    assert follow_up.resume_param == "last_event_id"
    assert not follow_up.resume_background_only


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages", "gemini-generate"])
def test_stream_only_apis_offer_nothing_after_the_create_call(api):
    facts = api_facts(api)
    assert (facts.follow_up.get, facts.follow_up.cancel, facts.follow_up.resume_param) == (
        None, None, None)
    assert facts.terminal_statuses == frozenset()  # nothing to poll
    assert facts.webhooks is None


# --- terminal statuses: where the gateway's polling stops ----------------------------------


def test_polling_a_response_stops_at_its_terminal_statuses_only():
    terminal = api_facts("openai-responses").terminal_statuses
    assert terminal == {"completed", "incomplete", "failed", "cancelled"}
    assert not terminal & {"queued", "in_progress"}


def test_polling_an_interaction_stops_when_it_ended_or_waits_for_tool_results():
    terminal = api_facts("gemini-interactions").terminal_statuses
    assert {"completed", "failed", "cancelled", "incomplete", "budget_exceeded",
            "requires_action"} <= terminal
    assert not terminal & {"queued", "in_progress", "idle"}


# --- cursors: where a cut stream resumes ---------------------------------------------------


def _body(doc: dict) -> bytes:
    return orjson.dumps(doc)


def test_a_responses_stream_resumes_after_the_body_sequence_number_not_the_sse_id():
    cursor = api_facts("openai-responses").stream_cursor
    assert cursor(None, _body({"type": "response.output_text.delta", "sequence_number": 7})) == "7"
    assert cursor("ignored", _body({"sequence_number": 0})) == "0"
    assert cursor("ignored", _body({"type": "response.created"})) is None
    assert cursor(None, b"[DONE]") is None


def test_an_interactions_stream_resumes_after_the_sse_id_else_the_event_id():
    cursor = api_facts("gemini-interactions").stream_cursor
    assert cursor("ev-9", _body({"event_id": "ev-8"})) == "ev-9"
    assert cursor(None, _body({"event_id": "ev-8"})) == "ev-8"
    assert cursor(None, _body({"event_id": ""})) is None
    assert cursor(None, b"not json") is None


@pytest.mark.parametrize("api", ["openai-chat", "anthropic-messages", "gemini-generate"])
def test_other_streams_take_the_sse_id_as_their_cursor(api):
    cursor = api_facts(api).stream_cursor
    assert cursor("42", _body({"sequence_number": 1, "event_id": "x"})) == "42"
    assert cursor(None, _body({"sequence_number": 1})) is None


# --- credentials ---------------------------------------------------------------------------


def test_each_api_takes_its_key_in_its_providers_header():
    key = "sk-test"
    assert api_facts("openai-responses").auth_headers(key) == {"authorization": "Bearer sk-test"}
    assert api_facts("openai-chat").auth_headers(key) == {"authorization": "Bearer sk-test"}
    assert api_facts("anthropic-messages").auth_headers(key) == {
        "x-api-key": "sk-test", "anthropic-version": ANTHROPIC_VERSION}
    for api in ("gemini-generate", "gemini-interactions"):
        assert api_facts(api).auth_headers(key) == {"x-goog-api-key": "sk-test"}


def test_the_config_names_of_the_providers():
    assert {api: facts.config_provider for api, facts in API_FACTS.items()} == {
        "openai-responses": "openai", "openai-chat": "openai",
        "anthropic-messages": "anthropic",
        "gemini-generate": "gemini", "gemini-interactions": "gemini"}


# --- webhooks ------------------------------------------------------------------------------


def test_openai_webhooks_are_about_responses_and_gemini_webhooks_about_interactions():
    assert webhook_api("openai") is api_facts("openai-responses")
    assert webhook_api("gemini") is api_facts("gemini-interactions")
    assert webhook_api("anthropic") is None
    assert api_facts("openai-responses").webhooks.fetch_prefix == "response."
    assert api_facts("gemini-interactions").webhooks.fetch_prefix == "interaction."


def test_a_response_webhook_names_its_object_in_data_id():
    object_id = api_facts("openai-responses").webhooks.object_id
    assert object_id({"id": "resp_1"}) == "resp_1"
    assert object_id({"interaction": {"id": "int_1"}}) is None


@pytest.mark.parametrize("data", [{"id": "int_1"}, {"interaction": {"id": "int_1"}},
                                  {"interaction_id": "int_1"}, {"id": 5, "interaction_id": "int_1"}])
def test_an_interaction_webhook_names_its_object_in_any_of_its_shapes(data):
    assert api_facts("gemini-interactions").webhooks.object_id(data) == "int_1"


# --- SSE framing (what the simulator replays) ----------------------------------------------


def test_each_api_frames_its_sse_events_as_the_provider_does():
    framing = {api: (facts.sse_event_field, facts.sse_line_end)
               for api, facts in API_FACTS.items()}
    assert framing == {"openai-responses": ("type", b"\n"), "openai-chat": (None, b"\n"),
                       "anthropic-messages": ("type", b"\n"),
                       "gemini-generate": (None, b"\r\n"),
                       "gemini-interactions": ("event_type", b"\n")}
    assert api_facts("openai-responses").stream_object_key == "response"
    assert api_facts("gemini-interactions").stream_object_key == "interaction"
