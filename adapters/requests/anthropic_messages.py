"""Neutral request → Claude Messages API request (``POST /v1/messages``).

Follows the Claude Messages API reference and the Claude Tool use guide (tool results,
statelessness, ordering); field names from the SDK's ``MessageCreateParams``.

| neutral | Messages |
|---|---|
| instructions / opening system messages | top-level ``system`` |
| user text / image / file | ``text`` / ``image`` {source base64 or url} / ``document``
  {source base64 PDF, plain text, url, or file id} |
| assistant text / tool_call | ``text`` / ``tool_use`` {id, name, input} |
| tool_result | ``tool_result`` {tool_use_id, content, is_error} in a **user** message, before
  any text of that message (Claude Tool use guide: results first, right after their tool_use turn) |
| reasoning | ``thinking`` {thinking, signature} or ``redacted_thinking`` {data} — only back to
  Anthropic and the model that produced it (Messages API reference, Claude Tool use guide) |

Consecutive messages of one role are merged: a tool message and the user message after it
become one user message, as Claude Tool use guide requires.

More on this module: docs/adapters.md, ``adapters/requests/anthropic_messages.py``.
"""

from __future__ import annotations

from typing import Any

from modelevents.adapters.errors import RenderError
from modelevents.adapters.requests.base import (
    Egress,
    Endpoint,
    decoded_text,
    domain_fields,
    replayable,
    unrenderable,
)
from modelevents.schemas.hosted_tools import HostedTool, McpTool
from modelevents.schemas.transcript import (
    FilePart,
    ImagePart,
    NeutralRequest,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

API = "anthropic-messages"
PROVIDER = "anthropic"

# max_tokens is required by the Messages API; used when the request names no limit.
DEFAULT_MAX_TOKENS = 4096
ANTHROPIC_VERSION = "2023-06-01"
# The beta of the MCP connector whose server entries carry tool_configuration (SDK
# BetaRequestMCPServerURLDefinitionParam).
MCP_BETA = "mcp-client-2025-04-04"

_WEB = Egress(allowed_domains=True, blocked_domains=True, exclusive=True,
              note="allowed_domains or blocked_domains, not both")
HOSTED: dict[str, Egress] = {
    "web_search": _WEB,
    "web_fetch": _WEB,
    "code_execution": Egress(network="sandbox",
                             note="no request field: Anthropic documents the sandbox as "
                                  "without internet access"),
    "mcp": Egress(note="the server by URL; allowed_tools; no approval step"),
}
_TOOL_TYPES = {"web_search": "web_search_20250305", "web_fetch": "web_fetch_20250910",
               "code_execution": "code_execution_20250825"}


def endpoint(model: str, *, stream: bool) -> Endpoint:
    headers = {"anthropic-version": ANTHROPIC_VERSION}
    if stream:
        headers["accept"] = "text/event-stream"
    return Endpoint("POST", "/v1/messages", headers=headers)


def headers_for(request: NeutralRequest) -> dict[str, str]:
    """The beta header of the MCP connector, when the request names MCP servers."""
    if any(isinstance(tool, McpTool) for tool in request.hosted_tools):
        return {"anthropic-beta": MCP_BETA}
    return {}


def render(request: NeutralRequest, model: str, *, stream: bool,
           provider: str = PROVIDER) -> dict[str, Any]:
    if request.background:
        raise RenderError("the Messages API has no background mode (only Message Batches, "
                          "Claude Messages API reference); set background to false or pick another "
                          "target")
    if request.temperature is not None and request.temperature > 1:
        raise RenderError(f"Claude takes temperature 0..1 (got {request.temperature}); lower it")
    messages: list[dict[str, Any]] = []
    for m_index, message in enumerate(request.transcript):
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = [block for p_index, part in enumerate(message.parts)
                  if (block := _block(part, f"transcript[{m_index}].parts[{p_index}]",
                                      provider, model)) is not None]
        if not blocks:
            continue
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    body: dict[str, Any] = {"model": model,
                            "max_tokens": request.max_output_tokens or DEFAULT_MAX_TOKENS,
                            "messages": messages}
    system = request.system_text()
    if system:
        body["system"] = system
    tools = [{"name": t.name, "description": t.description or "",
              "input_schema": t.parameters} for t in request.tools]
    servers = []
    for tool in request.hosted_tools:
        if isinstance(tool, McpTool):
            servers.append(_mcp_server(tool))
        else:
            tools.append(_server_tool(tool))
    if tools:
        body["tools"] = tools
    if servers:
        body["mcp_servers"] = servers
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.structured_output is not None:
        body["output_config"] = {"format": {"type": "json_schema",
                                            "schema": request.structured_output.json_schema}}
    body["stream"] = stream
    return body


def _server_tool(tool: HostedTool) -> dict[str, Any]:
    egress = HOSTED.get(tool.type)
    if egress is None or tool.type not in _TOOL_TYPES:
        raise unrenderable(tool, API, HOSTED)
    allowed, blocked = domain_fields(tool, egress, API)
    out: dict[str, Any] = {"type": _TOOL_TYPES[tool.type], "name": tool.type}
    if allowed:
        out["allowed_domains"] = allowed
    elif blocked:
        out["blocked_domains"] = blocked
    return out


def _mcp_server(tool: McpTool) -> dict[str, Any]:
    if tool.require_approval == "always":
        raise RenderError(f"MCP server {tool.server_label!r}: Claude's MCP connector has no "
                          "approval step, so require_approval 'always' cannot hold there; "
                          "drop it or target OpenAI Responses")
    server: dict[str, Any] = {"type": "url", "name": tool.server_label, "url": tool.server_url}
    if tool.allowed_tools is not None:
        server["tool_configuration"] = {"allowed_tools": tool.allowed_tools}
    return server


def _block(part: Any, where: str, provider: str, model: str) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        # Claude rejects empty text blocks; an empty part says nothing.
        return {"type": "text", "text": part.text} if part.text else None
    if isinstance(part, ImagePart):
        source = ({"type": "url", "url": part.url} if part.url is not None else
                  {"type": "base64", "media_type": part.media_type, "data": part.data})
        return {"type": "image", "source": source}
    if isinstance(part, FilePart):
        return _document(part, where)
    if isinstance(part, ToolCallPart):
        if part.raw_arguments is not None:
            raise RenderError(f"{where}: tool call {part.tool_call_id!r} has arguments that are "
                              "not a JSON object, which tool_use.input cannot carry; answer it "
                              "with an error tool_result and drop the call, or fix arguments")
        return {"type": "tool_use", "id": part.tool_call_id, "name": part.tool_name,
                "input": part.arguments}
    if isinstance(part, ToolResultPart):
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": part.tool_call_id,
                                 "content": part.output}
        if part.is_error:
            block["is_error"] = True
        return block
    if isinstance(part, ReasoningPart):
        if not replayable(part.origin, provider, API, model):
            return None
        if part.signature:
            return {"type": "thinking", "thinking": part.readable, "signature": part.signature}
        if part.encrypted_content:
            return {"type": "redacted_thinking", "data": part.encrypted_content}
        return None  # unsigned thinking cannot be sent back (ThinkingBlockParam needs one)
    raise RenderError(f"{where}: a {part.type} part has no Messages API form; drop it or "
                      "target an API that carries it")


def _document(part: FilePart, where: str) -> dict[str, Any]:
    if part.url is not None:
        source: dict[str, Any] = {"type": "url", "url": part.url}
    elif part.file_id is not None:
        source = {"type": "file", "file_id": part.file_id}
    elif part.media_type == "application/pdf":
        source = {"type": "base64", "media_type": "application/pdf", "data": part.data}
    elif part.media_type == "text/plain":
        source = {"type": "text", "media_type": "text/plain", "data": decoded_text(part.data or "")}
    else:
        raise RenderError(f"{where}: Claude documents take PDF or plain text data (got "
                          f"{part.media_type}); convert it, or upload it and give file_id")
    block: dict[str, Any] = {"type": "document", "source": source}
    if part.filename:
        block["title"] = part.filename
    return block
