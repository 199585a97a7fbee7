"""The drop-in proxy's Claude route: Messages, streamed or not.

    POST /proxy/{upstream}/v1/messages      Claude Messages (``?beta=true`` passes through)

An ``anthropic`` client takes ``base_url="http://<gateway>/proxy/anthropic"``; everything else is
as against the provider (docs/drop-in.md). The body is relayed untouched
(``services/gateway/proxy/relay.py``).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from modelevents.services.gateway.proxy.hub import RunningProxy
from modelevents.services.gateway.proxy.relay import ProxiedCall, relay

__all__ = ["router"]

router = APIRouter(tags=["drop-in proxy"])


@router.post("/proxy/{upstream}/v1/messages", summary="Claude Messages: create",
             openapi_extra={"requestBody": {"content": {"application/json": {
                 "schema": {"type": "object"}}}, "description": "the provider's own body"}})
async def create_message(upstream: str, request: Request, proxy: RunningProxy) -> Response:
    return await relay(proxy, request, ProxiedCall("anthropic-messages", upstream,
                                                   "/v1/messages", "create"))
