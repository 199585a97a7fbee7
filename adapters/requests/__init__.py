"""Pure renderers of the neutral request into each provider API's wire request (the reverse of the adapters).

One module per provider API (``openai_responses``, ``openai_chat``, ``anthropic_messages``,
``gemini_interactions``, ``gemini_generate``), each with ``render`` (the JSON body) and
``endpoint`` (method, path, query, headers); ``base`` holds the shared shape. ``build`` renders
a whole ``WireRequest`` for an API name (``ModelEvent.api`` names).

Opaque reasoning (signatures, encrypted content) goes back only to the provider, API and model
that produced it; from anywhere else it is dropped together with its readable text
(``base.replayable`` says why).
"""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType
from typing import Any

from modelevents.adapters.errors import RenderError
from modelevents.adapters.requests import (
    anthropic_messages,
    gemini_generate,
    gemini_interactions,
    openai_chat,
    openai_responses,
)
from modelevents.adapters.requests.base import Endpoint, WireRequest
from modelevents.schemas.transcript import NeutralRequest

RENDERERS: dict[str, ModuleType] = {
    module.API: module
    for module in (openai_responses, openai_chat, anthropic_messages, gemini_interactions,
                   gemini_generate)
}

# Each renderer's revision: bump it when the body or endpoint it renders for the same neutral
# request changes. A bundle names the revision its runs were rendered by (schemas/bundles.py).
REVISIONS: dict[str, str] = {api: "1" for api in RENDERERS}

__all__ = ["RENDERERS", "REVISIONS", "Endpoint", "WireRequest", "build", "render",
           "request_adapter_id"]


def request_adapter_id(api: str) -> str:
    """``requests/<api>@<revision>``: the renderer of ``api`` installed now."""
    if api not in RENDERERS:
        raise RenderError(f"no request renderer for api {api!r}; known: {', '.join(RENDERERS)}")
    return f"requests/{api}@{REVISIONS[api]}"


def build(request: NeutralRequest, api: str, model: str, *, stream: bool,
          provider: str | None = None) -> WireRequest:
    """The wire request of ``request`` for ``api``/``model`` (provider: the API's own unless an
    OpenAI-compatible host is named)."""
    try:
        module = RENDERERS[api]
    except KeyError:
        raise RenderError(f"no request renderer for api {api!r}; "
                          f"known: {', '.join(RENDERERS)}") from None
    provider = provider or module.PROVIDER
    endpoint: Endpoint = module.endpoint(model, stream=stream)
    headers_for = getattr(module, "headers_for", None)
    if headers_for is not None:
        endpoint = replace(endpoint, headers={**endpoint.headers, **headers_for(request)})
    return WireRequest(api=api, provider=provider, model=model, endpoint=endpoint,
                       body=module.render(request, model, stream=stream, provider=provider))


def render(api: str, request: NeutralRequest, model: str, *, stream: bool,
           provider: str | None = None) -> dict[str, Any]:
    """Only the JSON body of ``build(...)`` (what services/gateway/routes/runs.py sends)."""
    return build(request, api, model, stream=stream, provider=provider).body
