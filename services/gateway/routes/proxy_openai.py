"""The drop-in proxy's OpenAI routes: Responses and Chat Completions, on any named upstream.

    POST /proxy/{upstream}/v1/responses                 create (stream or not, background)
    GET  /proxy/{upstream}/v1/responses/{id}            retrieve; ?stream=true&starting_after=N
                                                        resumes a background response's stream
    POST /proxy/{upstream}/v1/responses/{id}/cancel     cancel a background response
    POST /proxy/{upstream}/v1/chat/completions          Chat Completions (OpenAI or any
                                                        compatible server: vLLM, Ollama, Groq …)

An ``openai`` client takes ``base_url="http://<gateway>/proxy/openai/v1"`` (or
``/proxy/<upstream>/v1``); everything else is as against the provider (docs/drop-in.md). The
bodies are relayed untouched (``services/gateway/proxy/relay.py``).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from modelevents.services.gateway.proxy.hub import RunningProxy
from modelevents.services.gateway.proxy.relay import ProxiedCall, What, relay

__all__ = ["router"]

router = APIRouter(tags=["drop-in proxy"])

_BODY = {"requestBody": {"content": {"application/json": {"schema": {"type": "object"}}},
                         "description": "the provider's own request body, sent as it is"}}


@router.post("/proxy/{upstream}/v1/responses", summary="OpenAI Responses: create",
             openapi_extra=_BODY)
async def create_response(upstream: str, request: Request, proxy: RunningProxy) -> Response:
    return await relay(proxy, request, ProxiedCall("openai-responses", upstream,
                                                   "/v1/responses", "create"))


@router.get("/proxy/{upstream}/v1/responses/{response_id}",
            summary="OpenAI Responses: retrieve, or resume its stream")
async def retrieve_response(upstream: str, response_id: str, request: Request,
                            proxy: RunningProxy) -> Response:
    what: What = "resume" if request.query_params.get("stream") == "true" else "poll"
    return await relay(proxy, request, ProxiedCall(
        "openai-responses", upstream, f"/v1/responses/{response_id}", what,
        object_id=response_id))


@router.post("/proxy/{upstream}/v1/responses/{response_id}/cancel",
             summary="OpenAI Responses: cancel a background response")
async def cancel_response(upstream: str, response_id: str, request: Request,
                          proxy: RunningProxy) -> Response:
    return await relay(proxy, request, ProxiedCall(
        "openai-responses", upstream, f"/v1/responses/{response_id}/cancel", "cancel",
        object_id=response_id))


@router.post("/proxy/{upstream}/v1/chat/completions", summary="OpenAI Chat Completions",
             openapi_extra=_BODY)
async def chat_completions(upstream: str, request: Request, proxy: RunningProxy) -> Response:
    return await relay(proxy, request, ProxiedCall("openai-chat", upstream,
                                                   "/v1/chat/completions", "create"))
