"""Neutral request → OpenAI Chat Completions request (``POST /v1/chat/completions``).

Also what OpenAI-compatible servers take (OpenAI Chat Completions API reference). Field names from
the SDK's ``CompletionCreateParams``.

| neutral | Chat message |
|---|---|
| instructions / opening system messages | one ``system`` message |
| user text / image / file / audio file | ``user`` content parts ``text`` / ``image_url`` /
  ``file`` {file_data | file_id} / ``input_audio`` (wav, mp3) |
| assistant text + tool calls | one ``assistant`` message: ``content`` and ``tool_calls`` |
| tool_result | one ``tool`` message per result {tool_call_id, content} |
| reasoning | dropped: Chat Completions has no input field for reasoning or its signatures |
"""

from __future__ import annotations

from typing import Any

from modelevents.adapters.errors import RenderError
from modelevents.adapters.requests.base import (
    Egress,
    Endpoint,
    arguments_text,
    data_url,
    domain_fields,
    unrenderable,
)
from modelevents.schemas.transcript import (
    FilePart,
    ImagePart,
    NeutralRequest,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

API = "openai-chat"

# Chat has one hosted tool, on the search-preview models only: web_search_options, which
# takes no domain rule (SDK WebSearchOptions: search_context_size, user_location).
HOSTED: dict[str, Egress] = {
    "web_search": Egress(note="web_search_options: no domain rule"),
}
PROVIDER = "openai"

# input_audio takes only these formats (the SDK's InputAudio.format).
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}


def endpoint(model: str, *, stream: bool) -> Endpoint:
    headers = {"accept": "text/event-stream"} if stream else {}
    return Endpoint("POST", "/v1/chat/completions", headers=headers)


def render(request: NeutralRequest, model: str, *, stream: bool,
           provider: str = PROVIDER) -> dict[str, Any]:
    if request.background:
        raise RenderError("Chat Completions has no background mode; target openai-responses "
                          "or Gemini Interactions, or set background to false")
    messages: list[dict[str, Any]] = []
    system = request.system_text()
    if system:
        messages.append({"role": "system", "content": system})
    for m_index, message in enumerate(request.transcript):
        if message.role == "user":
            messages.append({"role": "user", "content": [
                _user_part(part, f"transcript[{m_index}].parts[{p_index}]")
                for p_index, part in enumerate(message.parts)]})
        elif message.role == "assistant":
            messages.append(_assistant(message.parts))
        elif message.role == "tool":
            messages.extend({"role": "tool", "tool_call_id": part.tool_call_id,
                             "content": part.output}
                            for part in message.parts if isinstance(part, ToolResultPart))
    body: dict[str, Any] = {"model": model, "messages": messages}
    if request.tools:
        body["tools"] = [{"type": "function", "function": {
            "name": t.name, "description": t.description or "", "parameters": t.parameters}}
            for t in request.tools]
    for tool in request.hosted_tools:
        egress = HOSTED.get(tool.type)
        if egress is None:
            raise unrenderable(tool, API, HOSTED)
        domain_fields(tool, egress, API)  # raises: Chat enforces no domain rule
        body["web_search_options"] = {}
    if request.max_output_tokens is not None:
        body["max_completion_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.structured_output is not None:
        so = request.structured_output
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": so.name, "schema": so.json_schema, "strict": so.strict}}
    body["stream"] = stream
    if stream:
        # Without it the stream carries no usage at all (OpenAI Chat Completions streaming
        # reference, ``stream_options.include_usage``).
        body["stream_options"] = {"include_usage": True}
    return body


def _assistant(parts: list[Any]) -> dict[str, Any]:
    text = "".join(p.text for p in parts if isinstance(p, TextPart))
    calls = [{"id": p.tool_call_id, "type": "function",
              "function": {"name": p.tool_name, "arguments": arguments_text(p)}}
             for p in parts if isinstance(p, ToolCallPart)]
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = calls
    return message


def _user_part(part: Any, where: str) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        url = part.url if part.url is not None else data_url(part.media_type or "", part.data or "")
        image: dict[str, Any] = {"url": url}
        if part.detail:
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    if isinstance(part, FilePart):
        if part.modality == "audio":
            audio_format = _AUDIO_FORMATS.get(part.media_type or "")
            if part.data is None or audio_format is None:
                raise RenderError(f"{where}: Chat Completions takes audio only as base64 wav or "
                                  f"mp3 data (got {part.media_type}, "
                                  f"{'data' if part.data else 'a url/file id'})")
            return {"type": "input_audio", "input_audio": {"data": part.data,
                                                           "format": audio_format}}
        if part.url is not None:
            raise RenderError(f"{where}: Chat Completions cannot fetch a file by url; send its "
                              "bytes as data or upload it and give file_id")
        file: dict[str, Any] = ({"file_id": part.file_id} if part.file_id is not None else
                                {"file_data": data_url(part.media_type or "", part.data or "")})
        if part.filename:
            file["filename"] = part.filename
        return {"type": "file", "file": file}
    raise RenderError(f"{where}: a {part.type} part cannot be user input; move it to an "
                      "assistant or tool message, or drop it")
