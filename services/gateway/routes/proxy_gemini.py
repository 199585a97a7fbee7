"""The drop-in proxy's Gemini routes: generateContent and Interactions, on every API version.

    POST /proxy/{upstream}/{version}/models/{model}:generateContent
    POST /proxy/{upstream}/{version}/models/{model}:streamGenerateContent   ?alt=sse: SSE;
                                                        without it: one streamed JSON array
    POST /proxy/{upstream}/{version}/interactions                create (stream, background)
    GET  /proxy/{upstream}/{version}/interactions/{id}           get; ?stream=true&last_event_id=E
                                                                 resumes its stream
    POST /proxy/{upstream}/{version}/interactions/{id}/cancel    cancel (also {id}:cancel)

``version`` is ``v1``, ``v1beta`` or ``v1alpha``, passed on as the client sent it. A
``google-genai`` client takes ``http_options={"base_url": "http://<gateway>/proxy/gemini"}``
(docs/drop-in.md). The bodies are relayed untouched (``services/gateway/proxy/relay.py``).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from modelevents.services.gateway.proxy.errors import provider_error
from modelevents.services.gateway.proxy.hub import RunningProxy
from modelevents.services.gateway.proxy.relay import ProxiedCall, What, relay

__all__ = ["router"]

router = APIRouter(tags=["drop-in proxy"])

VERSIONS = ("v1", "v1beta", "v1alpha")
_BODY = {"requestBody": {"content": {"application/json": {"schema": {"type": "object"}}},
                         "description": "the provider's own request body, sent as it is"}}


def _unknown(api: str, what: str) -> Response:
    return provider_error(api, 404, f"modelevents gateway: no Gemini endpoint {what}; the proxy "
                                    "serves models/{model}:generateContent, "
                                    ":streamGenerateContent and interactions on "
                                    + ", ".join(VERSIONS), "not_found")


@router.post("/proxy/{upstream}/{version}/models/{model_action:path}",
             summary="Gemini generateContent / streamGenerateContent", openapi_extra=_BODY)
async def generate_content(upstream: str, version: str, model_action: str, request: Request,
                           proxy: RunningProxy) -> Response:
    model, _, action = model_action.rpartition(":")
    if version not in VERSIONS or action not in ("generateContent", "streamGenerateContent"):
        return _unknown("gemini-generate", f"{version}/models/{model_action}")
    array = action == "streamGenerateContent" and request.query_params.get("alt") != "sse"
    return await relay(proxy, request, ProxiedCall(
        "gemini-generate", upstream, f"/{version}/models/{model_action}", "create",
        model=model.removeprefix("models/"), array_stream=array))


@router.post("/proxy/{upstream}/{version}/interactions", summary="Gemini Interactions: create",
             openapi_extra=_BODY)
async def create_interaction(upstream: str, version: str, request: Request,
                             proxy: RunningProxy) -> Response:
    if version not in VERSIONS:
        return _unknown("gemini-interactions", f"{version}/interactions")
    return await relay(proxy, request, ProxiedCall("gemini-interactions", upstream,
                                                   f"/{version}/interactions", "create"))


@router.get("/proxy/{upstream}/{version}/interactions/{interaction_id}",
            summary="Gemini Interactions: get, or resume its stream")
async def get_interaction(upstream: str, version: str, interaction_id: str, request: Request,
                          proxy: RunningProxy) -> Response:
    if version not in VERSIONS:
        return _unknown("gemini-interactions", f"{version}/interactions/{interaction_id}")
    what: What = "resume" if request.query_params.get("stream") == "true" else "poll"
    return await relay(proxy, request, ProxiedCall(
        "gemini-interactions", upstream, f"/{version}/interactions/{interaction_id}", what,
        object_id=interaction_id))


@router.post("/proxy/{upstream}/{version}/interactions/{interaction_id}/cancel",
             summary="Gemini Interactions: cancel")
@router.post("/proxy/{upstream}/{version}/interactions/{interaction_id}",
             summary="Gemini Interactions: cancel ({id}:cancel)", include_in_schema=False)
async def cancel_interaction(upstream: str, version: str, interaction_id: str,
                             request: Request, proxy: RunningProxy) -> Response:
    path = request.url.path
    if version not in VERSIONS or not path.endswith(("/cancel", ":cancel")):
        return _unknown("gemini-interactions", f"{version}/interactions/{interaction_id}")
    object_id = interaction_id.removesuffix(":cancel")
    suffix = "/cancel" if path.endswith("/cancel") else ":cancel"
    return await relay(proxy, request, ProxiedCall(
        "gemini-interactions", upstream, f"/{version}/interactions/{object_id}{suffix}",
        "cancel", object_id=object_id))
