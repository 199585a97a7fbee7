"""Neutral request → Gemini Interactions API request (``POST /v1beta/interactions``).

Follows the Gemini Interactions API reference (endpoint, ``stream`` in the body, create fields,
steps, function results as steps; stateless multi-turn resends the whole history);
snake_case field names of the SDK's ``CreateModelInteractionParam``.

The whole history goes as ``input: [Step]`` every time (the neutral transcript is the state;
no ``previous_interaction_id``):

| neutral | step |
|---|---|
| user text / image / file | ``user_input`` {content: text / image / document / audio} |
| assistant text | ``model_output`` {content: [text]} |
| tool_call | ``function_call`` {id, name, arguments} |
| tool_result | ``function_result`` {call_id, name, result, is_error} |
| reasoning | ``thought`` {signature, summary} — only back to Gemini Interactions and the model
  that produced it |

Hosted tools go in ``tools`` (SDK ``Tool``): ``google_search`` (web_search), ``code_execution``,
``url_context``, ``google_maps``, ``file_search`` {file_search_store_names}, ``mcp_server``
{name, url, allowed_tools: [{tools}]}. None of them takes a domain rule (``GoogleSearch`` has
only ``search_types``), and an MCP server has no approval step.

A signature that Gemini put on a function call step has no field in the SDK's
``FunctionCallStepParam`` and is not sent (recorded streams carry ``""`` there).
"""

from __future__ import annotations

from typing import Any

from modelevents.adapters.errors import RenderError
from modelevents.adapters.requests.base import Endpoint, replayable
from modelevents.adapters.requests.gemini_hosted import HOSTED as HOSTED
from modelevents.adapters.requests.gemini_hosted import gemini_tool
from modelevents.schemas.transcript import (
    FilePart,
    ImagePart,
    NeutralRequest,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

API = "gemini-interactions"
PROVIDER = "google"

# The schema generation this renderer writes (steps, Interactions API reference).
API_REVISION = "2026-05-20"


def endpoint(model: str, *, stream: bool) -> Endpoint:
    headers = {"api-revision": API_REVISION}
    if stream:
        headers["accept"] = "text/event-stream"
    return Endpoint("POST", "/v1beta/interactions", headers=headers)


def render(request: NeutralRequest, model: str, *, stream: bool,
           provider: str = PROVIDER) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    for m_index, message in enumerate(request.transcript):
        if message.role == "system":
            continue
        if message.role == "user":
            steps.append({"type": "user_input", "content": [
                _content(part, f"transcript[{m_index}].parts[{p_index}]")
                for p_index, part in enumerate(message.parts)]})
            continue
        texts: list[dict[str, Any]] = []

        def flush_text(texts: list[dict[str, Any]] = texts) -> None:
            if texts:
                steps.append({"type": "model_output", "content": list(texts)})
                texts.clear()

        for part in message.parts:
            if isinstance(part, TextPart):
                texts.append({"type": "text", "text": part.text})
                continue
            flush_text()
            if isinstance(part, ToolCallPart):
                if part.raw_arguments is not None:
                    raise RenderError(f"transcript[{m_index}]: tool call {part.tool_call_id!r} "
                                      "has arguments that are not a JSON object, which a function_call step "
                                      "cannot carry; drop the call or fix its arguments")
                steps.append({"type": "function_call", "id": part.tool_call_id,
                              "name": part.tool_name, "arguments": part.arguments})
            elif isinstance(part, ToolResultPart):
                result: dict[str, Any] = {"type": "function_result",
                                          "call_id": part.tool_call_id,
                                          "name": part.tool_name, "result": part.output}
                if part.is_error:
                    result["is_error"] = True
                steps.append(result)
            elif isinstance(part, ReasoningPart):
                if part.signature and replayable(part.origin, provider, API, model):
                    thought: dict[str, Any] = {"type": "thought", "signature": part.signature}
                    if part.readable:
                        thought["summary"] = [{"type": "text", "text": part.readable}]
                    steps.append(thought)
        flush_text()
    body: dict[str, Any] = {"model": model, "input": steps}
    system = request.system_text()
    if system:
        body["system_instruction"] = system
    tools = [{"type": "function", "name": t.name, "description": t.description or "",
              "parameters": t.parameters} for t in request.tools]
    tools += [gemini_tool(tool, API, camel=False) for tool in request.hosted_tools]
    if tools:
        body["tools"] = tools
    config: dict[str, Any] = {}
    if request.max_output_tokens is not None:
        config["max_output_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if config:
        body["generation_config"] = config
    if request.structured_output is not None:
        body["response_format"] = {"type": "text", "mime_type": "application/json",
                                   "schema": request.structured_output.json_schema}
    if request.background:
        body["background"] = True
    body["stream"] = stream
    return body


def _content(part: Any, where: str) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, (ImagePart, FilePart)):
        if isinstance(part, ImagePart):
            kind = "image"
        else:
            kind = "audio" if part.modality == "audio" else "document"
        content: dict[str, Any] = {"type": kind}
        if part.data is not None:
            content["data"] = part.data
        else:
            content["uri"] = part.url if part.url is not None else getattr(part, "file_id", None)
        if part.media_type:
            content["mime_type"] = part.media_type
        return content
    raise RenderError(f"{where}: a {part.type} part cannot be user input; move it to an "
                      "assistant or tool message, or drop it")
