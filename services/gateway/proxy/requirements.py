"""What a provider-native request needs of its target, for the capability router.

The router of ``POST /v1/runs`` reads a neutral request (``calls/router.py``); a proxied request
is the provider's own body, so its needs are read from the body here, in the same vocabulary
(``schemas/transcript.py`` CAPABILITIES): an image part needs ``input.image``, a document
``input.file``, audio ``input.audio``; function tools ``tools``; each hosted tool
``hosted_tools.<type>``; ``background`` and structured output their capabilities.

:func:`refusal` compares them with the capability manifest's entry for the upstream's provider,
API and model. Only a target the manifest knows can be refused: a model it does not list (a
compatible server's, a model newer than the manifest) goes through, the upstream decides.
"""

from __future__ import annotations

from typing import Any

from modelevents.services.gateway.calls.capabilities import Manifest
from modelevents.services.gateway.calls.router import Missing, Rejection

__all__ = ["needs", "refusal"]

# Tool types of each API → the hosted tool they enable (None: an application function).
_OPENAI_TOOLS = {"function": None, "custom": None, "web_search": "web_search",
                 "web_search_preview": "web_search", "file_search": "file_search",
                 "code_interpreter": "code_execution", "image_generation": "image_generation",
                 "mcp": "mcp", "local_shell": "shell", "shell": "shell",
                 "computer_use_preview": "computer", "computer": "computer",
                 "tool_search": "tool_search"}
_ANTHROPIC_TOOL_PREFIXES = {"web_search_": "web_search", "web_fetch_": "web_fetch",
                            "code_execution_": "code_execution", "tool_search_": "tool_search",
                            "computer_": "computer", "bash_": "shell"}
_GEMINI_TOOLS = {"functionDeclarations": None, "function_declarations": None,
                 "googleSearch": "web_search", "google_search": "web_search",
                 "googleSearchRetrieval": "web_search", "codeExecution": "code_execution",
                 "code_execution": "code_execution", "urlContext": "url_context",
                 "url_context": "url_context", "googleMaps": "google_maps",
                 "google_maps": "google_maps", "fileSearch": "file_search",
                 "file_search": "file_search", "computerUse": "computer",
                 "computer_use": "computer"}
_INTERACTIONS_TOOLS = {"function": None, "google_search": "web_search",
                       "code_execution": "code_execution", "url_context": "url_context",
                       "google_maps": "google_maps", "file_search": "file_search",
                       "mcp_server": "mcp", "computer_use": "computer"}
# Content part types → the input modality they carry.
_PART_MODALITY = {"input_image": "image", "image_url": "image", "image": "image",
                  "input_file": "file", "file": "file", "document": "file",
                  "input_audio": "audio", "audio": "audio"}


def _modality_of_mime(mime: Any) -> str:
    mime = mime if isinstance(mime, str) else ""
    if mime.startswith("image/"):
        return "image"
    return "audio" if mime.startswith("audio/") else "file"


def _parts(value: Any, where: str) -> list[tuple[str, dict[str, Any]]]:
    """Every JSON object below ``value`` that has a ``type``, with where it is."""
    found: list[tuple[str, dict[str, Any]]] = []
    stack: list[tuple[str, Any]] = [(where, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("type"), str):
                found.append((path, item))
            stack.extend((f"{path}.{key}", child) for key, child in item.items()
                         if isinstance(child, (dict, list)))
        elif isinstance(item, list):
            stack.extend((f"{path}[{index}]", child) for index, child in enumerate(item))
    return found


def _content_needs(body: dict[str, Any], field: str, out: dict[str, str]) -> None:
    for where, part in _parts(body.get(field), field):
        modality = _PART_MODALITY.get(part["type"])
        if modality is not None:
            out.setdefault(f"input.{modality}", f"{where} is {part['type']}")


def _gemini_content_needs(body: dict[str, Any], out: dict[str, str]) -> None:
    for c_index, content in enumerate(body.get("contents") or []):
        parts = content.get("parts") if isinstance(content, dict) else None
        for p_index, part in enumerate(parts or []):
            if not isinstance(part, dict):
                continue
            for key in ("inlineData", "inline_data", "fileData", "file_data"):
                data = part.get(key)
                if isinstance(data, dict):
                    modality = _modality_of_mime(data.get("mimeType") or data.get("mime_type"))
                    out.setdefault(f"input.{modality}",
                                   f"contents[{c_index}].parts[{p_index}] is {key}")


def _tool_needs(tools: Any, kinds: dict[str, str | None], out: dict[str, str],
                *, key_is_type: bool = False) -> None:
    for index, tool in enumerate(tools if isinstance(tools, list) else []):
        if not isinstance(tool, dict):
            continue
        names = list(tool) if key_is_type else [tool.get("type", "function")]
        for name in names:
            if not isinstance(name, str):
                continue
            hosted = kinds.get(name)
            if name in kinds and hosted is None:
                out.setdefault("tools", f"tools[{index}] is an application tool")
            elif hosted is not None:
                out.setdefault(f"hosted_tools.{hosted}", f"tools[{index}] is {name}")


def _anthropic_tool_needs(body: dict[str, Any], out: dict[str, str]) -> None:
    for index, tool in enumerate(body.get("tools") or []):
        if not isinstance(tool, dict):
            continue
        kind = tool.get("type")
        if kind in (None, "custom"):
            out.setdefault("tools", f"tools[{index}] is an application tool")
            continue
        for prefix, hosted in _ANTHROPIC_TOOL_PREFIXES.items():
            if isinstance(kind, str) and kind.startswith(prefix):
                out.setdefault(f"hosted_tools.{hosted}", f"tools[{index}] is {kind}")
    if body.get("mcp_servers"):
        out.setdefault("hosted_tools.mcp", "mcp_servers is set")


def needs(api: str, body: dict[str, Any]) -> dict[str, str]:
    """Capability → why the request needs it (the first reason found)."""
    out: dict[str, str] = {}
    if api == "openai-responses":
        _content_needs(body, "input", out)
        _tool_needs(body.get("tools"), _OPENAI_TOOLS, out)
        fmt = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            out.setdefault("structured_output", "text.format is json_schema")
    elif api == "openai-chat":
        _content_needs(body, "messages", out)
        _tool_needs(body.get("tools"), _OPENAI_TOOLS, out)
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            out.setdefault("structured_output", "response_format is json_schema")
    elif api == "anthropic-messages":
        _content_needs(body, "messages", out)
        _anthropic_tool_needs(body, out)
        if isinstance(body.get("output_config"), dict) and body["output_config"].get("format"):
            out.setdefault("structured_output", "output_config.format is set")
    elif api == "gemini-generate":
        _gemini_content_needs(body, out)
        _tool_needs(body.get("tools"), _GEMINI_TOOLS, out, key_is_type=True)
        config = body.get("generationConfig") or body.get("generation_config") or {}
        if isinstance(config, dict) and any(config.get(k) for k in (
                "responseSchema", "responseJsonSchema", "response_schema",
                "response_json_schema")):
            out.setdefault("structured_output", "generationConfig has a response schema")
    elif api == "gemini-interactions":
        _content_needs(body, "input", out)
        _tool_needs(body.get("tools"), _INTERACTIONS_TOOLS, out)
        if body.get("response_format"):
            out.setdefault("structured_output", "response_format is set")
    if body.get("background") is True:
        out.setdefault("background", "background is true")
    return out


def refusal(manifest: Manifest, provider: str, api: str, model: str | None,
            body: dict[str, Any]) -> Rejection | None:
    """What the manifest's target lacks for this request (None: nothing, or not known)."""
    if not model:
        return None
    resolved = manifest.lookup(provider, api, model)
    if resolved is None:
        return None
    offered = resolved.capabilities.names()
    missing = tuple(Missing(name, because) for name, because in needs(api, body).items()
                    if name not in offered)
    return Rejection(provider, api, model, missing) if missing else None
