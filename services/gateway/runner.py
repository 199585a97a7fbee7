"""One provider call of a run started by the gateway: send it, read it, publish every frame.

A :class:`ProviderCall` is what the router and the renderer decided (provider, API, model, the
wire body). :class:`CallRunner` carries it out and writes what the provider sends to ``frames``,
keyed by the run id, exactly as received (one frame per SSE event, or the whole object of a poll):

- **Streaming** (``background=False``): POST with ``stream: true``; each SSE event becomes a frame
  ``s<n>:<index>``. A local adapter of the same API follows the frames (adapters are pure and
  cheap) to learn the provider object id, the cursor and whether the provider's terminal event
  came. A stream cut before that is **resumed** where the API allows it (OpenAI Responses
  ``starting_after`` for background responses; Interactions ``last_event_id``) as stream
  ``s<n+1>``; the overlap is dropped by the adapters downstream (frames are deduplicated by the
  provider's sequence number / event id, not by bytes: openai.md §9 says replays are
  re-serialised). Where resuming is impossible, the object is read back once if the API has a
  GET; failing that the run ends with the adapter's ``stream_truncated`` error — never a success.
- **Background** (``background=True``, OpenAI Responses and Interactions): POST without streaming
  returns the queued object (a ``poll`` frame); then GET with exponential backoff until the
  status is terminal or ``terminal_timeout`` passed. After a timeout the object is read once more
  (the authoritative state) before anything else is decided, and the run is left as the
  provider says (queued/in progress: the caller may cancel or poll again), never marked failed
  on a guess.
- **Cancel**: POST to the provider's cancel endpoint; the provider's answer (and the following
  polls) are published as ``poll`` frames, so the run ends ``cancelled`` only when the provider
  says so.

Every published frame waits for Kafka's acknowledgement (acks=all) before the call is reported
done; the end of the call is marked with the end-of-stream and end-of-run markers the processor
knows (``services/normalizer.py``), so an unfinished stream becomes a truncation error downstream.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from modelevents.adapters.registry import ADAPTERS
from modelevents.adapters.sse import SSEDecoder
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.adapters.requests import WireRequest
from modelevents.services.gateway.provider_http import (
    FOLLOW_UPS,
    ProviderHTTPError,
    json_request,
    send,
)
from modelevents.services.normalizer import end_of_input

__all__ = ["CallRunner", "ProviderCall", "CallOutcome"]

log = logging.getLogger("modelevents.gateway.runner")

TERMINAL_OBJECT_STATUS = frozenset({"completed", "failed", "cancelled", "incomplete",
                                    "requires_action", "budget_exceeded", "expired"})
MAX_RESUMES = 5


@dataclass(frozen=True)
class ProviderCall:
    run_id: str
    tenant: str
    wire: WireRequest  # rendered for streaming, or for a background create
    background: bool = False
    base_url: str = ""
    api_key: str | None = None  # plain text only here, in memory; never logged or published

    @property
    def provider(self) -> str:
        return self.wire.provider

    @property
    def api(self) -> str:
        return self.wire.api

    @property
    def model(self) -> str:
        return self.wire.model


@dataclass
class CallOutcome:
    """What the gateway saw of a call (the authoritative run state is on ``runs``)."""

    object_id: str | None = None
    streams: int = 0
    frames: int = 0
    resumed: int = 0
    completed: bool = False  # the provider's terminal event / terminal status was seen
    status: str | None = None  # last object status seen (background calls)
    error: str | None = None
    notes: list[str] = field(default_factory=list)


Publish = Callable[[list[ProviderFrame]], Any]  # async: publish frames, wait for their acks


class CallRunner:
    """Carries out one :class:`ProviderCall` (see the module docstring)."""

    def __init__(self, call: ProviderCall, client: httpx.AsyncClient, publish: Publish, *,
                 poll_initial: float = 0.5, poll_max: float = 10.0,
                 terminal_timeout: float = 600.0, attempts: int = 4, backoff: float = 0.5) -> None:
        self.call = call
        self.follow_up = FOLLOW_UPS[call.api]
        self.client = client
        self._publish = publish
        self.poll_initial, self.poll_max = poll_initial, poll_max
        self.terminal_timeout = terminal_timeout
        self.attempts, self.backoff = attempts, backoff
        self.outcome = CallOutcome()
        self._adapter = ADAPTERS[call.api](call.run_id, tenant=call.tenant, provider=call.provider)
        self._cursor: str | None = None
        self._last: ProviderFrame | None = None
        self._polls = 0
        self.cancel_requested = asyncio.Event()

    # --- what the gateway calls -----------------------------------------------------------

    async def run(self) -> CallOutcome:
        try:
            if self.call.background:
                await self._background()
            else:
                await self._stream()
        except ProviderHTTPError as exc:
            self.outcome.error = str(exc)
            await self._publish_error_body(exc)
        except httpx.TransportError as exc:
            self.outcome.error = f"{self.call.provider} unreachable: {exc!r}"
            log.warning("run %s: %s", self.call.run_id, self.outcome.error)
        finally:
            await self._end()
        return self.outcome

    async def cancel(self) -> dict[str, Any] | None:
        """Ask the provider to cancel; its answer is published as a poll frame."""
        if self.follow_up.cancel is None or self.outcome.object_id is None:
            return None
        self.cancel_requested.set()
        url = self._url(self.follow_up.cancel.format(id=self.outcome.object_id))
        request = json_request(self.client, "POST", url, provider=self.call.provider,
                               api_key=self.call.api_key)
        response = await send(self.client, request, provider=self.call.provider,
                              attempts=self.attempts, backoff=self.backoff)
        await self._publish_object(response, "cancel")
        try:
            return orjson.loads(response.content)
        except orjson.JSONDecodeError:
            return None

    # --- streaming --------------------------------------------------------------------------

    async def _stream(self) -> None:
        request = self._create_request(stream=True)
        while True:
            cut = await self._read_stream(request)
            if self.outcome.completed or not cut:
                return
            resume = self._resume_request()
            if resume is None:
                await self._read_back("the stream was cut and this API cannot resume it")
                return
            self.outcome.resumed += 1
            if self.outcome.resumed > MAX_RESUMES:
                self.outcome.notes.append(f"gave up after {MAX_RESUMES} resumes")
                return
            log.info("run %s: stream cut at cursor %s; resuming", self.call.run_id, self._cursor)
            request = resume

    async def _read_stream(self, request: httpx.Request) -> bool:
        """Read one stream; True when it was cut (ended without the terminal event)."""
        stream_id = f"s{self.outcome.streams}"
        self.outcome.streams += 1
        response = await send(self.client, request, provider=self.call.provider, stream=True,
                              attempts=self.attempts, backoff=self.backoff)
        try:
            if response.status_code >= 400:
                await response.aread()
                raise ProviderHTTPError(self.call.provider, response.status_code,
                                        response.content, str(request.url))
            decoder = SSEDecoder()
            index = 0
            try:
                async for chunk in response.aiter_raw():
                    frames = [self._frame(stream_id, index + n, m.event, m.data, m.id)
                              for n, m in enumerate(decoder.feed(chunk))]
                    index += len(frames)
                    await self._emit(frames)
                await self._emit([self._frame(stream_id, index + n, m.event, m.data, m.id)
                                  for n, m in enumerate(decoder.close())])
            except httpx.TransportError as exc:
                self.outcome.notes.append(f"{stream_id} cut after {index} frames: {exc!r}")
                return not self.outcome.completed
        finally:
            await response.aclose()
        return not self.outcome.completed

    def _resume_request(self) -> httpx.Request | None:
        follow_up = self.follow_up
        if follow_up.resume_param is None or self.outcome.object_id is None or self._cursor is None:
            return None
        url = self._url(follow_up.get.format(id=self.outcome.object_id))  # type: ignore[union-attr]
        return json_request(self.client, "GET", url, provider=self.call.provider,
                            api_key=self.call.api_key, stream=True,
                            headers=self.call.wire.endpoint.headers,
                            params={"stream": "true", follow_up.resume_param: self._cursor})

    async def _read_back(self, why: str) -> None:
        if self.follow_up.get is None or self.outcome.object_id is None:
            self.outcome.notes.append(f"{why}; the run ends truncated")
            return
        self.outcome.notes.append(f"{why}; read the object back")
        await self._poll_once()

    # --- background ---------------------------------------------------------------------------

    async def _background(self) -> None:
        request = self._create_request(stream=False)
        response = await send(self.client, request, provider=self.call.provider,
                              attempts=self.attempts, backoff=self.backoff)
        await self._publish_object(response, "create")
        deadline = time.monotonic() + self.terminal_timeout
        delay = self.poll_initial
        while self.outcome.status not in TERMINAL_OBJECT_STATUS:
            if time.monotonic() >= deadline:
                # The authoritative state before anything else is decided (openai.md §9: a
                # response can sit in queued for a long time).
                await self._poll_once()
                if self.outcome.status not in TERMINAL_OBJECT_STATUS:
                    self.outcome.notes.append(
                        f"no terminal status after {self.terminal_timeout:.0f} s; the provider "
                        f"says {self.outcome.status!r}: cancel the run or poll again")
                return
            try:
                await asyncio.wait_for(self.cancel_requested.wait(), delay)
                delay = self.poll_initial  # after a cancel, look soon
                self.cancel_requested.clear()
            except TimeoutError:
                delay = min(self.poll_max, delay * 2)
            await self._poll_once()

    async def _poll_once(self) -> None:
        url = self._url(self.follow_up.get.format(id=self.outcome.object_id))  # type: ignore[union-attr]
        request = json_request(self.client, "GET", url, provider=self.call.provider,
                               api_key=self.call.api_key)
        response = await send(self.client, request, provider=self.call.provider,
                              attempts=self.attempts, backoff=self.backoff)
        await self._publish_object(response, "poll")

    async def _publish_object(self, response: httpx.Response, what: str) -> None:
        self._polls += 1
        frame = ProviderFrame(
            frame_id=f"p{self._polls}:{what}", run_key=self.call.run_id,
            provider=self.call.provider, api=self.call.api, transport="poll",
            received_at=_now_ms(), content_type="application/json", body=response.content,
            tenant=self.call.tenant, stream_id=f"p{self._polls}", index=0,
            headers=_kept_headers(response), http_status=response.status_code)
        await self._emit([frame])
        if response.status_code >= 400:
            raise ProviderHTTPError(self.call.provider, response.status_code, response.content,
                                    str(response.request.url))
        try:
            doc = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            return
        if isinstance(doc, dict):
            self.outcome.object_id = self.outcome.object_id or doc.get("id")
            status = doc.get("status")
            if isinstance(status, str):
                self.outcome.status = status
                self.outcome.completed = status in TERMINAL_OBJECT_STATUS

    async def _publish_error_body(self, exc: ProviderHTTPError) -> None:
        """An error answer is output too: the adapters translate HTTP error bodies."""
        if not exc.body:
            return
        self._polls += 1
        frame = ProviderFrame(
            frame_id=f"p{self._polls}:error", run_key=self.call.run_id,
            provider=self.call.provider, api=self.call.api, transport="poll",
            received_at=_now_ms(), content_type="application/json", body=exc.body,
            tenant=self.call.tenant, stream_id=f"p{self._polls}", index=0,
            http_status=exc.status)
        try:
            await self._emit([frame])
        except Exception:  # noqa: BLE001 - already failing; the error is reported by run()
            log.warning("run %s: could not publish the error answer", self.call.run_id)

    # --- frames -----------------------------------------------------------------------------

    def _frame(self, stream_id: str, index: int, event: str | None, data: bytes,
               sse_id: str | None) -> ProviderFrame:
        return ProviderFrame(
            frame_id=f"{stream_id}:{index}", run_key=self.call.run_id, provider=self.call.provider,
            api=self.call.api, transport="sse", received_at=_now_ms(),
            content_type="text/event-stream", body=data, tenant=self.call.tenant,
            stream_id=stream_id, index=index, sse_event=event, cursor=sse_id)

    async def _emit(self, frames: list[ProviderFrame]) -> None:
        if not frames:
            return
        for frame in frames:
            self._follow(frame)
        await self._publish(frames)
        self.outcome.frames += len(frames)
        self._last = frames[-1]

    def _follow(self, frame: ProviderFrame) -> None:
        """Learn the object id, cursor and completion from the frame, as the adapter reads it."""
        events: list[ModelEvent] = self._adapter.feed(frame)
        for event in events:
            object_id = getattr(event.payload, "provider_object_id", None)
            if event.kind == "run.started" and object_id:
                self.outcome.object_id = self.outcome.object_id or object_id
        if frame.transport == "sse":
            cursor = _cursor_of(self.call.api, frame)
            if cursor is not None:
                frame.cursor = self._cursor = cursor
            self.outcome.completed = self.outcome.completed or self._adapter.stream_complete

    async def _end(self) -> None:
        if self._last is None:
            return
        markers = [end_of_input(self._last, "stream"), end_of_input(self._last, "run")]
        markers[1].frame_id = f"{self.call.run_id}:end-of-run"
        try:
            await self._publish(markers)
        except Exception:  # noqa: BLE001 - the frames are there; a truncation will show
            log.warning("run %s: could not publish the end-of-run markers", self.call.run_id)

    # --- helpers ----------------------------------------------------------------------------

    def _create_request(self, *, stream: bool) -> httpx.Request:
        endpoint = self.call.wire.endpoint
        return json_request(self.client, endpoint.method, self._url(endpoint.path),
                            provider=self.call.provider, api_key=self.call.api_key,
                            body=self.call.wire.body, params=endpoint.query or None,
                            headers=endpoint.headers, stream=stream)

    def _url(self, path: str) -> str:
        return self.call.base_url.rstrip("/") + path


def _cursor_of(api: str, frame: ProviderFrame) -> str | None:
    """The provider's resume cursor of a stream frame (openai.md §9: ``sequence_number``;
    gemini.md A2: the event id — the SSE ``id`` when the stream sets one)."""
    if api == "openai-responses":
        try:
            seq = orjson.loads(frame.body).get("sequence_number")
        except (orjson.JSONDecodeError, AttributeError):
            return None
        return str(seq) if isinstance(seq, int) else None
    if api == "gemini-interactions":
        if frame.cursor:
            return frame.cursor
        try:
            event_id = orjson.loads(frame.body).get("event_id")
        except (orjson.JSONDecodeError, AttributeError):
            return None
        return event_id if isinstance(event_id, str) and event_id else None
    return frame.cursor


def _kept_headers(response: httpx.Response) -> dict[str, str]:
    return {name: response.headers[name] for name in ("x-request-id", "request-id")
            if name in response.headers}


def _now_ms() -> int:
    return int(time.time() * 1000)
