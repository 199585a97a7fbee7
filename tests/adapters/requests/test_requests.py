"""Request renderers (adapters/requests/*): golden wire bodies for one neutral transcript.

The transcript holds every part kind — text, an image, a file, reasoning from three origins, a
signed tool call, its result — and each API's golden body below is the reviewed truth. Beside
the goldens, the facts a user relies on are asserted explicitly (foreign signatures dropped,
own ones kept), and every body is checked against the official SDK's request type
(services/simulator/provider_schemas.py).
"""

from __future__ import annotations

import base64
import copy

import pytest

from modelevents.adapters.errors import RenderError
from modelevents.adapters.requests import RENDERERS, build
from modelevents.adapters.requests.gemini_generate import SKIP_SIGNATURE_CHECK
from modelevents.schemas.transcript import NeutralRequest

PDF = base64.b64encode(b"%PDF-1.4 weather report").decode()
# Gemini signatures are bytes, base64 on the wire.
GEMINI_THOUGHT_SIG = base64.b64encode(b"gemini-thought").decode()
GEMINI_CALL_SIG = base64.b64encode(b"gemini-call").decode()

# The validator's API names (provider_schemas.APIS) for the renderers' ModelEvent API names.

ORIGIN_OPENAI = {"provider": "openai", "api": "openai-responses", "model": "gpt-5-2025-08-07"}
ORIGIN_CLAUDE = {"provider": "anthropic", "api": "anthropic-messages",
                 "model": "claude-sonnet-4-5"}
ORIGIN_GEMINI = {"provider": "google", "api": "gemini-generate", "model": "gemini-3-pro-preview"}


def request_body(**changes) -> dict:
    body = {
        "instructions": "Answer briefly.",
        "transcript": [
            {"role": "system", "parts": [{"type": "text", "text": "You are a weather bot."}]},
            {"role": "user", "parts": [
                {"type": "text", "text": "What is the weather in this picture and report?"},
                {"type": "image", "url": "https://example.org/sky.png", "media_type": "image/png"},
                {"type": "file", "data": PDF, "media_type": "application/pdf",
                 "filename": "report.pdf"}]},
            {"role": "assistant", "parts": [
                {"type": "reasoning", "summary": ["Need the weather tool."], "item_id": "rs_1",
                 "encrypted_content": "enc-openai", "origin": ORIGIN_OPENAI},
                {"type": "reasoning", "text": "I should call get_weather.",
                 "signature": "sig-claude", "item_id": "msg_1", "origin": ORIGIN_CLAUDE},
                {"type": "reasoning", "summary": ["Planning the call."],
                 "signature": GEMINI_THOUGHT_SIG, "origin": ORIGIN_GEMINI},
                {"type": "text", "text": "Checking."},
                {"type": "tool_call", "tool_name": "get_weather", "tool_call_id": "call_1",
                 "arguments": {"city": "Paris"},
                 "signature": {"value": GEMINI_CALL_SIG, "origin": ORIGIN_GEMINI}}]},
            {"role": "tool", "parts": [
                {"type": "tool_result", "tool_name": "get_weather", "tool_call_id": "call_1",
                 "output": "14 C, cloudy"}]},
            {"role": "user", "parts": [{"type": "text", "text": "Thanks!"}]},
        ],
        "tools": [{"name": "get_weather", "description": "Current weather for a city.",
                   "parameters": {"type": "object",
                                  "properties": {"city": {"type": "string"}},
                                  "required": ["city"]}}],
        "target": {"provider": "openai", "model": "gpt-5"},
        "max_output_tokens": 256,
        "temperature": 0.2,
    }
    body.update(changes)
    return body


def neutral(**changes) -> NeutralRequest:
    return NeutralRequest.model_validate(request_body(**changes))


# Target model per API for the goldens.
MODELS = {"openai-responses": "gpt-5", "openai-chat": "gpt-4.1",
          "anthropic-messages": "claude-sonnet-4-5", "gemini-generate": "gemini-3-pro-preview",
          "gemini-interactions": "gemini-3-pro-preview"}


GOLDEN_OPENAI_RESPONSES = {'model': 'gpt-5',
 'input': [{'type': 'message',
            'role': 'user',
            'content': [{'type': 'input_text',
                         'text': 'What is the weather in this picture and report?'},
                        {'type': 'input_image',
                         'image_url': 'https://example.org/sky.png',
                         'detail': 'auto'},
                        {'type': 'input_file',
                         'file_data': 'data:application/pdf;base64,JVBERi0xLjQgd2VhdGhlciByZXBvcnQ=',
                         'filename': 'report.pdf'}]},
           {'type': 'reasoning',
            'id': 'rs_1',
            'summary': [{'type': 'summary_text', 'text': 'Need the weather tool.'}],
            'encrypted_content': 'enc-openai'},
           {'type': 'message', 'role': 'assistant', 'content': 'Checking.'},
           {'type': 'function_call',
            'call_id': 'call_1',
            'name': 'get_weather',
            'arguments': '{"city":"Paris"}'},
           {'type': 'function_call_output', 'call_id': 'call_1', 'output': '14 C, cloudy'},
           {'type': 'message',
            'role': 'user',
            'content': [{'type': 'input_text', 'text': 'Thanks!'}]}],
 'instructions': 'Answer briefly.\n\nYou are a weather bot.',
 'tools': [{'type': 'function',
            'name': 'get_weather',
            'description': 'Current weather for a city.',
            'parameters': {'type': 'object',
                           'properties': {'city': {'type': 'string'}},
                           'required': ['city']},
            'strict': False}],
 'max_output_tokens': 256,
 'temperature': 0.2,
 'stream': True}


GOLDEN_OPENAI_CHAT = {'model': 'gpt-4.1',
 'messages': [{'role': 'system', 'content': 'Answer briefly.\n\nYou are a weather bot.'},
              {'role': 'user',
               'content': [{'type': 'text',
                            'text': 'What is the weather in this picture and report?'},
                           {'type': 'image_url',
                            'image_url': {'url': 'https://example.org/sky.png'}},
                           {'type': 'file',
                            'file': {'file_data': 'data:application/pdf;base64,JVBERi0xLjQgd2VhdGhlciByZXBvcnQ=',
                                     'filename': 'report.pdf'}}]},
              {'role': 'assistant',
               'content': 'Checking.',
               'tool_calls': [{'id': 'call_1',
                               'type': 'function',
                               'function': {'name': 'get_weather',
                                            'arguments': '{"city":"Paris"}'}}]},
              {'role': 'tool', 'tool_call_id': 'call_1', 'content': '14 C, cloudy'},
              {'role': 'user', 'content': [{'type': 'text', 'text': 'Thanks!'}]}],
 'tools': [{'type': 'function',
            'function': {'name': 'get_weather',
                         'description': 'Current weather for a city.',
                         'parameters': {'type': 'object',
                                        'properties': {'city': {'type': 'string'}},
                                        'required': ['city']}}}],
 'max_completion_tokens': 256,
 'temperature': 0.2,
 'stream': True,
 'stream_options': {'include_usage': True}}


GOLDEN_ANTHROPIC_MESSAGES = {'model': 'claude-sonnet-4-5',
 'max_tokens': 256,
 'messages': [{'role': 'user',
               'content': [{'type': 'text',
                            'text': 'What is the weather in this picture and report?'},
                           {'type': 'image',
                            'source': {'type': 'url', 'url': 'https://example.org/sky.png'}},
                           {'type': 'document',
                            'source': {'type': 'base64',
                                       'media_type': 'application/pdf',
                                       'data': 'JVBERi0xLjQgd2VhdGhlciByZXBvcnQ='},
                            'title': 'report.pdf'}]},
              {'role': 'assistant',
               'content': [{'type': 'thinking',
                            'thinking': 'I should call get_weather.',
                            'signature': 'sig-claude'},
                           {'type': 'text', 'text': 'Checking.'},
                           {'type': 'tool_use',
                            'id': 'call_1',
                            'name': 'get_weather',
                            'input': {'city': 'Paris'}}]},
              {'role': 'user',
               'content': [{'type': 'tool_result',
                            'tool_use_id': 'call_1',
                            'content': '14 C, cloudy'},
                           {'type': 'text', 'text': 'Thanks!'}]}],
 'system': 'Answer briefly.\n\nYou are a weather bot.',
 'tools': [{'name': 'get_weather',
            'description': 'Current weather for a city.',
            'input_schema': {'type': 'object',
                             'properties': {'city': {'type': 'string'}},
                             'required': ['city']}}],
 'temperature': 0.2,
 'stream': True}


GOLDEN_GEMINI_GENERATE = {'contents': [{'role': 'user',
               'parts': [{'text': 'What is the weather in this picture and report?'},
                         {'fileData': {'mimeType': 'image/png',
                                       'fileUri': 'https://example.org/sky.png'}},
                         {'inlineData': {'mimeType': 'application/pdf',
                                         'data': 'JVBERi0xLjQgd2VhdGhlciByZXBvcnQ='}}]},
              {'role': 'model',
               'parts': [{'text': 'Planning the call.',
                          'thought': True,
                          'thoughtSignature': 'Z2VtaW5pLXRob3VnaHQ='},
                         {'text': 'Checking.'},
                         {'functionCall': {'name': 'get_weather',
                                           'args': {'city': 'Paris'},
                                           'id': 'call_1'},
                          'thoughtSignature': 'Z2VtaW5pLWNhbGw='}]},
              {'role': 'user',
               'parts': [{'functionResponse': {'name': 'get_weather',
                                               'id': 'call_1',
                                               'response': {'output': '14 C, cloudy'}}},
                         {'text': 'Thanks!'}]}],
 'systemInstruction': {'parts': [{'text': 'Answer briefly.\n\nYou are a weather bot.'}]},
 'tools': [{'functionDeclarations': [{'name': 'get_weather',
                                      'description': 'Current weather for a city.',
                                      'parametersJsonSchema': {'type': 'object',
                                                               'properties': {'city': {'type': 'string'}},
                                                               'required': ['city']}}]}],
 'generationConfig': {'maxOutputTokens': 256, 'temperature': 0.2}}


GOLDEN_GEMINI_INTERACTIONS = {'model': 'gemini-3-pro-preview',
 'input': [{'type': 'user_input',
            'content': [{'type': 'text',
                         'text': 'What is the weather in this picture and report?'},
                        {'type': 'image',
                         'uri': 'https://example.org/sky.png',
                         'mime_type': 'image/png'},
                        {'type': 'document',
                         'data': 'JVBERi0xLjQgd2VhdGhlciByZXBvcnQ=',
                         'mime_type': 'application/pdf'}]},
           {'type': 'model_output', 'content': [{'type': 'text', 'text': 'Checking.'}]},
           {'type': 'function_call',
            'id': 'call_1',
            'name': 'get_weather',
            'arguments': {'city': 'Paris'}},
           {'type': 'function_result',
            'call_id': 'call_1',
            'name': 'get_weather',
            'result': '14 C, cloudy'},
           {'type': 'user_input', 'content': [{'type': 'text', 'text': 'Thanks!'}]}],
 'system_instruction': 'Answer briefly.\n\nYou are a weather bot.',
 'tools': [{'type': 'function',
            'name': 'get_weather',
            'description': 'Current weather for a city.',
            'parameters': {'type': 'object',
                           'properties': {'city': {'type': 'string'}},
                           'required': ['city']}}],
 'generation_config': {'max_output_tokens': 256, 'temperature': 0.2},
 'stream': True}


GOLDEN = {"openai-responses": GOLDEN_OPENAI_RESPONSES, "openai-chat": GOLDEN_OPENAI_CHAT,
          "anthropic-messages": GOLDEN_ANTHROPIC_MESSAGES,
          "gemini-generate": GOLDEN_GEMINI_GENERATE,
          "gemini-interactions": GOLDEN_GEMINI_INTERACTIONS}


def problems(api: str, body: dict) -> list[str]:
    from modelevents.services.simulator.provider_schemas import validate_request
    return validate_request(api, body)


@pytest.mark.parametrize("api", list(GOLDEN))
def test_golden_body(api):
    assert build(neutral(), api, MODELS[api], stream=True).body == GOLDEN[api]


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("api", list(GOLDEN))
def test_rendered_body_fits_the_sdk_request_type(api, stream):
    body = build(neutral(), api, MODELS[api], stream=stream).body
    assert problems(api, body) == []


def test_validator_is_not_blind():
    # The check above means something only if a wrong body fails it.
    body = copy.deepcopy(GOLDEN_ANTHROPIC_MESSAGES)
    body["messages"][1]["content"][0].pop("signature")
    assert problems("anthropic-messages", body)


def test_reasoning_goes_back_only_to_its_origin():
    bodies = {api: str(build(neutral(), api, MODELS[api], stream=True).body) for api in GOLDEN}
    assert "enc-openai" in bodies["openai-responses"]
    assert "sig-claude" in bodies["anthropic-messages"]
    assert GEMINI_THOUGHT_SIG in bodies["gemini-generate"]
    assert GEMINI_CALL_SIG in bodies["gemini-generate"]
    for api, text in bodies.items():
        for blob, home in (("enc-openai", "openai-responses"), ("sig-claude", "anthropic-messages"),
                           (GEMINI_THOUGHT_SIG, "gemini-generate"),
                           (GEMINI_CALL_SIG, "gemini-generate")):
            if api != home:
                assert blob not in text, (blob, api)
    # The readable text of foreign reasoning is dropped too (base.replayable).
    assert "I should call get_weather" not in bodies["openai-responses"]
    assert "Need the weather tool" not in bodies["anthropic-messages"]


def test_same_provider_other_model_gets_no_signature():
    body = build(neutral(), "anthropic-messages", "claude-opus-4-1", stream=False).body
    assert "sig-claude" not in str(body)
    body = build(neutral(), "gemini-generate", "gemini-2.5-flash", stream=False).body
    assert GEMINI_THOUGHT_SIG not in str(body) and GEMINI_CALL_SIG not in str(body)


def test_dated_snapshot_counts_as_its_alias():
    # The reasoning came from gpt-5-2025-08-07 (the echoed snapshot); the target says gpt-5.
    body = build(neutral(), "openai-responses", "gpt-5", stream=False).body
    assert body["input"][1]["encrypted_content"] == "enc-openai"
    body = build(neutral(), "openai-responses", "gpt-5-mini", stream=False).body
    assert "enc-openai" not in str(body)


def test_openai_reasoning_without_item_id_is_not_sent():
    body = request_body()
    del body["transcript"][2]["parts"][0]["item_id"]
    rendered = build(NeutralRequest.model_validate(body), "openai-responses", "gpt-5",
                     stream=False).body
    assert all(item["type"] != "reasoning" for item in rendered["input"])


def test_gemini3_unsigned_call_gets_the_documented_skip_value():
    body = request_body()
    del body["transcript"][2]["parts"][4]["signature"]
    rendered = build(NeutralRequest.model_validate(body), "gemini-generate", "gemini-3-pro-preview",
                     stream=True).body
    call = rendered["contents"][1]["parts"][-1]
    assert call["thoughtSignature"] == SKIP_SIGNATURE_CHECK
    older = build(NeutralRequest.model_validate(body), "gemini-generate", "gemini-2.5-flash",
                  stream=True).body
    assert "thoughtSignature" not in older["contents"][1]["parts"][-1]


def test_error_result_and_parallel_results():
    body = request_body()
    body["transcript"][2]["parts"].append(
        {"type": "tool_call", "tool_name": "get_weather", "tool_call_id": "call_2",
         "arguments": {"city": "Oslo"}})
    body["transcript"][3]["parts"].append(
        {"type": "tool_result", "tool_name": "get_weather", "tool_call_id": "call_2",
         "output": "unknown city", "is_error": True})
    request = NeutralRequest.model_validate(body)
    anthropic = build(request, "anthropic-messages", "claude-sonnet-4-5", stream=False).body
    assert anthropic["messages"][2]["content"][1] == {
        "type": "tool_result", "tool_use_id": "call_2", "content": "unknown city",
        "is_error": True}
    gemini = build(request, "gemini-generate", "gemini-2.5-flash", stream=False).body
    assert gemini["contents"][2]["parts"][1] == {"functionResponse": {
        "name": "get_weather", "id": "call_2", "response": {"error": "unknown city"}}}
    interactions = build(request, "gemini-interactions", "gemini-2.5-flash", stream=False).body
    assert interactions["input"][-2]["is_error"] is True
    chat = build(request, "openai-chat", "gpt-4.1", stream=False).body
    assert [m["tool_call_id"] for m in chat["messages"] if m["role"] == "tool"] == [
        "call_1", "call_2"]
    for api in GOLDEN:
        assert problems(api, build(request, api, MODELS[api], stream=False).body) == [], api


def test_structured_output_per_api():
    schema = {"type": "object", "properties": {"temp": {"type": "number"}},
              "required": ["temp"], "additionalProperties": False}
    request = neutral(structured_output={"name": "weather", "schema": schema})
    bodies = {api: build(request, api, MODELS[api], stream=False).body for api in GOLDEN}
    assert bodies["openai-responses"]["text"]["format"] == {
        "type": "json_schema", "name": "weather", "schema": schema, "strict": True}
    assert bodies["openai-chat"]["response_format"]["json_schema"]["schema"] == schema
    assert bodies["anthropic-messages"]["output_config"] == {
        "format": {"type": "json_schema", "schema": schema}}
    assert bodies["gemini-generate"]["generationConfig"]["responseJsonSchema"] == schema
    assert bodies["gemini-interactions"]["response_format"]["schema"] == schema
    for api, body in bodies.items():
        assert problems(api, body) == [], api


def test_background_where_the_api_has_it():
    request = neutral(background=True)
    assert build(request, "openai-responses", "gpt-5", stream=False).body["background"] is True
    assert build(request, "gemini-interactions", "gemini-2.5-flash",
                 stream=False).body["background"] is True
    for api in ("openai-chat", "anthropic-messages", "gemini-generate"):
        with pytest.raises(RenderError, match="background"):
            build(request, api, MODELS[api], stream=False)


def test_endpoints():
    assert build(neutral(), "gemini-generate", "gemini-2.5-flash", stream=True).endpoint.path == (
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent")
    stream = build(neutral(), "gemini-generate", "gemini-2.5-flash", stream=True).endpoint
    assert stream.query == {"alt": "sse"}
    unary = build(neutral(), "gemini-generate", "gemini-2.5-flash", stream=False).endpoint
    assert (unary.path, unary.query) == ("/v1beta/models/gemini-2.5-flash:generateContent", {})
    assert build(neutral(), "anthropic-messages", "claude-sonnet-4-5",
                 stream=False).endpoint.headers["anthropic-version"] == "2023-06-01"
    assert build(neutral(), "openai-responses", "gpt-5", stream=False).endpoint.path == (
        "/v1/responses")
    assert build(neutral(), "openai-chat", "gpt-4.1", stream=False).endpoint.path == (
        "/v1/chat/completions")
    assert build(neutral(), "gemini-interactions", "gemini-2.5-flash",
                 stream=False).endpoint.path == "/v1beta/interactions"


def test_what_an_api_cannot_carry_is_a_clear_error():
    url_file = request_body()
    url_file["transcript"][1]["parts"][2] = {"type": "file", "url": "https://example.org/r.pdf"}
    with pytest.raises(RenderError, match=r"transcript\[1\]\.parts\[2\].*file_id"):
        build(NeutralRequest.model_validate(url_file), "openai-chat", "gpt-4.1", stream=False)
    with pytest.raises(RenderError, match="temperature 0..1"):
        build(neutral(temperature=1.5), "anthropic-messages", "claude-sonnet-4-5", stream=False)
    with pytest.raises(RenderError, match="below 16"):
        build(neutral(max_output_tokens=8), "openai-responses", "gpt-5", stream=False)
    with pytest.raises(RenderError, match="no request renderer"):
        build(neutral(), "cohere-chat", "command", stream=False)


def test_unparsable_arguments_survive_where_the_wire_takes_text():
    body = request_body()
    call = body["transcript"][2]["parts"][4]
    call["arguments"] = {}
    call["raw_arguments"] = '{"city": "Par'
    request = NeutralRequest.model_validate(body)
    responses = build(request, "openai-responses", "gpt-5", stream=False).body
    assert responses["input"][3]["arguments"] == '{"city": "Par'
    with pytest.raises(RenderError, match="not a JSON object"):
        build(request, "anthropic-messages", "claude-sonnet-4-5", stream=False)


def test_render_is_the_body_of_build():
    from modelevents.adapters.requests import render
    assert render("anthropic-messages", neutral(), "claude-sonnet-4-5", stream=True) == (
        GOLDEN_ANTHROPIC_MESSAGES)


def test_every_api_has_a_renderer():
    from modelevents.schemas.transcript import APIS
    assert set(RENDERERS) == set(APIS)
