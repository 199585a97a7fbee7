"""One provider call of a run started by the gateway: send it, read it, publish every frame.

A :class:`ProviderCall` is what the router and the renderer decided (provider, API, model, the
wire body, stream or not, background or not). :class:`CallRunner` carries it out and writes what
the provider sends to ``frames``, keyed by the run id, exactly as received (one frame per SSE
event, or the whole object of a poll). Frame ids start with the call's tag (``c<n>``, one per
provider call of the run), so the calls of one agentic turn never collide.

A stream that is cut is resumed where the API allows it, a background call is polled to its end,
and a run never ends as a success on a guess; every published frame waits for Kafka's
acknowledgement.

More on this module: docs/architecture.md, ``services/gateway/calls/runner.py``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from modelevents.adapters.errors import InputLimitError
from modelevents.adapters.registry import ADAPTERS, api_facts
from modelevents.adapters.requests import WireRequest
from modelevents.adapters.sse import SSEDecoder
from modelevents.schemas.end_of_input import end_of_input
from modelevents.schemas.errors import ModelEventsError
from modelevents.schemas.frames import BUNDLE_FRAME_HEADER, ProviderFrame
from modelevents.services.errors import FollowUpFailed, ProviderHTTPError
from modelevents.services.gateway.calls.http import json_request, send

__all__ = ["CallRunner", "ProviderCall", "CallOutcome", "CallTiming", "FollowUpFailed"]

log = logging.getLogger("modelevents.gateway.runner")

# Resumes in a row without progress (a resume that delivers frames starts the count again).
MAX_RESUMES = 5


@dataclass(frozen=True)
class ProviderCall:
    run_id: str
    tenant: str
    wire: WireRequest  # rendered for this call's stream/background mode
    call_tag: str = "c0"  # unique per provider call of the run: prefixes its frame ids
    stream: bool = True
    background: bool = False
    base_url: str = ""
    # Plain text only here, in memory; never logged (not in the repr) or published.
    api_key: str | None = field(default=None, repr=False)
    # The bundle the run is started under: on every frame of the call (BUNDLE_FRAME_HEADER),
    # where the adapters put it on run.started.
    bundle: str | None = None

    @property
    def provider(self) -> str:
        return self.wire.provider

    @property
    def log_fields(self) -> dict[str, str]:
        """``extra=`` of the log lines about this call (top-level fields of a JSON log line)."""
        return {"run_id": self.run_id, "tenant": self.tenant, "provider": self.provider}

    @property
    def api(self) -> str:
        return self.wire.api

    @property
    def model(self) -> str:
        return self.wire.model


@dataclass(frozen=True)
class CallTiming:
    """Backoff and patience of one call (GatewayConfig's ``poll_*``, ``terminal_timeout_s``,
    ``call_*``)."""

    poll_initial: float = 0.5
    poll_max: float = 10.0
    terminal_timeout: float = 600.0
    attempts: int = 4
    backoff: float = 0.5


@dataclass
class CallOutcome:
    """What the gateway saw of a call (the authoritative run state is on ``runs``)."""

    object_id: str | None = None
    streams: int = 0
    frames: int = 0
    resumed: int = 0
    retries: int = 0  # requests sent again after a 408/409/429/5xx or a network error
    polls: int = 0
    completed: bool = False  # the provider's terminal event / terminal status was seen
    status: str | None = None  # last object status seen (polls)
    error: str | None = None
    notes: list[str] = field(default_factory=list)


Publish = Callable[[list[ProviderFrame]], Awaitable[Any]]  # publish frames, wait for their acks


class CallRunner:
    """Carries out one :class:`ProviderCall` (see the module docstring)."""

    def __init__(self, call: ProviderCall, client: httpx.AsyncClient, publish: Publish,
                 timing: CallTiming | None = None) -> None:
        self.call = call
        self.facts = api_facts(call.api)
        self.follow_up = self.facts.follow_up
        self.client = client
        self._publish = publish
        self.timing = timing or CallTiming()
        self.outcome = CallOutcome()
        self._adapter = ADAPTERS[call.api](call.run_id, tenant=call.tenant, provider=call.provider)
        self._frame_headers = ({} if call.bundle is None
                               else {BUNDLE_FRAME_HEADER: call.bundle})
        self._cursor: str | None = None
        self._objects = 0  # poll frames published (their ids)
        self._last_stream_frame: ProviderFrame | None = None
        self._oversized: str | None = None  # the stream cut at an event over the input limit
        self._cancel_requested = asyncio.Event()
        self._follow_ups = asyncio.Lock()  # one poll or cancel at a time, answers in order
        # Told the provider object id once the call learns it (LocalRuns routes webhooks by it).
        self.on_object_id: Callable[[str], None] | None = None
        self.object_known = asyncio.Event()  # the calls record is told (handover.py)
        # Asked before each poll: False once another gateway process took the call up (its
        # calls record names another call), and the polling stops.
        self.still_ours: Callable[[], bool] = lambda: True

    # --- what the gateway calls -----------------------------------------------------------

    async def run(self) -> CallOutcome:
        try:
            await self._guarded(self._call())
        finally:
            await self._end()
        return self.outcome

    async def settle(self) -> CallOutcome:
        """Poll a background call whose polling had ended (a cancel after the terminal timeout)
        until the provider says it ended, or the terminal timeout passes again."""
        await self._guarded(self._poll_to_end(self.timing.poll_initial))
        return self.outcome

    async def _call(self) -> None:
        if self.call.stream:
            await self._stream()
        else:
            await self._create_object()
            if self.call.background:
                await self._poll_to_end(self.timing.poll_initial)

    async def _guarded(self, work: Awaitable[None]) -> None:
        """Carry out ``work``; what stops it is the call's outcome, never an exception."""
        try:
            await work
        except ProviderHTTPError as exc:  # the create call's answer
            self.outcome.error = str(exc)
            await self._publish_error_body(exc)
        except FollowUpFailed as exc:
            self.outcome.error = f"{exc}; the run's outcome is what the provider says next"
            log.warning("run %s: %s", self.call.run_id, exc, extra=self.call.log_fields)
        except httpx.TransportError as exc:
            self.outcome.error = f"{self.call.provider} unreachable: {exc!r}"
            log.warning("run %s: %s", self.call.run_id, self.outcome.error, extra=self.call.log_fields)
        except ModelEventsError as exc:  # Kafka did not acknowledge: the call cannot go on
            self.outcome.error = str(exc)
            log.error("run %s: stopped: %s", self.call.run_id, exc, extra=self.call.log_fields)

    async def cancel(self) -> dict[str, Any] | None:
        """Ask the provider to cancel; its answer is published as a poll frame. None when the
        API cannot cancel or the provider object is not known yet."""
        if self.follow_up.cancel is None or self.outcome.object_id is None:
            return None
        url = self._url(self.follow_up.cancel.format(id=self.outcome.object_id))
        response = await self._follow_up("POST", url, "cancel")
        self._cancel_requested.set()  # a polled call looks again now
        try:
            answer = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            return {}
        return answer if isinstance(answer, dict) else {}

    def look_again(self) -> None:
        """A polled call polls now (a cancel another gateway process sent)."""
        self._cancel_requested.set()

    @property
    def cursor(self) -> str | None:
        """The provider's resume cursor of the last stream frame read (None: none yet)."""
        return self._cursor

    @property
    def cancellable(self) -> bool:
        return self.follow_up.cancel is not None and self.call.background

    # --- streaming --------------------------------------------------------------------------

    async def _stream(self) -> None:
        cut = await self._read_stream(self._create_request(stream=True))
        fruitless = 0
        while cut and self._oversized is None:
            resume = self._resume_request()
            if resume is None:
                break
            if fruitless >= MAX_RESUMES:
                self.outcome.notes.append(f"gave up after {MAX_RESUMES} resumes in a row that "
                                          "brought nothing new")
                break
            self.outcome.resumed += 1
            log.info("run %s: stream cut at cursor %s; resuming", self.call.run_id, self._cursor, extra=self.call.log_fields)
            before = self._cursor
            try:
                cut = await self._read_stream(resume)
            except (ProviderHTTPError, httpx.TransportError) as exc:
                self.outcome.notes.append(f"the resume failed: {exc}")
                break
            fruitless = 0 if self._cursor != before else fruitless + 1
        if not cut or self._oversized is not None:
            return
        if self.call.background and self.follow_up.get is not None:
            # The provider goes on with a background call whatever the connection did.
            await self._poll_to_end(self.timing.poll_initial)
        else:
            await self._read_back("the stream was cut and cannot be resumed")

    async def _read_stream(self, request: httpx.Request) -> bool:
        """Read one stream; True when it ended without the provider's terminal event."""
        stream_id = f"{self.call.call_tag}.s{self.outcome.streams}"
        self.outcome.streams += 1
        response = await send(self.client, request, provider=self.call.provider, stream=True,
                              attempts=self.timing.attempts, backoff=self.timing.backoff,
                              on_retry=self._retried)
        try:
            if response.status_code >= 400:
                await response.aread()
                raise ProviderHTTPError(self.call.provider, response.status_code,
                                        response.content, str(request.url))
            # Strict: an event the connection cut before its blank line is not an event.
            decoder = SSEDecoder(strict=True)
            index = 0
            try:
                async for chunk in response.aiter_raw():
                    messages = decoder.feed(chunk)
                    if messages:
                        await self._emit([self._frame(stream_id, index + n, m.event, m.data, m.id)
                                          for n, m in enumerate(messages)])
                        index += len(messages)
                await self._emit([self._frame(stream_id, index + n, m.event, m.data, m.id)
                                  for n, m in enumerate(decoder.close())])
            except httpx.TransportError as exc:
                self.outcome.notes.append(f"{stream_id} cut after {index} frames: {exc!r}")
            except InputLimitError as exc:
                # One event larger than any frame may be (adapters/limits.py): the stream is cut
                # there, for good — a resume or a read-back would bring the same event again.
                self._oversized = stream_id
                self.outcome.notes.append(
                    f"{stream_id} cut after {index} frames at an SSE event over {exc.value:,} "
                    "bytes; the run ends truncated")
                self.outcome.error = (
                    f"{self.call.provider} sent an SSE event over the gateway's limit of "
                    f"{exc.value:,} bytes for one event ({exc.limit} of the adapters' input "
                    "limits); the frames before it are kept and the run ends truncated")
                log.warning("run %s: %s", self.call.run_id, self.outcome.error, extra=self.call.log_fields)
        finally:
            await response.aclose()
        return not self.outcome.completed

    def _resume_request(self) -> httpx.Request | None:
        follow_up = self.follow_up
        if (follow_up.resume_param is None or self.outcome.object_id is None
                or self._cursor is None):
            return None
        if follow_up.resume_background_only and not self.call.background:
            return None
        url = self._url(follow_up.get.format(id=self.outcome.object_id))  # type: ignore[union-attr]
        return json_request(self.client, "GET", url, api=self.call.api,
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

    async def _create_object(self) -> None:
        """POST a call without streaming: the answer is the object (queued, for background)."""
        request = self._create_request(stream=False)
        response = await send(self.client, request, provider=self.call.provider,
                              attempts=self.timing.attempts, backoff=self.timing.backoff,
                              on_retry=self._retried)
        if response.status_code >= 400:
            raise ProviderHTTPError(self.call.provider, response.status_code, response.content,
                                    str(request.url))
        await self._publish_object(response, "create")

    async def _poll_to_end(self, delay: float) -> None:
        if self.outcome.object_id is None:
            self.outcome.notes.append("the provider named no object to poll")
            return
        deadline = time.monotonic() + self.timing.terminal_timeout
        failures = 0
        while not self.outcome.completed:
            if time.monotonic() >= deadline:
                # The authoritative state before anything else is decided (OpenAI Background
                # mode guide: a response can sit in queued for a long time).
                await self._poll_once()
                if not self.outcome.completed:
                    self.outcome.notes.append(
                        f"no terminal status after {self.timing.terminal_timeout:g} s; the "
                        f"provider says {self.outcome.status!r}: cancel the run, or a webhook "
                        "settles it")
                return
            try:
                async with asyncio.timeout(min(delay, max(0.0, deadline - time.monotonic()))):
                    await self._cancel_requested.wait()
                self._cancel_requested.clear()
                delay = self.timing.poll_initial  # after a cancel, look soon
            except TimeoutError:
                delay = min(self.timing.poll_max, delay * 2)
            if not self.still_ours():
                self.outcome.notes.append("another gateway process took the call up; this one "
                                          "stopped polling it")
                return
            try:
                await self._poll_once()
                failures = 0
            except (FollowUpFailed, ModelEventsError) as exc:
                # The provider or Kafka is away for a moment: the job goes on there; so do we.
                failures += 1
                if failures == 1 or failures % 10 == 0:
                    self.outcome.notes.append(f"poll failed ({failures} in a row), trying "
                                              f"again: {exc}")
                log.warning("run %s: poll failed (%d in a row): %s", self.call.run_id, failures,
                            exc, extra=self.call.log_fields)

    async def _poll_once(self) -> None:
        url = self._url(self.follow_up.get.format(id=self.outcome.object_id))  # type: ignore[union-attr]
        self.outcome.polls += 1
        await self._follow_up("GET", url, "poll")

    async def _follow_up(self, method: str, url: str, what: str) -> httpx.Response:
        """A poll or cancel: its 2xx answer is published; an error raises FollowUpFailed."""
        request = json_request(self.client, method, url, api=self.call.api,
                               api_key=self.call.api_key)
        async with self._follow_ups:
            try:
                response = await send(self.client, request, provider=self.call.provider,
                                      attempts=self.timing.attempts, backoff=self.timing.backoff,
                              on_retry=self._retried)
            except (ProviderHTTPError, httpx.TransportError) as exc:
                raise FollowUpFailed(f"{what} of {self.outcome.object_id} failed: {exc}") from exc
            if response.status_code >= 400:
                error = ProviderHTTPError(self.call.provider, response.status_code,
                                          response.content, url)
                raise FollowUpFailed(f"{what} of {self.outcome.object_id} failed: {error}")
            await self._publish_object(response, what)
        return response

    async def _publish_object(self, response: httpx.Response, what: str) -> None:
        """Publish a complete object (a 2xx answer) as a poll frame and learn its status."""
        await self._emit([self._object_frame(response.content, what, response.status_code,
                                             _kept_headers(response))])
        try:
            doc = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            return
        if isinstance(doc, dict):
            if self.outcome.object_id is None and isinstance(doc.get("id"), str):
                self._learned_object_id(doc["id"])
            status = doc.get("status")
            if isinstance(status, str):
                self.outcome.status = status
                self.outcome.completed = status in self.facts.terminal_statuses

    async def _publish_error_body(self, exc: ProviderHTTPError) -> None:
        """The create call's error answer (not yet published) as a poll frame."""
        if not exc.body:
            return
        try:
            await self._emit([self._object_frame(exc.body, "error", exc.status, {})])
        except Exception:
            log.warning("run %s: could not publish the error answer", self.call.run_id, extra=self.call.log_fields)

    def _learned_object_id(self, object_id: str) -> None:
        self.outcome.object_id = object_id
        self.object_known.set()
        if self.on_object_id is not None:
            self.on_object_id(object_id)

    def _retried(self, message: str) -> None:
        self.outcome.retries += 1

    # --- frames -----------------------------------------------------------------------------

    def _frame(self, stream_id: str, index: int, event: str | None, data: bytes,
               sse_id: str | None) -> ProviderFrame:
        return ProviderFrame(
            frame_id=f"{stream_id}:{index}", run_key=self.call.run_id, provider=self.call.provider,
            api=self.call.api, transport="sse", received_at=_now_ms(),
            content_type="text/event-stream", body=data, tenant=self.call.tenant,
            stream_id=stream_id, index=index, sse_event=event, cursor=sse_id,
            headers={**self._frame_headers})

    def _object_frame(self, body: bytes, what: str, status: int,
                      headers: dict[str, str]) -> ProviderFrame:
        stream_id = f"{self.call.call_tag}.p{self._objects}"
        self._objects += 1
        return ProviderFrame(
            frame_id=f"{stream_id}:{what}", run_key=self.call.run_id, provider=self.call.provider,
            api=self.call.api, transport="poll", received_at=_now_ms(),
            content_type="application/json", body=body, tenant=self.call.tenant,
            stream_id=stream_id, index=0, headers={**headers, **self._frame_headers},
            http_status=status)

    async def _emit(self, frames: list[ProviderFrame]) -> None:
        if not frames:
            return
        for frame in frames:
            self._follow(frame)
        await self._publish(frames)
        self.outcome.frames += len(frames)

    def _follow(self, frame: ProviderFrame) -> None:
        """Learn the object id, cursor and completion from the frame, as the adapter reads it."""
        for event in self._adapter.feed(frame):
            object_id = getattr(event.payload, "provider_object_id", None)
            if event.kind == "run.started" and object_id and self.outcome.object_id is None:
                self._learned_object_id(object_id)
        if frame.transport == "sse":
            self._last_stream_frame = frame
            cursor = self.facts.stream_cursor(frame.cursor, frame.body)
            if cursor is not None:
                self._cursor = cursor
            self.outcome.completed = self.outcome.completed or self._adapter.stream_complete

    async def _end(self) -> None:
        last = self._last_stream_frame
        if self._oversized is not None:
            # Even a background call's run ends here (the provider's output cannot be taken),
            # and even a stream whose first event was the oversized one.
            if last is None or last.stream_id != self._oversized:
                last = self._frame(self._oversized, -1, None, b"", None)
        elif last is None or self.call.background:
            return
        try:
            await self._publish([end_of_input(last, "stream")])
        except Exception:
            log.warning("run %s: could not publish the end-of-stream marker", self.call.run_id, extra=self.call.log_fields)

    # --- helpers ----------------------------------------------------------------------------

    def _create_request(self, *, stream: bool) -> httpx.Request:
        endpoint = self.call.wire.endpoint
        return json_request(self.client, endpoint.method, self._url(endpoint.path),
                            api=self.call.api, api_key=self.call.api_key,
                            body=self.call.wire.body, params=endpoint.query or None,
                            headers=endpoint.headers, stream=stream)

    def _url(self, path: str) -> str:
        return self.call.base_url.rstrip("/") + path


def _kept_headers(response: httpx.Response) -> dict[str, str]:
    return {name: response.headers[name] for name in ("x-request-id", "request-id")
            if name in response.headers}


def _now_ms() -> int:
    return int(time.time() * 1000)
