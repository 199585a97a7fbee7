"""Neutral request → OpenAI Responses API request (``POST /v1/responses``).

Follows the OpenAI Responses API reference (item types), the Background mode guide and the
Conversation state guide (server-side state, reasoning items), the SDK's ``ResponseCreateParams``
for field names.

| neutral | Responses ``input`` item |
|---|---|
| user text / image / file | ``message`` role user: ``input_text`` / ``input_image`` / ``input_file`` |
| assistant text | ``message`` role assistant, content a string (the SDK's input content list has no
  ``output_text``; a string is accepted) |
| tool_call | ``function_call`` {call_id, name, arguments (JSON text)} |
| tool_result | ``function_call_output`` {call_id, output}; Responses has no error flag |
| reasoning | ``reasoning`` {id, summary, encrypted_content} — only back to OpenAI Responses and
  the model that produced it (OpenAI Reasoning guide), and only with its ``rs_`` id |

Hosted tools go in ``tools`` beside the functions (SDK ``ToolParam``):

| neutral | Responses tool |
|---|---|
| web_search | ``web_search`` {filters: {allowed_domains}} — there is no blocked list |
| code_execution | ``code_interpreter`` {container: {type: auto, network_policy: disabled, or
  allowlist {allowed_domains} with network}} |
| shell | ``shell`` {environment: {type: container_auto, network_policy: as above}} |
| mcp | ``mcp`` {server_label, server_url, allowed_tools, require_approval} |
| file_search | ``file_search`` {vector_store_ids} |
| image_generation, computer | ``image_generation``, ``computer`` |
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
    replayable,
    unrenderable,
)
from modelevents.schemas.hosted_tools import (
    CodeExecutionTool,
    FileSearchTool,
    HostedTool,
    McpTool,
    ShellTool,
)
from modelevents.schemas.transcript import (
    FilePart,
    ImagePart,
    NeutralRequest,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

API = "openai-responses"
PROVIDER = "openai"

_SANDBOX = Egress(allowed_domains=True, network="request",
                  note="network_policy: disabled, or an allowlist of domains")
HOSTED: dict[str, Egress] = {
    "web_search": Egress(allowed_domains=True,
                         note="filters.allowed_domains; the API has no blocked list"),
    "code_execution": _SANDBOX,
    "shell": _SANDBOX,
    "mcp": Egress(note="the server by URL; allowed_tools and require_approval"),
    "file_search": Egress(note="the vector stores named"),
    "image_generation": Egress(note="reads nothing from the web"),
    "computer": Egress(note="no domain restriction: the application carries out the actions"),
}

# spec:CreateResponse.max_output_tokens has minimum 16 (OpenAI Responses API reference).
MIN_OUTPUT_TOKENS = 16


def endpoint(model: str, *, stream: bool) -> Endpoint:
    headers = {"accept": "text/event-stream"} if stream else {}
    return Endpoint("POST", "/v1/responses", headers=headers)


def render(request: NeutralRequest, model: str, *, stream: bool,
           provider: str = PROVIDER) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "input": _input(request, provider, model)}
    system = request.system_text()
    if system:
        body["instructions"] = system
    tools = [{"type": "function", "name": t.name, "description": t.description or "",
              "parameters": t.parameters, "strict": False} for t in request.tools]
    tools += [_hosted(tool) for tool in request.hosted_tools]
    if tools:
        body["tools"] = tools
    if request.max_output_tokens is not None:
        if request.max_output_tokens < MIN_OUTPUT_TOKENS:
            raise RenderError(f"OpenAI Responses rejects max_output_tokens below "
                              f"{MIN_OUTPUT_TOKENS}; raise it (got {request.max_output_tokens})")
        body["max_output_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.structured_output is not None:
        so = request.structured_output
        body["text"] = {"format": {"type": "json_schema", "name": so.name,
                                   "schema": so.json_schema, "strict": so.strict}}
    if request.background:
        # Background responses must be stored to be polled (OpenAI Background mode guide).
        body["background"] = True
        body["store"] = True
    body["stream"] = stream
    return body


def _input(request: NeutralRequest, provider: str, model: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for m_index, message in enumerate(request.transcript):
        if message.role == "system":
            continue  # in instructions
        if message.role == "user":
            content = [_user_part(part, f"transcript[{m_index}].parts[{p_index}]")
                       for p_index, part in enumerate(message.parts)]
            items.append({"type": "message", "role": "user", "content": content})
            continue
        texts: list[str] = []

        def flush_text(texts: list[str] = texts) -> None:
            if texts:
                items.append({"type": "message", "role": "assistant", "content": "".join(texts)})
                texts.clear()

        for part in message.parts:
            if isinstance(part, TextPart):
                texts.append(part.text)
                continue
            flush_text()
            if isinstance(part, ToolCallPart):
                items.append({"type": "function_call", "call_id": part.tool_call_id,
                              "name": part.tool_name, "arguments": arguments_text(part)})
            elif isinstance(part, ToolResultPart):
                items.append({"type": "function_call_output", "call_id": part.tool_call_id,
                              "output": part.output})
            elif isinstance(part, ReasoningPart):
                item = _reasoning(part, provider, model)
                if item is not None:
                    items.append(item)
        flush_text()
    return items


def _user_part(part: Any, where: str) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, ImagePart):
        url = part.url if part.url is not None else data_url(part.media_type or "", part.data or "")
        return {"type": "input_image", "image_url": url, "detail": part.detail or "auto"}
    if isinstance(part, FilePart):
        if part.modality == "audio":
            raise RenderError(f"{where}: OpenAI Responses takes no audio input; send the audio "
                              "to a target with input.audio (e.g. openai-chat or Gemini)")
        item: dict[str, Any] = {"type": "input_file"}
        if part.url is not None:
            item["file_url"] = part.url
        elif part.file_id is not None:
            item["file_id"] = part.file_id
        else:
            item["file_data"] = data_url(part.media_type or "", part.data or "")
            item["filename"] = part.filename or "file"
        if part.filename and "filename" not in item:
            item["filename"] = part.filename
        return item
    raise RenderError(f"{where}: a {part.type} part cannot be user input; move it to an "
                      "assistant or tool message, or drop it")


def _reasoning(part: ReasoningPart, provider: str, model: str) -> dict[str, Any] | None:
    # A reasoning item goes back only where it was made, and needs its rs_ id (ReasoningItem).
    if not part.item_id or not replayable(part.origin, provider, API, model):
        return None
    item: dict[str, Any] = {"type": "reasoning", "id": part.item_id,
                            "summary": [{"type": "summary_text", "text": s}
                                        for s in part.summary]}
    if part.text:
        item["content"] = [{"type": "reasoning_text", "text": part.text}]
    if part.encrypted_content:
        item["encrypted_content"] = part.encrypted_content
    return item


def _hosted(tool: HostedTool) -> dict[str, Any]:
    egress = HOSTED.get(tool.type)
    if egress is None:
        raise unrenderable(tool, API, HOSTED)
    allowed, _ = domain_fields(tool, egress, API)
    if tool.type == "web_search":
        return {"type": "web_search", **({"filters": {"allowed_domains": allowed}}
                                         if allowed else {})}
    if isinstance(tool, CodeExecutionTool):
        return {"type": "code_interpreter",
                "container": {"type": "auto", **_network(tool, allowed)}}
    if isinstance(tool, ShellTool):
        return {"type": "shell", "environment": {"type": "container_auto",
                                                 **_network(tool, allowed)}}
    if isinstance(tool, McpTool):
        mcp: dict[str, Any] = {"type": "mcp", "server_label": tool.server_label,
                               "server_url": tool.server_url}
        if tool.allowed_tools is not None:
            mcp["allowed_tools"] = tool.allowed_tools
        if tool.require_approval is not None:
            mcp["require_approval"] = tool.require_approval
        return mcp
    if isinstance(tool, FileSearchTool):
        return {"type": "file_search", "vector_store_ids": tool.store_ids}
    return {"type": tool.type}  # image_generation, computer


def _network(tool: CodeExecutionTool | ShellTool, allowed: list[str]) -> dict[str, Any]:
    # No network unless asked for; with it, the allowlist when there is one (else the default).
    if not tool.network:
        return {"network_policy": {"type": "disabled"}}
    if allowed:
        return {"network_policy": {"type": "allowlist", "allowed_domains": allowed}}
    return {}
