"""Neutral request → Gemini ``generateContent`` / ``streamGenerateContent`` request.

Follows the Gemini generateContent reference (path, ``alt=sse``, parts) and the Function calling
guide (function calls keyed by name; ids invented by clients are accepted; thought signatures);
camelCase REST field names (``google.genai.types`` aliases).

| neutral | generateContent |
|---|---|
| instructions / opening system messages | ``systemInstruction`` {parts: [{text}]} |
| user text / image / file | ``text`` / ``inlineData`` {mimeType, data} or ``fileData``
  {mimeType, fileUri} (a url or a Files API uri given as file_id) |
| assistant (role ``model``) text / tool_call | ``text`` / ``functionCall`` {name, args, id} with
  its ``thoughtSignature`` when it came from this model |
| tool_result | role ``user``: ``functionResponse`` {name, id, response: {output} or {error}}
  (the API's convention for the response object) |
| reasoning | ``text`` with ``thought: true`` and ``thoughtSignature`` — only back to Gemini
  generateContent and the model that produced it |

Consecutive contents of one role are merged (all results of a parallel call in one content).

Hosted tools are one ``Tool`` each in ``tools``: ``googleSearch`` (web_search),
``codeExecution``, ``urlContext``, ``googleMaps``, ``fileSearch`` {fileSearchStoreNames}. The
Gemini API takes no domain rule for them (``GoogleSearch.excludeDomains`` is Vertex AI only).
"""

from __future__ import annotations

import base64
import mimetypes
from typing import Any

from modelevents.adapters.errors import RenderError
from modelevents.adapters.requests.base import Endpoint, replayable
from modelevents.adapters.requests.gemini_hosted import HOSTED as GEMINI_HOSTED
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

API = "gemini-generate"
PROVIDER = "google"

# Gemini 3 rejects a model turn whose function call carries no thought signature (Gemini Thought
# signatures guide, HTTP 400). A call that did not come from this model has none; Google names the
# dummy signature "skip_thought_signature_validator" to skip the check for such injected calls
# (ai.google.dev/gemini-api/docs/thought-signatures). thoughtSignature is bytes, base64 on the
# wire: this is what the google-genai SDK sends for b"skip_thought_signature_validator" (the
# workaround strands-agents/sdk-python#1298 shipped).
# generateContent has no MCP server tool on the Gemini API.
HOSTED = {name: egress for name, egress in GEMINI_HOSTED.items() if name != "mcp"}

SKIP_SIGNATURE_CHECK = base64.b64encode(b"skip_thought_signature_validator").decode()


def endpoint(model: str, *, stream: bool) -> Endpoint:
    name = model if model.startswith("models/") else f"models/{model}"
    if stream:
        return Endpoint("POST", f"/v1beta/{name}:streamGenerateContent", query={"alt": "sse"},
                        headers={"accept": "text/event-stream"})
    return Endpoint("POST", f"/v1beta/{name}:generateContent")


def render(request: NeutralRequest, model: str, *, stream: bool,
           provider: str = PROVIDER) -> dict[str, Any]:
    # ``stream`` changes the path (endpoint()), not the body.
    if request.background:
        raise RenderError("generateContent has no background mode; target "
                          "gemini-interactions or set background to false")
    contents: list[dict[str, Any]] = []
    for m_index, message in enumerate(request.transcript):
        if message.role == "system":
            continue
        role = "model" if message.role == "assistant" else "user"
        parts = [p for p_index, part in enumerate(message.parts)
                 if (p := _part(part, f"transcript[{m_index}].parts[{p_index}]",
                                provider, model)) is not None]
        if role == "model":
            _sign_first_call(parts, model)
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    body: dict[str, Any] = {"contents": contents}
    system = request.system_text()
    if system:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    tools: list[dict[str, Any]] = []
    if request.tools:
        # parametersJsonSchema takes JSON Schema as is; `parameters` is an OpenAPI subset.
        tools.append({"functionDeclarations": [
            {"name": t.name, "description": t.description or "",
             "parametersJsonSchema": t.parameters} for t in request.tools]})
    tools += [gemini_tool(tool, API, camel=True, hosted=HOSTED)
              for tool in request.hosted_tools]
    if tools:
        body["tools"] = tools
    config: dict[str, Any] = {}
    if request.max_output_tokens is not None:
        config["maxOutputTokens"] = request.max_output_tokens
    if request.temperature is not None:
        config["temperature"] = request.temperature
    if request.structured_output is not None:
        config["responseMimeType"] = "application/json"
        config["responseJsonSchema"] = request.structured_output.json_schema
    if config:
        body["generationConfig"] = config
    return body


def _sign_first_call(parts: list[dict[str, Any]], model: str) -> None:
    calls = [p for p in parts if "functionCall" in p]
    if (calls and not any("thoughtSignature" in p for p in calls)
            and model.removeprefix("models/").startswith("gemini-3")):
        calls[0]["thoughtSignature"] = SKIP_SIGNATURE_CHECK


def _part(part: Any, where: str, provider: str, model: str) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"text": part.text}
    if isinstance(part, (ImagePart, FilePart)):
        return _media(part, where)
    if isinstance(part, ToolCallPart):
        if part.raw_arguments is not None:
            raise RenderError(f"{where}: tool call {part.tool_call_id!r} has arguments that are "
                              "not a JSON object, which functionCall.args cannot carry; answer it with an "
                              "error function response and drop the call, or fix arguments")
        out: dict[str, Any] = {"functionCall": {"name": part.tool_name, "args": part.arguments,
                                                "id": part.tool_call_id}}
        if part.signature and replayable(part.signature.origin, provider, API, model):
            out["thoughtSignature"] = part.signature.value
        return out
    if isinstance(part, ToolResultPart):
        key = "error" if part.is_error else "output"
        return {"functionResponse": {"name": part.tool_name, "id": part.tool_call_id,
                                     "response": {key: part.output}}}
    if isinstance(part, ReasoningPart):
        if not replayable(part.origin, provider, API, model):
            return None
        text = part.readable
        if not (text or part.signature):
            return None
        out = {"text": text}
        if text:
            out["thought"] = True
        if part.signature:
            out["thoughtSignature"] = part.signature
        return out
    raise RenderError(f"{where}: a {part.type} part has no generateContent form")


def _media(part: ImagePart | FilePart, where: str) -> dict[str, Any]:
    if part.data is not None:
        return {"inlineData": {"mimeType": part.media_type, "data": part.data}}
    uri = part.url if part.url is not None else getattr(part, "file_id", None)
    mime = part.media_type or mimetypes.guess_type(uri or "")[0]
    if not mime:
        raise RenderError(f"{where}: Gemini needs the media_type of {uri!r} (fileData.mimeType); "
                          "add media_type to the part")
    return {"fileData": {"mimeType": mime, "fileUri": uri}}
