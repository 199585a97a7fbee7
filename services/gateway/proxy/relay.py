"""One proxied request: checked, sent upstream, its answer relayed byte for byte and teed.

    await relay(hub, request, ProxiedCall("openai-responses", "openai", "/v1/responses",
                                          "create"))

Before anything is sent, in this order, each answered in the provider's error shape
(``errors.py``): an unknown upstream (404), the caller's token and tenant (401/403,
``identity.py``), a run id another tenant owns (400), a fail-closed tenant while Kafka is
unreachable (503, ``FrameTee.accepting``), ``max_calls_in_flight`` proxied calls at once (429),
the tenant's limits (429, ``limits.py``: tokens per day, calls in flight, requests per minute),
a target the capability manifest says lacks what the request needs (400, ``requirements.py``).

Then the request goes upstream as the client sent it (body untouched, headers: ``headers.py``)
and the answer comes back with the upstream's status and headers; every chunk is written to the
client as it arrives and only then cut into frames (``framer.py``) and offered to the tee — the
client never waits for Kafka. The proxy does not retry: the client's SDK does, as against the
provider. A create call opens its run in the background once the answer's first chunk is
relayed (``ProxyHub.open_run``: the id's claim and the input packet). Follow-ups (retrieve, resume, cancel) are teed to the run that created
the object; their error answers are not (the run did not fail because a poll did), a create
call's are. A stream that ends, or is cut where it cannot be resumed, is followed by the
end-of-stream marker; a resumable one cut midway is not (the client resumes it).
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import httpx
import orjson
from fastapi import Request
from starlette.responses import Response, StreamingResponse

from modelevents.adapters.registry import api_facts
from modelevents.schemas.end_of_input import end_of_input
from modelevents.schemas.frames import ProviderFrame
from modelevents.services.errors import KafkaUnavailable
from modelevents.services.gateway.problems import ProblemCode
from modelevents.services.gateway.proxy.errors import provider_error
from modelevents.services.gateway.proxy.framer import Framer, Framing
from modelevents.services.gateway.proxy.headers import (
    BUNDLE,
    RUN_ID,
    request_headers,
    response_headers,
)
from modelevents.services.gateway.proxy.hub import ProxyHub, Target
from modelevents.services.gateway.proxy.identity import Refused, asked_run_id, caller_tenant
from modelevents.services.gateway.proxy.limits import Slot
from modelevents.services.gateway.proxy.requirements import refusal

__all__ = ["ProxiedCall", "What", "relay"]

log = logging.getLogger("modelevents.gateway.proxy")

What = Literal["create", "poll", "resume", "cancel"]
# A provider object id as it may stand in an upstream path (no "/", not "." or "..").
_OBJECT_ID = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9._:\-]{0,255}")
# Whole-body frames name what they answered: "{stream}:{what}".
_BODY_NAMES = {"create": "create", "poll": "poll", "resume": "poll", "cancel": "cancel"}
# Frames of a stream looked at for the provider object's id (it comes in the first event).
_ID_FRAMES = 3


@dataclass(frozen=True)
class ProxiedCall:
    """What a route asks: the API, the upstream's name, the provider path, what it does."""

    api: str
    upstream: str
    path: str  # the provider's path, with its version (/v1/responses)
    what: What
    object_id: str | None = None  # follow-ups: the provider object they read or cancel
    model: str | None = None  # where the path names it (Gemini)
    array_stream: bool = False  # Gemini streamGenerateContent without alt=sse: a JSON array


async def relay(hub: ProxyHub, request: Request, call: ProxiedCall) -> Response:
    api = call.api
    target = hub.upstream(call.upstream)
    if target is None:
        return provider_error(api, ProblemCode.not_found,
                              f"modelevents gateway: no upstream named {call.upstream!r}; it has "
                              f"{', '.join(hub.upstream_names()) or 'none'} (proxy.upstreams and "
                              "providers in its config)")
    try:
        if call.object_id is not None and not _OBJECT_ID.fullmatch(call.object_id):
            raise Refused(ProblemCode.invalid_id, f"{call.object_id[:60]!r} is not an object id")
        tenant = caller_tenant(hub.gateway.config, request.headers)
        run_id, fresh = _run_of(hub, request, call, tenant)
    except Refused as exc:
        return provider_error(api, exc.code, exc.message, exc.headers)
    gateway = hub.gateway
    if not hub.tee.accepting(tenant):
        return provider_error(api, ProblemCode.kafka_unavailable,
                              f"modelevents gateway: Kafka is unreachable and tenant {tenant!r} "
                              "fails closed; nothing was sent to the provider — retry shortly")
    if hub.in_flight >= gateway.config.max_calls_in_flight:
        return provider_error(api, ProblemCode.busy,
                              f"modelevents gateway: {gateway.config.max_calls_in_flight} calls "
                              "are in flight on this gateway; retry shortly")
    try:
        slot = hub.limiter.admit(tenant, create=call.what == "create")
    except Refused as exc:
        return provider_error(api, exc.code, exc.message, exc.headers)
    try:
        answer = await _sent(hub, request, call, target, tenant, run_id, fresh, slot)
    except BaseException:
        slot.release()
        raise
    if not isinstance(answer, StreamingResponse):  # refused before anything was in flight
        slot.release()
    return answer


async def _sent(hub: ProxyHub, request: Request, call: ProxiedCall, target: Target,
                tenant: str, run_id: str, fresh: bool, slot: Slot) -> Response:
    """The call sent upstream and its answer relayed (``slot`` released when it ends), or
    the gateway's refusal."""
    api = call.api
    gateway = hub.gateway
    body = await request.body() if request.method == "POST" else b""
    doc = _json_object(body)
    model = call.model or (doc.get("model") if doc is not None else None)
    model = model if isinstance(model, str) else None
    bundle = request.headers.get(BUNDLE) if call.what == "create" else None
    if bundle is not None:
        mismatch = await _bundle_refusal(hub, bundle, target.provider(api), api, model)
        if mismatch is not None:
            return mismatch
    if call.what == "create" and doc is not None:
        refused = refusal(gateway.manifest, target.provider(api), api, model, doc)
        if refused is not None:
            return provider_error(api, ProblemCode.capability_rejected,
                                  "modelevents gateway: the capability router refused the "
                                  f"request: {refused.describe()}")
    sent = _upstream_request(gateway.http, request, target, call, body, tenant)
    try:
        response = await gateway.http.send(sent, stream=True)
    except httpx.TransportError as exc:
        # The upstream's address and the error stay in the gateway's log, not the answer.
        log.warning("proxy: upstream %s (%s) could not be reached: %r", target.name,
                    target.base_url, exc)
        return provider_error(api, ProblemCode.provider_error,
                              f"modelevents gateway: upstream {target.name} could not be reached")
    tag = f"x{secrets.token_hex(5)}"
    if call.what == "create":
        # In the background (a task), but before the first chunk is relayed: a replica that
        # reads the call's object id must find its run (test_proxy_replicas.py).
        correlation_id = request.headers.get("x-correlation-id")
        hub.open_run(run_id, tenant, fresh=fresh, packet=lambda: _packet(
            hub, request.method, call, doc, run_id=run_id, tenant=tenant, tag=tag,
            provider=target.provider(api), model=model, correlation_id=correlation_id,
            bundle=bundle))
    framer = _framer(call, response, run_id=run_id, tenant=tenant, tag=tag,
                     provider=target.provider(api), bundle=bundle)
    resumable = _resumable(call, doc)
    relayed = StreamingResponse(_relayed(hub, call, response, framer, tenant, run_id, resumable,
                                         slot),
                                status_code=response.status_code)
    relayed.raw_headers = response_headers(response.headers.raw)
    if run_id != call.object_id:  # else the worker finds the object's run: not known here
        relayed.raw_headers.append((RUN_ID.encode(), run_id.encode()))
    return relayed


async def _bundle_refusal(hub: ProxyHub, bundle_id: str, provider: str, api: str,
                          model: str | None) -> Response | None:
    """The refusal of a create call under bundle ``bundle_id`` (x-modelevents-bundle) whose
    bundle is unknown or names another target; None: it runs under it. The body is the
    provider's own, so only the target is checked (the instructions, tools and sampling are
    the application's to send as the bundle says)."""
    try:
        stored = await hub.gateway.bundles.find(bundle_id, hub.gateway.config.ack_timeout_s)
    except KafkaUnavailable as exc:
        return provider_error(api, ProblemCode.kafka_unavailable,
                              f"modelevents gateway: {exc}; nothing was sent to the provider")
    if stored is None:
        return provider_error(api, ProblemCode.unknown_bundle,
                              f"modelevents gateway: no bundle {bundle_id[:80]!r} on the bundles "
                              "topic (`modelevents bundle list`); nothing was sent")
    want = stored.bundle.target
    wrong = [f"{name} {given!r} (the bundle's: {wanted!r})" for name, given, wanted in (
        ("provider", provider, want.provider), ("api", api, want.api),
        ("model", model, want.model)) if given != wanted]
    if wrong:
        return provider_error(api, ProblemCode.bundle_mismatch,
                              f"modelevents gateway: the call contradicts bundle {bundle_id} in "
                              f"{', '.join(wrong)}; nothing was sent")
    return None


def _run_of(hub: ProxyHub, request: Request, call: ProxiedCall, tenant: str
            ) -> tuple[str, bool]:
    """The run the call's frames belong to, and whether its id is new (made up here)."""
    asked = asked_run_id(request.headers)
    gateway = hub.gateway
    if asked is not None and gateway.owner_of(asked) not in (None, tenant):
        raise Refused(ProblemCode.run_not_found,
                      f"run id {asked!r} is another tenant's; send another {RUN_ID} (or none)")
    if call.what == "create":
        if asked is None:
            return f"run_{secrets.token_hex(12)}", True
        return asked, False
    object_id = call.object_id or ""
    known = hub.run_of_object(object_id)
    if known is not None and known[1] != tenant:
        raise Refused(ProblemCode.not_found, f"no object {object_id!r} of this tenant")
    if asked is not None:
        return asked, False
    if known is not None:
        return known[0], False
    # Another process's call: the runs' states name its object; else the worker resolves the
    # object id to its run (as it does a webhook's).
    return gateway.run_of_object(object_id, tenant) or object_id, False


def _json_object(body: bytes) -> dict[str, Any] | None:
    if not body:
        return None
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None  # sent as it is: the upstream answers it
    return doc if isinstance(doc, dict) else None


def _upstream_request(client: httpx.AsyncClient, request: Request, target: Target,
                      call: ProxiedCall, body: bytes, tenant: str) -> httpx.Request:
    url = target.base_url + call.path
    if request.url.query:
        url += "?" + request.url.query
    key = target.key_for(tenant)
    # Gemini takes the key in the query as well (?key=): the client's own then.
    keyed = "key" in request.query_params
    gateway_key = api_facts(call.api).auth_headers(key) if key and not keyed else {}
    headers = request_headers(request.headers.items(), gateway_key)
    return client.build_request(request.method, url, content=body or None, headers=headers)


def _framer(call: ProxiedCall, response: httpx.Response, *, run_id: str, tenant: str,
            tag: str, provider: str, bundle: str | None = None) -> Framer | None:
    status = response.status_code
    if status >= 400 and call.what != "create":
        return None  # a poll or cancel that failed says nothing of the run
    content_type = response.headers.get("content-type", "")
    framing: Framing
    if content_type.startswith("text/event-stream"):
        framing = "sse"
    elif call.array_stream and status < 400:
        framing = "json-array"
    else:
        framing = "json"
    what = "error" if status >= 400 else _BODY_NAMES[call.what]
    return Framer(framing, run_key=run_id, provider=provider, api=call.api, tenant=tenant,
                  stream_id=f"{tag}.{'p' if framing == 'json' else 's'}0", what=what,
                  status=status, headers=dict(response.headers),
                  content_encoding=response.headers.get("content-encoding", ""),
                  bundle=bundle)


def _resumable(call: ProxiedCall, doc: dict[str, Any] | None) -> bool:
    """Whether a cut stream of this call can be taken up by the client (so it is not ended)."""
    follow_up = api_facts(call.api).follow_up
    if follow_up.resume_param is None:
        return False
    if call.what == "resume":
        return True
    return not follow_up.resume_background_only or bool(doc and doc.get("background"))


def _packet(hub: ProxyHub, method: str, call: ProxiedCall, doc: dict[str, Any] | None,
            *, run_id: str, tenant: str, tag: str, provider: str, model: str | None,
            correlation_id: str | None, bundle: str | None = None) -> Any:
    if doc is None:
        return None
    native = {"method": method, "path": call.path, "body": doc}
    return hub.gateway.packets.native_packet(
        native, run_id=run_id, tenant=tenant, call=tag, provider=provider, api=call.api,
        model=model or "", correlation_id=correlation_id, bundle=bundle)


async def _relayed(hub: ProxyHub, call: ProxiedCall, response: httpx.Response,
                   framer: Framer | None, tenant: str, run_id: str, resumable: bool,
                   slot: Slot) -> AsyncIterator[bytes]:
    """The upstream's body, chunk by chunk as it arrives; each chunk teed after it is sent."""
    tee = hub.tee
    learner = _ObjectLearner(hub, call, run_id, tenant) if framer is not None else None
    last: ProviderFrame | None = None
    ended = False
    hub.in_flight += 1
    try:
        async for chunk in response.aiter_raw():
            yield chunk
            if framer is not None:
                frames = framer.feed(chunk)
                if frames:
                    last = frames[-1]
                    if learner is not None and learner.looking:
                        learner.look(frames)
                    tee.offer(frames, tenant)
        ended = True
    except httpx.TransportError as exc:
        log.warning("proxy: run %s: the upstream %s cut the answer: %r", run_id, call.path, exc)
        raise  # the client's connection is cut as well: it sees what a cut looks like
    finally:
        hub.in_flight -= 1
        slot.release()
        await response.aclose()
        if framer is not None:
            frames = framer.close() if ended else []
            if frames:
                last = frames[-1]
                if learner is not None and learner.looking:
                    learner.look(frames)
            if last is not None and last.transport == "sse" and (ended or not resumable):
                frames.append(end_of_input(last, "stream"))
            tee.offer(frames, tenant)


class _ObjectLearner:
    """Learns the provider object a create call made (its first frames name it), so that its
    retrieve, resume and cancel calls are teed to the same run."""

    def __init__(self, hub: ProxyHub, call: ProxiedCall, run_id: str, tenant: str) -> None:
        facts = api_facts(call.api)
        self.hub, self.run_id, self.tenant = hub, run_id, tenant
        self.key = facts.stream_object_key
        self.looking = call.what == "create" and facts.follow_up.get is not None
        self.seen = 0

    def look(self, frames: list[ProviderFrame]) -> None:
        for frame in frames:
            self.seen += 1
            try:
                doc = orjson.loads(frame.body)
            except orjson.JSONDecodeError:
                doc = None
            if isinstance(doc, dict) and frame.transport == "sse" and self.key:
                doc = doc.get(self.key)
            object_id = doc.get("id") if isinstance(doc, dict) else None
            if isinstance(object_id, str) and object_id:
                self.hub.learned(object_id, self.run_id, self.tenant)
                self.looking = False
                return
            if self.seen >= _ID_FRAMES:
                self.looking = False
                return
