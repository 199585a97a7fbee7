"""Gemini's hosted tools, shared by both Gemini renderers (Interactions: snake_case ``type``
entries; generateContent: one camelCase ``Tool`` object each).

What the Gemini API lets a request restrict is little: no domain rule for Google Search or URL
context (``GoogleSearch.exclude_domains`` is "not supported in Gemini API", only on Vertex AI),
no network switch for code execution, no approval step for MCP servers.
"""

from __future__ import annotations

from typing import Any

from modelevents.adapters.errors import RenderError
from modelevents.adapters.requests.base import Egress, domain_fields, unrenderable
from modelevents.schemas.hosted_tools import FileSearchTool, HostedTool, McpTool

HOSTED: dict[str, Egress] = {
    "web_search": Egress(note="google_search: no domain rule on the Gemini API"),
    "url_context": Egress(note="fetches the URLs in the prompt: no domain rule"),
    "code_execution": Egress(network="unknown", note="no request field for network"),
    "google_maps": Egress(note="reads Google Maps only"),
    "file_search": Egress(note="the file search stores named"),
    "mcp": Egress(note="the server by URL; allowed_tools; no approval step (Interactions)"),
}

# The neutral names → the Interactions type / the generateContent Tool field.
_NAMES = {"web_search": ("google_search", "googleSearch"),
          "url_context": ("url_context", "urlContext"),
          "code_execution": ("code_execution", "codeExecution"),
          "google_maps": ("google_maps", "googleMaps"),
          "file_search": ("file_search", "fileSearch")}


def gemini_tool(tool: HostedTool, api: str, *, camel: bool,
                hosted: dict[str, Egress] = HOSTED) -> dict[str, Any]:
    """One hosted tool as ``api`` takes it; RenderError for what it cannot carry or enforce."""
    egress = hosted.get(tool.type)
    if egress is None:
        raise unrenderable(tool, api, hosted)
    domain_fields(tool, egress, api)  # raises: Gemini enforces no domain rule
    if isinstance(tool, McpTool):
        return _mcp_server(tool, api)
    interactions_type, generate_field = _NAMES[tool.type]
    options: dict[str, Any] = {}
    if isinstance(tool, FileSearchTool):
        options = {("fileSearchStoreNames" if camel else "file_search_store_names"):
                   tool.store_ids}
    if camel:
        return {generate_field: options}
    return {"type": interactions_type, **options}


def _mcp_server(tool: McpTool, api: str) -> dict[str, Any]:
    if tool.require_approval == "always":
        raise RenderError(f"MCP server {tool.server_label!r}: {api} has no approval step for "
                          "MCP calls, so require_approval 'always' cannot hold there; drop it "
                          "or target OpenAI Responses")
    server: dict[str, Any] = {"type": "mcp_server", "name": tool.server_label,
                              "url": tool.server_url}
    if tool.allowed_tools is not None:
        server["allowed_tools"] = [{"tools": tool.allowed_tools}]
    return server
