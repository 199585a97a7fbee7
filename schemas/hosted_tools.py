"""The provider-hosted tools a neutral request enables (``NeutralRequest.hosted_tools``).

A hosted tool runs at the provider, on the tenant's behalf: a web search, a fetch, a code
sandbox, an MCP server the provider calls. Each entry names one tool by its ``type`` (the
``hosted_tools.*`` capability names of ``schemas/transcript.py``) with only the options that
govern where it may reach — what egress policy is about:

    web_search, web_fetch     allowed_domains / blocked_domains (host names; a domain covers its
                              subdomains)
    code_execution, shell     network (may the sandbox reach the network; default no) and, with
                              network, allowed_domains (the sandbox's allowlist)
    mcp                       server_label, server_url (https), allowed_tools, require_approval
    file_search               store_ids (OpenAI vector stores, Gemini file search stores)
    image_generation, computer, url_context, google_maps   no options

How each API renders them, and what an API cannot enforce, is in ``adapters/requests/``; the
tenant's policy narrows them before anything is sent (``services/gateway/calls/egress.py``).
"""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from modelevents.schemas.domains import normalize_domain

__all__ = ["CodeExecutionTool", "ComputerTool", "FileSearchTool", "GoogleMapsTool",
           "HostedTool", "ImageGenerationTool", "McpTool", "ShellTool", "UrlContextTool",
           "WebFetchTool", "WebSearchTool", "check_hosted_tools"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _domains(values: list[str]) -> list[str]:
    return list(dict.fromkeys(normalize_domain(v) for v in values))


class _Allowlist(_Strict):
    allowed_domains: list[str] = Field(default_factory=list)

    _normal = field_validator("allowed_domains")(_domains)


class _DomainRules(_Allowlist):
    """Where a web tool may read: only under ``allowed_domains`` (empty: anywhere), never under
    ``blocked_domains``."""

    blocked_domains: list[str] = Field(default_factory=list)

    _normal_blocked = field_validator("blocked_domains")(_domains)

    @model_validator(mode="after")
    def _check(self) -> _DomainRules:
        both = sorted(set(self.allowed_domains) & set(self.blocked_domains))
        if both:
            raise ValueError(f"{both} are both allowed and blocked; keep each domain in one "
                             "list")
        return self


class WebSearchTool(_DomainRules):
    type: Literal["web_search"] = "web_search"


class WebFetchTool(_DomainRules):
    type: Literal["web_fetch"] = "web_fetch"


class _Sandbox(_Allowlist):
    """A code sandbox the provider runs: no network unless ``network`` (then, where the API
    takes one, only ``allowed_domains``: the sandbox's network allowlist)."""

    network: bool = False

    @model_validator(mode="after")
    def _check(self) -> _Sandbox:
        if self.allowed_domains and not self.network:
            raise ValueError("allowed_domains is the sandbox's network allowlist: set network "
                             "to true, or drop allowed_domains")
        return self


class CodeExecutionTool(_Sandbox):
    type: Literal["code_execution"] = "code_execution"


class ShellTool(_Sandbox):
    type: Literal["shell"] = "shell"


class McpTool(_Strict):
    """A remote MCP server the provider calls (OpenAI ``mcp`` tool, Claude ``mcp_servers``,
    Interactions ``mcp_server``)."""

    type: Literal["mcp"] = "mcp"
    server_label: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$")
    server_url: str
    allowed_tools: list[str] | None = None
    # None: the provider's default (OpenAI asks for approval; the others never do).
    require_approval: Literal["always", "never"] | None = None

    @field_validator("server_url")
    @classmethod
    def _https(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"server_url {value!r} must be an https:// URL with a host (the "
                             "provider connects to it over the internet)")
        return value


class FileSearchTool(_Strict):
    type: Literal["file_search"] = "file_search"
    store_ids: list[str] = Field(min_length=1)


class ImageGenerationTool(_Strict):
    type: Literal["image_generation"] = "image_generation"


class ComputerTool(_Strict):
    type: Literal["computer"] = "computer"


class UrlContextTool(_Strict):
    type: Literal["url_context"] = "url_context"


class GoogleMapsTool(_Strict):
    type: Literal["google_maps"] = "google_maps"


HostedTool = Annotated[
    WebSearchTool | WebFetchTool | CodeExecutionTool | ShellTool | McpTool | FileSearchTool
    | ImageGenerationTool | ComputerTool | UrlContextTool | GoogleMapsTool,
    Field(discriminator="type")]


def check_hosted_tools(tools: list[HostedTool]) -> None:
    """One entry per tool type (MCP: one per server label), with the index at fault."""
    seen: dict[str, int] = {}
    for index, tool in enumerate(tools):
        key = f"mcp:{tool.server_label}" if isinstance(tool, McpTool) else tool.type
        if key in seen:
            what = (f"MCP server label {tool.server_label!r}" if isinstance(tool, McpTool)
                    else f"{tool.type!r}")
            raise ValueError(f"hosted_tools[{index}] repeats {what} of hosted_tools"
                             f"[{seen[key]}]; enable each once (merge their options)")
        seen[key] = index
