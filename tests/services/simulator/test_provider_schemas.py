"""services/simulator/provider_schemas.py: request bodies checked against the official SDKs' types."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson
import pytest
import yaml

from modelevents.services.errors import MissingSDKError
from modelevents.services.simulator import provider_schemas
from modelevents.services.simulator.provider_schemas import APIS, validate_request
from tests.corpus import CORPUS_DIR, corpus_files, corpus_id, require_corpus

VALID = {
    "openai-responses": [
        {"model": "gpt-4o", "input": "hi", "stream": True},
        {"model": "gpt-4o", "input": [{"role": "user", "content": [
            {"type": "input_text", "text": "hi"}]}], "background": True},
        {"model": "gpt-4o", "previous_response_id": "resp_1", "input": [
            {"type": "function_call_output", "call_id": "call_1", "output": "42"}],
         "tools": [{"type": "function", "name": "f", "parameters": {}, "strict": True}]},
    ],
    "openai-chat": [
        {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True,
         "stream_options": {"include_usage": True}},
        {"model": "gpt-4o", "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"}]},
    ],
    "anthropic-messages": [
        {"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
         "messages": [{"role": "user", "content": "hi"}]},
        {"model": "claude-sonnet-4-5", "max_tokens": 64, "temperature": 0.2, "system": "brief",
         "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                      {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                                                         "name": "f", "input": {}}]},
                      {"role": "user", "content": [{"type": "tool_result",
                                                    "tool_use_id": "toolu_1", "content": "42"}]}]},
    ],
    "gemini-interactions": [
        {"model": "gemini-2.5-flash", "input": "hi", "stream": True},
        {"model": "gemini-2.5-flash", "input": [{"type": "user_input", "content": [
            {"type": "text", "text": "hi"}]}], "background": True, "store": True},
        {"agent": "deep-research-pro-preview-12-2025", "input": "hi", "background": True},
    ],
    "gemini-generate": [
        {"contents": [{"role": "user", "parts": [{"text": "hi"}]}],
         "systemInstruction": {"parts": [{"text": "be brief"}]},
         "generationConfig": {"maxOutputTokens": 10, "thinkingConfig": {"includeThoughts": True}}},
        {"contents": [{"role": "user", "parts": [
            {"inlineData": {"mimeType": "image/png", "data": "aGk="}},
            {"functionResponse": {"name": "f", "response": {"output": 42}}}]}],
         "tools": [{"functionDeclarations": [{"name": "f", "parameters": {"type": "OBJECT"}}]}]},
    ],
}

# (api, body, the location that must be named among the problems)
INVALID = [
    ("openai-responses", {"model": "gpt-4o", "inputs": "hi"}, "inputs"),
    ("openai-responses", {"model": "gpt-4o", "input": [{"role": "user", "content": [
        {"type": "input_txt", "text": "hi"}]}]}, "input.0.content.0.type"),
    ("openai-responses", {"model": "gpt-4o", "input": [{"role": "user", "content": [
        {"type": "input_text", "txt": "hi"}]}]}, "input.0.content.0.txt"),
    ("openai-chat", {"model": "gpt-4o", "messages": [{"role": "user", "content": [
        {"type": "text", "txt": "hi"}]}]}, "messages.0.content.0.txt"),
    ("openai-chat", {"model": "gpt-4o"}, "messages"),
    ("anthropic-messages", {"model": "claude", "max_tokens": "ten", "messages": []}, "max_tokens"),
    ("anthropic-messages", {"model": "claude", "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "text", "text": 1}]}]}, "messages.0.content.0.text"),
    ("anthropic-messages", {"model": "claude", "max_tokens": 5, "stream": True, "messages": [],
                   "max_token": 1}, "max_token"),
    ("gemini-interactions", {"model": "gemini-2.5-flash", "inpt": "hi"}, "inpt"),
    ("gemini-interactions", {"model": "gemini-2.5-flash", "input": [{"type": "user_input",
     "content": [{"type": "text", "txt": "hi"}]}]}, "input.0.content.0.txt"),
    ("gemini-generate", {"contents": [{"role": "user", "parts": [{"txt": "hi"}]}]},
     "contents.0.parts.0.txt"),
    ("gemini-generate", {"contents": [], "generation_config": {}}, "generation_config"),
]


@pytest.mark.parametrize("api,body", [(api, b) for api, bodies in VALID.items() for b in bodies],
                         ids=lambda x: x if isinstance(x, str) else "")
def test_valid_requests_have_no_problems(api, body):
    assert validate_request(api, body) == []


@pytest.mark.parametrize("api,body,location", INVALID, ids=[f"{a}-{loc}" for a, _, loc in INVALID])
def test_wrong_field_or_part_type_is_named(api, body, location):
    problems = validate_request(api, body)
    assert problems, "an invalid request passed"
    assert any(p.startswith(location + ":") for p in problems), problems
    # Union members are folded: a misspelt key does not drag in thirty lines about other parts.
    assert len(problems) <= 4, problems


def test_non_object_body_is_a_problem_not_an_exception():
    assert validate_request("anthropic-messages", [1]) == ["request body must be a JSON object, got list"]


def test_unknown_api_is_an_error():
    with pytest.raises(ValueError, match="openai-responses"):
        validate_request("openai-completions", {})


def test_missing_sdk_names_the_extra(monkeypatch):
    provider_schemas._validator.cache_clear()
    monkeypatch.setitem(sys.modules, "anthropic.types.message_create_params", None)
    monkeypatch.setitem(sys.modules, "anthropic.types", None)
    try:
        with pytest.raises(MissingSDKError, match=r"modelevents\[simulator\]"):
            validate_request("anthropic-messages", {"model": "m", "max_tokens": 1, "messages": []})
    finally:
        provider_schemas._validator.cache_clear()


def test_require_sdks_names_what_is_missing(monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "anthropic" else real(name, *a))
    with pytest.raises(MissingSDKError, match=r"missing: anthropic\. Install them with: pip "
                                              r"install 'modelevents\[simulator\]'"):
        provider_schemas.require_sdks()
    monkeypatch.undo()
    provider_schemas.require_sdks()


def _recorded_requests() -> list[tuple[str, Path, int, dict]]:
    """Every provider request body recorded in the corpus cassettes, with its API."""
    found = []
    for path in corpus_files(""):
        if path.suffix != ".yaml":
            continue
        for index, exchange in enumerate(yaml.safe_load(path.read_text()).get("interactions", [])):
            request = exchange["request"]
            uri = request["uri"].split("?")[0]
            api = ("openai-responses" if uri.endswith("/responses") else
                   "openai-chat" if uri.endswith("/chat/completions") else
                   "anthropic-messages" if uri.endswith("/v1/messages") else
                   "gemini-generate" if uri.endswith(("GenerateContent", ":generateContent"))
                   else None)
            if api is None or request["method"] != "POST":
                continue
            body = request.get("parsed_body")
            if body is None:
                raw = request.get("body")
                body = orjson.loads(raw["string"] if isinstance(raw, dict) else raw)
            found.append((api, path, index, body))
    return found


_RECORDED = _recorded_requests()


@pytest.mark.corpus
@pytest.mark.parametrize("api,path,index,body", _RECORDED or [pytest.param(
    None, None, None, None, id="corpus-absent")],
    ids=[f"{corpus_id(p)}#{i}" for _, p, i, _ in _RECORDED] or None)
def test_every_recorded_real_request_is_valid(api, path, index, body):
    """Requests real clients sent and providers answered must not be rejected."""
    require_corpus()
    assert validate_request(api, body) == []


@pytest.mark.corpus
def test_corpus_has_requests_of_every_api_with_cassettes():
    require_corpus()
    assert {api for api, *_ in _RECORDED} >= set(APIS) - {"gemini-interactions"}
    assert CORPUS_DIR.is_dir()
