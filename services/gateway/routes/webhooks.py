"""``POST /webhooks/{provider}[/{tenant}]``: signed provider webhooks in, frames on Kafka out.

Follows the Standard Webhooks specification as OpenAI implements it (OpenAI Webhooks guide;
checked against the OpenAI Python library's own test vector) and as Gemini signs its static
webhooks (Gemini Webhooks guide): headers ``webhook-id``, ``webhook-timestamp`` (unix
seconds), ``webhook-signature`` (a space-separated list of ``v1,<base64>``); the signed content is ``{id}.{timestamp}.{raw body}``,
HMAC-SHA256 with the secret's key (``whsec_<base64>`` decoded, any other string as UTF-8 bytes).

A delivery is checked (size, headers, signature against every secret of the tenant), written
verbatim as one frame with acks=all, and answered 200 only once Kafka acknowledged it.

More on this module: docs/gateway-api.md, ``services/gateway/routes/webhooks.py``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import time
from collections.abc import Mapping
from typing import Any

import orjson
from aiokafka.errors import KafkaError, MessageSizeTooLargeError, RecordTooLargeError
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from modelevents.adapters.registry import webhook_api
from modelevents.schemas.errors import ModelEventsError
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.ids import MAX_ID_LENGTH, is_valid_id
from modelevents.services.errors import KafkaUnavailable, WebhookRejected
from modelevents.services.gateway.calls.fetch import FetchJob, fetch_target
from modelevents.services.gateway.config import WEBHOOK_PROVIDERS
from modelevents.services.gateway.dependencies import RunningGateway
from modelevents.services.gateway.errors import problem_of
from modelevents.services.gateway.inputs.deliveries import Deliveries
from modelevents.services.gateway.inputs.webhook_limits import KEPT_VALUE_CAPS
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode
from modelevents.services.gateway.state import Gateway
from modelevents.services.kafka.clients import await_acks, send_frame

__all__ = ["router", "WebhookRejected", "accept_delivery", "serve_delivery", "verify_signature",
           "webhook_object"]

log = logging.getLogger("modelevents.gateway.webhooks")

router = APIRouter(tags=["webhooks"])

KEPT_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature", "user-agent")
# A refused delivery's code, by the status its WebhookRejected names.
REJECTED = {400: ProblemCode.malformed_request, 401: ProblemCode.signature_rejected,
            413: ProblemCode.body_too_large, 431: ProblemCode.header_too_large}


def verify_signature(headers: Mapping[str, str], body: bytes, keys: list[bytes], *,
                     tolerance_s: int, now: float | None = None) -> tuple[str, str]:
    """Standard Webhooks verification (Standard Webhooks specification); ``(webhook_id, timestamp)`` or
    :class:`WebhookRejected`. ``headers`` are looked up by lower-case name."""
    for name in ("webhook-signature", "webhook-timestamp", "webhook-id"):
        if not headers.get(name):
            raise WebhookRejected(400, f"missing the {name} header: this endpoint accepts "
                                       "Standard Webhooks deliveries only")
    webhook_id = headers["webhook-id"]
    timestamp = headers["webhook-timestamp"]
    # The webhook-id becomes the frame_id, and maybe the run key: an id (schemas/ids.py).
    if not is_valid_id(webhook_id):
        raise WebhookRejected(400, f"webhook-id is not an id: 1 to {MAX_ID_LENGTH} characters "
                                   "of ASCII letters, digits and . _ : -")
    try:
        sent_at = int(timestamp)  # int() tolerates spaces and leading zeros, as the SDK does
    except ValueError:
        raise WebhookRejected(400, "invalid webhook-timestamp: expected unix seconds") from None
    now = time.time() if now is None else now
    if now - sent_at > tolerance_s:
        raise WebhookRejected(401, f"webhook-timestamp too old (more than {tolerance_s} s ago)")
    if sent_at > now + tolerance_s:
        raise WebhookRejected(401, f"webhook-timestamp too new (more than {tolerance_s} s ahead)")
    # The original timestamp text is what was signed.
    signed = b"%s.%s.%s" % (webhook_id.encode(), timestamp.encode(), body)
    offered = [token.removeprefix("v1,").encode() for token in headers["webhook-signature"].split()]
    for key in keys:
        expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest())
        # Every offered signature is compared (no early exit), each in constant time.
        if any([hmac.compare_digest(expected, token) for token in offered]):
            return webhook_id, timestamp
    raise WebhookRejected(401, "no webhook-signature matches this tenant's webhook secrets")


def webhook_object(provider: str, doc: Any) -> tuple[str, str | None]:
    """``(event type, provider object id)`` a webhook payload names: where the id is, is the
    webhooks' fact of the API they are about (``Webhooks.object_id``; OpenAI Webhooks
    guide: ``data.id``)."""
    if not isinstance(doc, dict):
        return "", None
    event_type: str = doc["type"] if isinstance(doc.get("type"), str) else ""
    data = doc.get("data")
    if not isinstance(data, dict):
        return event_type, None
    facts = webhook_api(provider)
    object_id = facts.webhooks.object_id(data) if facts and facts.webhooks else data.get("id")
    return event_type, object_id if isinstance(object_id, str) and object_id else None


async def _read_limited(chunks, declared: str | None, limit: int) -> bytes:
    """The body from an async iterator of chunks, refused with 413 as soon as it is too big
    (before reading anything when Content-Length already says so)."""
    if declared is not None:
        try:
            too_big = int(declared) > limit
        except ValueError:
            raise WebhookRejected(400, "invalid Content-Length") from None
        if too_big:
            raise WebhookRejected(413, f"body of {declared} bytes exceeds the limit of {limit} "
                                       "bytes")
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise WebhookRejected(413, f"body exceeds the limit of {limit} bytes")
        parts.append(chunk)
    return b"".join(parts)


async def accept_delivery(gateway: Gateway, provider: str, tenant: str | None,
                          headers: Mapping[str, str], chunks) -> dict[str, Any]:
    """Everything a delivery gets (the module docstring's steps 1-6): the 200's JSON body, or a
    GatewayProblem. ``headers`` are looked up by lower-case name; ``chunks`` is an async
    iterator of the body's bytes. Raises KafkaUnavailable when Kafka did not acknowledge in
    time (→ 503)."""
    config = gateway.config
    if provider not in WEBHOOK_PROVIDERS:
        raise GatewayProblem(ProblemCode.not_found, f"no webhooks for provider {provider!r}; "
                             f"this gateway accepts {', '.join(WEBHOOK_PROVIDERS)}")
    tenant = tenant or config.default_tenant
    keys = gateway.webhook_keys(provider, tenant)
    if not keys:
        gateway.metrics.webhook_rejections.labels(provider, "404").inc()
        raise GatewayProblem(ProblemCode.not_found, (
            f"no {provider} webhook secrets configured for tenant {tenant!r}; add "
            f"providers.{provider}.webhook_secrets.{tenant} to the gateway config"))
    try:
        _check_kept_values(headers)
        body = await _read_limited(chunks, headers.get("content-length"), config.max_body_bytes)
        webhook_id, _ = verify_signature(headers, body, keys,
                                         tolerance_s=config.webhook_tolerance_s)
        delivery = deliveries_of(gateway).get((tenant, provider, webhook_id))
        if delivery is not None and delivery.answer is not None:
            return {"status": "duplicate", "frame_id": webhook_id}
        if delivery is None:
            frame, job = _frame_of(gateway, provider, tenant, webhook_id, headers, body)
            delivery = deliveries_of(gateway).begin(
                (tenant, provider, webhook_id), lambda: _send(gateway, frame, job))
        try:
            return await delivery.wait(config.ack_timeout_s)
        except TimeoutError:
            raise KafkaUnavailable(gateway.settings.bootstrap_servers,
                                   f"no acknowledgement within {config.ack_timeout_s:g} s; the "
                                   "delivery stays queued, and its retry is answered once Kafka "
                                   "acknowledges it") from None
    except WebhookRejected as exc:
        log.info("webhook %s/%s refused (%d): %s", provider, tenant, exc.status, exc.reason)
        gateway.metrics.webhook_rejections.labels(provider, str(exc.status)).inc()
        raise GatewayProblem(REJECTED[exc.status], exc.reason) from None


def deliveries_of(gateway: Gateway) -> Deliveries:
    """The gateway's deliveries in single flight (services/gateway/inputs/deliveries.py), made on first
    use when the app's lifespan did not (an app that includes ``router`` alone)."""
    deliveries = getattr(gateway, "deliveries", None)
    if deliveries is None:
        deliveries = Deliveries(gateway.config.dedupe_cache_size, gateway.config.dedupe_ttl_s)
        gateway.deliveries = deliveries
    return deliveries


def _check_kept_values(headers: Mapping[str, str]) -> None:
    # What the frame keeps is bounded, so that any accepted delivery fits one record
    # (inputs/webhook_limits.py); checked before the body is read or any signature computed.
    for name, cap in KEPT_VALUE_CAPS.items():
        if len(headers.get(name, "")) > cap:
            raise WebhookRejected(431, f"the {name} header is longer than {cap} characters; "
                                       "this endpoint accepts Standard Webhooks deliveries only")


def _frame_of(gateway: Gateway, provider: str, tenant: str, webhook_id: str,
              headers: Mapping[str, str], body: bytes) -> tuple[ProviderFrame, FetchJob | None]:
    """The delivery's frame, and the fetch its object needs (None: it names none to fetch)."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        doc = None
        log.warning("webhook %s/%s %s: signed body is not JSON; kept verbatim (the processor "
                    "reports it as malformed_frame)", provider, tenant, webhook_id)
    event_type, object_id = webhook_object(provider, doc)
    if object_id is not None and not is_valid_id(object_id):
        # Not an id: it could not key a run, and in a fetch URL it could change the path.
        log.warning("webhook %s/%s %s names object %r, which is not an id; keyed by the "
                    "webhook-id and not fetched", provider, tenant, webhook_id, object_id[:80])
        object_id = None
    # Keyed by the object's run when the gateway knows it: the delivery then lands on the run's
    # partition behind the run's own frames, whatever the processor has read of them yet.
    run_key = ((object_id and gateway.run_of_object(object_id, tenant)) or object_id
               or webhook_id)
    facts = webhook_api(provider)
    assert facts is not None  # WEBHOOK_PROVIDERS are the providers of APIs with webhooks
    frame = ProviderFrame(
        frame_id=webhook_id, run_key=run_key, provider=facts.provider, api=facts.api,
        transport="webhook", received_at=int(time.time() * 1000),
        content_type=headers.get("content-type") or "application/json", body=body,
        tenant=tenant, headers={h: headers[h] for h in KEPT_HEADERS if h in headers})
    job = (FetchJob(provider, tenant, facts.api, object_id, webhook_id, run_key)
           if object_id and fetch_target(facts.api, event_type, object_id) else None)
    return frame, job


async def _send(gateway: Gateway, frame: ProviderFrame, job: FetchJob | None) -> dict[str, Any]:
    """The delivery's one send: the frame queued and acknowledged, then the fetch scheduled —
    also when every request had given up waiting (the provider's retry finds it done)."""
    try:
        future = await send_frame(gateway.producer, gateway.settings, frame)
        meta = (await await_acks(gateway.settings, [future]))[0]
        gateway.count_written([frame])
    except (MessageSizeTooLargeError, RecordTooLargeError) as exc:
        raise _too_large(exc) from exc
    except ModelEventsError as exc:
        if isinstance(exc.__cause__, (MessageSizeTooLargeError, RecordTooLargeError)):
            raise _too_large(exc) from exc
        raise
    except KafkaError as exc:
        raise KafkaUnavailable(gateway.settings.bootstrap_servers, repr(exc)) from exc
    if job is not None and gateway.fetcher is not None:
        gateway.fetcher.schedule(job)
    return {"status": "accepted", "frame_id": frame.frame_id, "run_key": frame.run_key,
            "partition": meta.partition, "offset": meta.offset}


def _too_large(exc: Exception) -> WebhookRejected:
    # Cannot happen within the limits (inputs/webhook_limits.py); if it does, a retry never succeeds,
    # so it is a 413, not a 503.
    return WebhookRejected(413, f"Kafka refuses this delivery's frame as too large ({exc}); "
                                "lower max_body_bytes in the gateway config")


_OPENAPI = {
    "parameters": [
        {"name": name, "in": "header", "required": True, "schema": {"type": "string"},
         "description": text}
        for name, text in (
            ("webhook-id", "delivery id; the same across the provider's retries"),
            ("webhook-timestamp", "unix seconds; refused outside the tolerance window"),
            ("webhook-signature", "space-separated `v1,<base64 HMAC-SHA256>` signatures"))],
    "requestBody": {"required": True, "description": "the provider's payload, verbatim "
                    "(the signature covers these exact bytes)",
                    "content": {"application/json": {"schema": {"type": "object"}}}},
    "responses": {
        "200": {"description": "written to Kafka and acknowledged (or a recent duplicate)"},
        "400": {"description": "a Standard Webhooks header is missing or malformed"},
        "401": {"description": "bad signature or timestamp outside the tolerance"},
        "404": {"description": "unknown provider, or no webhook secrets for the tenant"},
        "408": {"description": "the body did not arrive within read_timeout_s"},
        "413": {"description": "body larger than max_body_bytes"},
        "431": {"description": "a kept header (signature, timestamp, user-agent, content-type) "
                               "longer than its cap"},
        "503": {"description": "Kafka unavailable: nothing acknowledged, retry later"},
    },
}


async def _receive(gateway: Gateway, request: Request, provider: str,
                   tenant: str | None) -> Response:
    return JSONResponse(await accept_delivery(gateway, provider, tenant, request.headers,
                                              request.stream()))


@router.post("/webhooks/{provider}", summary="Receive a provider webhook (default tenant)",
             openapi_extra=_OPENAPI, response_class=JSONResponse)
async def receive_webhook(request: Request, gateway: RunningGateway,
                          provider: str) -> Response:
    """A Standard Webhooks delivery from OpenAI (`openai`) or Gemini (`gemini`) for the default
    tenant: verified against the tenant's secrets, written verbatim to the frames topic, and
    acknowledged only after Kafka did (acks=all)."""
    return await _receive(gateway, request, provider, None)


@router.post("/webhooks/{provider}/{tenant}", summary="Receive a provider webhook for a tenant",
             openapi_extra=_OPENAPI, response_class=JSONResponse)
async def receive_tenant_webhook(request: Request, gateway: RunningGateway, provider: str,
                                 tenant: str) -> Response:
    """As `POST /webhooks/{provider}`, verified against the named tenant's secrets and stamped
    with that tenant."""
    return await _receive(gateway, request, provider, tenant)


async def serve_delivery(gateway: Gateway, scope: dict, receive: Any, send: Any) -> bool:
    """Serve ``POST /webhooks/{provider}[/{tenant}]`` as a bare ASGI exchange; False when the
    path has another shape (FastAPI's routing answers it then).

    The same :func:`accept_delivery` as the documented routes above, without FastAPI's
    middleware, routing, dependency solving and response classes, which cost more than the
    delivery itself: gateway CPU per delivery ~1.0 ms through FastAPI, ~0.35-0.45 ms here
    (bench/gateway.py, httptools). ``app.GatewayApp`` calls it first; the FastAPI routes stay
    for the OpenAPI document and for apps that include ``router`` without GatewayApp.
    """
    path = scope["path"]
    parts = path[len("/webhooks/"):].split("/")
    if not 1 <= len(parts) <= 2 or not all(parts):
        return False
    headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
    try:
        answer = await accept_delivery(gateway, parts[0], parts[1] if len(parts) == 2 else None,
                                       headers, _body_chunks(receive))
    except Exception as exc:  # answered as the app's handler answers it
        await problem_of(exc, f"POST {path}").response()(scope, receive, send)
        return True
    body = orjson.dumps(answer)
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})
    return True


async def _body_chunks(receive: Any):
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            # Cut off (by the client, or the app's edge: 408/413): no signature work on a part.
            raise WebhookRejected(400, "the body ended before it was complete")
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return
