"""The simulator's ASGI app: the providers' endpoints, answered from recorded scenarios.

Endpoints as the providers spell them (their API references, docs/design-notes.md):

    POST /v1/responses                      OpenAI Responses (stream, background)
    GET  /v1/responses/{id}                 poll a background response;
                                            ?stream=true&starting_after=N resumes
    POST /v1/responses/{id}/cancel          cancel a background response
    POST /v1/chat/completions               OpenAI Chat Completions
    POST /v1/messages                       Claude Messages (also ?beta=true)
    POST /v1beta/interactions               Gemini Interactions (stream, background)
    GET  /v1beta/interactions/{id}          poll; ?stream=true&last_event_id=E resumes
    POST /v1beta/interactions/{id}/cancel   cancel (also {id}:cancel)
    POST /v1beta/models/{model}:streamGenerateContent[?alt=sse]   Gemini generateContent
    POST /v1beta/models/{model}:generateContent
    (/v1/models/… and /v1/interactions… the same: google-genai uses v1 with a custom base_url)

A request's scenario: the ``x-simulator-scenario`` header; else, given an eval corpus, the one
its task names for its API (eval_tasks.py); else a ``sim:<scenario>`` model; else a by_request
rule or the endpoint's default (scenarios.py). The simulator's own: ``GET
/_simulator/scenarios``, ``GET|DELETE /_simulator/requests`` (secrets removed), ``POST
/_simulator/reset``, ``GET|PUT /_simulator/model`` (the model every answer reports, in place of
the recorded one; the ``model`` knob does it for one request).

Every request is validated against the provider's request schema (services/simulator/provider_schemas.py)
and answered 400 in the provider's error shape when it does not fit. Streams go out as real SSE:
split across writes at random byte offsets, optionally delayed or paced (one frame every
``interval_ms``, each stamped with the time of its write when asked), optionally cut (the
connection is dropped mid-frame, as a network cut does: the client sees an incomplete chunked
body).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
import time
from collections import Counter, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse

from modelevents.adapters.registry import api_facts
from modelevents.schemas.errors import ConfigError, InputError
from modelevents.services.errors import UnknownScenario
from modelevents.services.simulator import provider_http as http
from modelevents.services.simulator import provider_schemas
from modelevents.services.simulator.assemble import complete_object, first_object
from modelevents.services.simulator.eval_tasks import TaskIndex
from modelevents.services.simulator.provider_schemas import validate_request
from modelevents.services.simulator.recordings import Recording, WireFrame, reporting_model
from modelevents.services.simulator.scenarios import (
    HEADER_PREFIX,
    SCENARIO_MODEL_PREFIX,
    Knobs,
    Scenario,
    ScenarioRegistry,
)

_SECRET_HEADERS = {"authorization", "x-api-key", "x-goog-api-key", "api-key", "cookie",
                   "proxy-authorization"}


REQUEST_LOG_SIZE = 10_000
# In a frame served with the stamp knob: replaced by the write's CLOCK_MONOTONIC time in ns.
STAMP_MARKER = b"@sent_ns@"


class SimulatedCut(Exception):
    """Raised inside a streaming body so the server drops the connection mid-stream."""


@dataclass
class StoredRun:
    """A provider object the client may poll, resume or cancel (background / stored runs)."""

    api: str
    object_id: str
    scenario: Scenario
    recording: Recording
    knobs: Knobs
    background: bool
    polls: int = 0
    cancelled: bool = False
    polls_since_cancel: int = 0

    @property
    def finished(self) -> bool:
        """Its polls have shown the terminal object (a cancel cannot change that any more)."""
        return not self.cancelled and self.polls > self.knobs.poll_steps


@dataclass
class Call:
    """One request being answered."""

    api: str
    request: Request
    body: Any
    record: dict
    stream: bool = False
    rid: str = ""
    scenario: Scenario | None = None  # set by Simulator.begin before it hands the call on
    knobs: Knobs = field(default_factory=Knobs)

    @property
    def resolved_scenario(self) -> Scenario:
        """The scenario answering the call (every call Simulator.begin returns has one)."""
        if self.scenario is None:
            raise RuntimeError("the call's scenario is not resolved yet (Simulator.begin does)")
        return self.scenario


class Simulator:
    """The app plus its state: request log, attempt counters, stored runs."""

    def __init__(self, registry: ScenarioRegistry | None = None, *, validate: bool = True,
                 warm: bool = True, tasks: TaskIndex | None = None):
        self.registry = registry or ScenarioRegistry.default()
        self.tasks = tasks
        if tasks is not None:
            missing = sorted(n for n in tasks.scenario_names()
                             if n.partition("#")[0] not in self.registry.scenarios)
            if missing:
                raise ConfigError(f"corpus {tasks.corpus.ref} names simulator scenarios that do "
                                  f"not exist: {', '.join(missing)}; add their recordings under "
                                  "its recordings/ folder or pass --fixtures DIR")
        self.validate = validate
        if validate:
            provider_schemas.require_sdks()
        if validate and warm:
            # Build the request validators in the background so first requests answer quickly.
            threading.Thread(target=provider_schemas.warm, name="simulator-warm",
                             daemon=True).start()
        self._lock = threading.Lock()
        # Bounded: a simulator left running must not grow without end.
        self._requests: deque[dict] = deque(maxlen=REQUEST_LOG_SIZE)
        self._attempts: Counter[tuple[str, str]] = Counter()
        self._runs: dict[str, StoredRun] = {}
        self._ids = itertools.count(1)
        # The model every answer reports (PUT /_simulator/model, --report-model), unless a
        # request's x-simulator-model says another; None: the recorded one.
        self.report_model: str | None = None
        self._reporting: dict[tuple[str, str], Recording] = {}
        self.app = _build_app(self)

    # --- accessors for tests and the demo -----------------------------------------------------

    def requests(self, api: str | None = None) -> list[dict]:
        """Every request received so far (oldest first), optionally of one API."""
        with self._lock:
            return [dict(r) for r in self._requests if api is None or r["api"] == api]

    def reset(self) -> None:
        """Forget requests, attempt counters, stored runs and the model to report."""
        with self._lock:
            self.report_model = None
            self._requests.clear()
            self._attempts.clear()
            self._runs.clear()

    # --- one request ----------------------------------------------------------------------------

    async def begin(self, api: str, request: Request, *, stream: bool | None = None,
                    model: str | None = None, creates: bool = True) -> Call | Response:
        """Parse, log and validate a request; ``creates``: it carries a create body."""
        raw = await request.body()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _SECRET_HEADERS}
        record = {"id": next(self._ids), "time": time.time(), "method": request.method,
                  "path": request.url.path, "query": dict(request.query_params), "api": api,
                  "headers": headers, "body": None, "scenario": None, "status": None}
        with self._lock:
            self._requests.append(record)
        call = Call(api, request, None, record, rid=http.request_id(api))
        if raw:
            try:
                call.body = orjson.loads(raw)
            except orjson.JSONDecodeError as exc:
                record["body"] = raw.decode("utf-8", "replace")
                return self.error(call, 400, f"We could not parse the JSON body of your request "
                                             f"({exc}).")
        record["body"] = call.body
        if creates and self.validate:
            # In a worker thread: the first validation of an API builds its validator (seconds).
            problems = await asyncio.to_thread(validate_request, api, call.body)
            if problems:
                record["problems"] = problems
                return self.error(call, 400, "Invalid request: " + "; ".join(problems),
                                  param=problems[0].split(":", 1)[0], problems=problems)
        call.stream = bool(stream if stream is not None else
                           isinstance(call.body, dict) and call.body.get("stream") is True)
        model = model or (call.body.get("model") if isinstance(call.body, dict) else None)
        named = request.headers.get(HEADER_PREFIX + "scenario")
        tasks = self.tasks
        task = tasks.match(api, call.body) if named is None and tasks is not None else None
        if tasks is not None and task is not None:
            record["task"] = task.id
            named = task.simulator.get(api)
            if named is None:
                return self.error(call, 400, f"simulator: this conversation is task {task.id!r} "
                                             f"of eval corpus {tasks.corpus.ref} "
                                             f"(--corpus), which names no simulator scenario "
                                             f"for {api} (it names "
                                             f"{', '.join(sorted(task.simulator)) or 'none'}); "
                                             "add one under simulator: in its file")
        if named is None and isinstance(model, str) and model.startswith(SCENARIO_MODEL_PREFIX):
            named = model.removeprefix(SCENARIO_MODEL_PREFIX)
        if named is None:
            named = self.registry.match(api, model if isinstance(model, str) else None,
                                        call.body)
        try:
            call.scenario = self.registry.resolve(named, api)
            call.knobs = replace(call.scenario.knobs, **Knobs.from_headers(request.headers))
        except UnknownScenario as exc:
            return self.error(call, 404, f"simulator: {exc.args[0]}")
        except ConfigError as exc:  # a bad knob header
            return self.error(call, 400, f"simulator: {exc}")
        record["scenario"] = call.scenario.name
        return call

    def attempt_fails(self, call: Call) -> Response | None:
        """The configured 429/5xx for the first K attempts of this scenario (and session)."""
        knobs = call.knobs
        if not knobs.fail_status:
            return None
        session = call.request.headers.get(HEADER_PREFIX + "session", "")
        key = (call.resolved_scenario.name, session)
        with self._lock:
            self._attempts[key] += 1
            attempt = self._attempts[key]
        call.record["attempt"] = attempt
        if attempt > knobs.fail_count:
            return None
        message = ("Rate limit reached for requests (simulated). Please try again shortly."
                   if knobs.fail_status == 429 else
                   "Overloaded (simulated)." if knobs.fail_status == 529 else
                   f"The server had an error while processing your request (simulated "
                   f"{knobs.fail_status}).")
        return self.error(call, knobs.fail_status, message, retry=True)

    def load(self, call: Call) -> Recording | Response:
        scenario = call.resolved_scenario
        try:
            recording = self.registry.recording(scenario)
        except InputError as exc:
            return self.error(call, 500, f"simulator: scenario {scenario.name!r} cannot be "
                                         f"loaded: {exc}")
        if recording.api != call.api:
            return self.error(call, 400, f"simulator: scenario {scenario.name!r} is a "
                                         f"recording of {recording.api}; this endpoint serves "
                                         f"{call.api}. Pick a scenario of {call.api}.")
        model = call.knobs.model or self.report_model
        if model is None:
            return recording
        key = (scenario.name, model)
        with self._lock:
            rewritten = self._reporting.get(key)
            if rewritten is None:
                if len(self._reporting) >= 256:  # bounded, as the request log is
                    self._reporting.clear()
                rewritten = self._reporting[key] = reporting_model(recording, model)
        return rewritten

    # --- answers ----------------------------------------------------------------------------

    def error(self, call: Call, status: int, message: str, *, param: str | None = None,
              problems: list[str] | None = None, retry: bool = False) -> Response:
        headers = http.response_headers(call.api, call.rid)
        if retry:
            headers.update(http.retry_headers(call.api, call.knobs.retry_after_ms))
        body = http.error_body(call.api, status, message, call.rid, param=param,
                               retry_after_ms=call.knobs.retry_after_ms, problems=problems)
        call.record["status"] = status
        return Response(orjson.dumps(body), status_code=status, headers=headers,
                        media_type="application/json")

    def json(self, call: Call, body: bytes | dict, status: int = 200) -> Response:
        call.record["status"] = status
        headers = http.response_headers(call.api, call.rid)
        if status == 429 or status >= 500:
            headers.update(http.retry_headers(call.api, call.knobs.retry_after_ms))
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        return Response(data, status_code=status, headers=headers, media_type="application/json")

    def recorded_object(self, call: Call, recording: Recording) -> Response:
        """A non-streaming answer: the recorded object, or the stream folded into one."""
        if not recording.is_stream:
            return self.json(call, recording.object_bytes(), recording.status)
        obj = complete_object(call.api, [f.payload for f in recording.stream_frames])
        if obj is None:
            return self.error(call, 500, f"simulator: scenario {call.resolved_scenario.name!r} "
                                         "is a stream without a terminal frame; it has no "
                                         "complete object for a request without stream")
        return self.json(call, obj)

    def sse(self, call: Call, frames: list[WireFrame], knobs: Knobs | None = None,
            content_type: str | None = None) -> Response:
        knobs = knobs or call.knobs
        seed = knobs.chunk_seed if knobs.chunk_seed is not None else random.randrange(2**32)
        call.record.update(status=200, chunk_seed=seed, frames=len(frames))
        headers = http.response_headers(call.api, call.rid)
        headers["cache-control"] = "no-cache"
        return StreamingResponse(
            _body_chunks([f.raw for f in frames], knobs, random.Random(seed)),
            headers=headers, media_type=content_type or api_facts(call.api).sse_content_type)

    def stream_or_error(self, call: Call, recording: Recording,
                        frames: list[WireFrame] | None = None) -> Response:
        if recording.status >= 400 or not recording.is_stream:
            if recording.status >= 400:
                return self.json(call, recording.object_bytes(), recording.status)
            return self.error(call, 400, f"simulator: scenario {call.resolved_scenario.name!r} "
                                         "holds one complete object, not a stream; send the "
                                         "request without stream or pick a stream scenario")
        return self.sse(call, recording.stream_frames if frames is None else frames)

    # --- stored runs (background, resume, cancel) ---------------------------------------------

    def store(self, call: Call, recording: Recording, background: bool) -> StoredRun | None:
        if not recording.is_stream:
            return None
        obj = first_object(call.api, [f.payload for f in recording.stream_frames[:3]])
        if not obj or not obj.get("id"):
            return None
        run = StoredRun(call.api, obj["id"], call.resolved_scenario, recording, call.knobs,
                        background)
        with self._lock:
            held = self._runs.get(run.object_id)
            # A replayed recording repeats its object id, which a provider never does: a call
            # served the same recording while a background run of it is live must not reset that
            # run's polls (seen in the demo: a second call's store between two polls of the
            # background run made it answer in_progress once more). The live run keeps the id.
            if held is None or not held.background or held.finished:
                self._runs[run.object_id] = run
        return run

    def run(self, object_id: str) -> StoredRun | None:
        with self._lock:
            return self._runs.get(object_id)

    def cancel(self, call: Call, run: StoredRun) -> Response:
        """Cancel a background run: refused once it finished (the provider's terminal state
        stands); the answer says in_progress while ``cancel_polls`` polls remain."""
        if run.finished:
            return self.error(call, 400, f"Cannot cancel {run.object_id}: it has already "
                                         "completed.")
        run.cancelled = True
        status = "in_progress" if run.knobs.cancel_polls else "cancelled"
        return self.json(call, _with_status(first_object(run.api, [
            f.payload for f in run.recording.stream_frames]), status))

    async def poll(self, call: Call, run: StoredRun) -> Response:
        """A background run moves queued → in_progress (poll_steps polls) → terminal; a
        cancelled one → cancelled (after cancel_polls more polls in progress)."""
        if run.knobs.poll_delay_ms:
            await asyncio.sleep(run.knobs.poll_delay_ms / 1000)
        frames = run.recording.stream_frames
        if run.cancelled:
            run.polls_since_cancel += 1
            status = ("in_progress" if run.polls_since_cancel <= run.knobs.cancel_polls
                      else "cancelled")
            return self.json(call, _with_status(first_object(run.api, [f.payload for f in frames]),
                                                status))
        run.polls += 1
        if run.polls <= run.knobs.poll_steps:
            return self.json(call, _with_status(first_object(run.api, [f.payload for f in frames]),
                                                "in_progress"))
        obj = complete_object(run.api, [f.payload for f in frames])
        if obj is None:
            return self.json(call, _with_status(first_object(run.api, [f.payload for f in frames]),
                                                "in_progress"))
        return self.json(call, obj)


def _with_status(obj: dict | None, status: str) -> dict:
    obj = dict(obj or {})
    obj["status"] = status
    return obj


async def _body_chunks(frames: list[bytes], knobs: Knobs, rng: random.Random
                       ) -> AsyncIterator[bytes]:
    """The stream's bytes in writes that split frames at random offsets; then maybe a cut."""
    # The frame the cut comes before; None: no cut (none asked for, or past the last frame).
    cut_at = knobs.cut_after_frame
    if cut_at is not None and cut_at >= len(frames):
        cut_at = None
    cut = cut_at is not None
    if knobs.interval_ms or knobs.stamp:
        async for data in _paced_chunks(frames, knobs, cut_at, rng):
            yield data
        return
    kept = frames[:cut_at] if cut_at is not None else frames
    data = b"".join(kept)
    if cut_at is not None and frames[cut_at]:
        # A network cut lands anywhere: part of the next frame went out before it.
        data += frames[cut_at][:rng.randrange(len(frames[cut_at]))]
    frame_starts = list(itertools.accumulate((len(f) for f in kept), initial=0))[:-1]
    if knobs.chunking:
        mean = max(2, len(data) // max(1, len(kept)))
        bounds, pos = [], 0
        while pos < len(data):
            pos = min(len(data), pos + rng.randint(1, 2 * mean))
            bounds.append(pos)
    else:
        bounds = [start for start in frame_starts[1:]] + [len(data)]
    start = 0
    starts = iter(frame_starts)
    pending_start = next(starts, None)
    for end in bounds:
        frames_begun = 0
        while pending_start is not None and pending_start < end:
            frames_begun += 1
            pending_start = next(starts, None)
        if knobs.delay_ms and frames_begun:
            await asyncio.sleep(knobs.delay_ms * frames_begun / 1000)
        yield data[start:end]
        start = end
        await asyncio.sleep(0)  # let the write reach the socket before the next one
    if cut:
        raise SimulatedCut(f"simulated network cut after frame {knobs.cut_after_frame}")


async def _paced_chunks(frames: list[bytes], knobs: Knobs, cut_at: int | None,
                        rng: random.Random) -> AsyncIterator[bytes]:
    """One write per frame, frame i due at the start + i × ``interval_ms``; stamped frames
    carry the time of their write in place of STAMP_MARKER."""
    start = time.monotonic()
    for index, frame in enumerate(frames[:cut_at] if cut_at is not None else frames):
        wait = start + index * knobs.interval_ms / 1000 - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        if knobs.stamp:
            frame = frame.replace(STAMP_MARKER, str(time.monotonic_ns()).encode())
        yield frame
        await asyncio.sleep(0)  # let the write reach the socket before the next one
    if cut_at is not None:
        if frames[cut_at]:
            yield frames[cut_at][:rng.randrange(len(frames[cut_at]))]
        raise SimulatedCut(f"simulated network cut after frame {knobs.cut_after_frame}")


# --- routes ------------------------------------------------------------------------------------


def _build_app(sim: Simulator) -> FastAPI:
    app = FastAPI(title="modelevents provider simulator",
                  description="OpenAI, Anthropic and Gemini endpoints answered from recordings.")
    app.state.simulator = sim

    @app.post("/v1/responses")
    async def responses_create(request: Request) -> Response:
        call = await sim.begin("openai-responses", request)
        if isinstance(call, Response):
            return call
        recording = sim.attempt_fails(call) or sim.load(call)
        if isinstance(recording, Response):
            return recording
        background = bool(call.body.get("background"))
        # Stored responses can be read back (OpenAI Conversation state guide: store defaults to
        # true); only background ones can be streamed again or cancelled (Background mode guide).
        if recording.status < 400 and (background or call.body.get("store", True) is not False):
            run = sim.store(call, recording, background=background)
            if run is not None and background and not call.stream:
                obj = _with_status(first_object(call.api, [f.payload for f in
                                                           recording.stream_frames]), "queued")
                obj["background"] = True
                return sim.json(call, obj)
        if call.stream:
            return sim.stream_or_error(call, recording)
        return sim.recorded_object(call, recording)

    @app.get("/v1/responses/{response_id}")
    async def responses_retrieve(response_id: str, request: Request) -> Response:
        call = await sim.begin("openai-responses", request, creates=False,
                               stream=request.query_params.get("stream") == "true")
        if isinstance(call, Response):
            return call
        run = sim.run(response_id)
        if run is None or run.api != call.api:
            return sim.error(call, 404, f"No response found with id '{response_id}'.")
        call.scenario = run.scenario
        if not call.stream:
            return await sim.poll(call, run)
        if not run.background:
            # OpenAI: only background responses can be streamed again (OpenAI Background mode
            # guide).
            return sim.error(call, 400, "This response cannot be streamed because it was not "
                                        "created with background=true.")
        after = request.query_params.get("starting_after")
        try:
            # resume_overlap: a resume that sends some frames again (the client must dedupe).
            frames = _after_sequence(run.recording.stream_frames,
                                     (int(after) if after else -1) - run.knobs.resume_overlap)
        except ValueError:
            return sim.error(call, 400, f"starting_after must be an integer, got {after!r}",
                             param="starting_after")
        return sim.sse(call, frames, _resume_knobs(sim, call, run))

    @app.post("/v1/responses/{response_id}/cancel")
    async def responses_cancel(response_id: str, request: Request) -> Response:
        call = await sim.begin("openai-responses", request, creates=False)
        if isinstance(call, Response):
            return call
        run = sim.run(response_id)
        if run is None:
            return sim.error(call, 404, f"No response found with id '{response_id}'.")
        if not run.background:
            return sim.error(call, 400, "Only responses created with background=true can be "
                                        "cancelled.")
        return sim.cancel(call, run)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await _plain(sim, "openai-chat", request)

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        return await _plain(sim, "anthropic-messages", request)

    # Both API versions exist; google-genai uses v1 when given a custom base_url.
    # :path — a scenario model (``sim:gemini-generate/text-stream``) has slashes.
    @app.post("/v1/models/{model_action:path}")
    @app.post("/v1beta/models/{model_action:path}")
    async def generate_content(model_action: str, request: Request) -> Response:
        model, _, action = model_action.rpartition(":")
        if action not in ("generateContent", "streamGenerateContent"):
            return Response(orjson.dumps(http.error_body(
                "gemini-generate", 404, f"simulator: unknown method {action!r}; use "
                "generateContent or streamGenerateContent", "")), status_code=404,
                media_type="application/json")
        stream = action == "streamGenerateContent"
        call = await sim.begin("gemini-generate", request, stream=stream,
                               model=model.removeprefix("models/"))
        if isinstance(call, Response):
            return call
        recording = sim.attempt_fails(call) or sim.load(call)
        if isinstance(recording, Response):
            return recording
        if not stream:
            return sim.recorded_object(call, recording)
        if request.query_params.get("alt") == "sse" or recording.status >= 400:
            return sim.stream_or_error(call, recording)
        # Without alt=sse the endpoint streams one JSON array (Gemini generateContent reference).
        array = recording.json_array or (b"[" + b",\r\n".join(
            orjson.dumps(f.payload) for f in recording.frames or () if f.payload is not None)
            + b"]")
        return sim.sse(call, [WireFrame(array, None, None)], content_type="application/json")

    # google-genai calls /v1/… when given a custom base_url; serve both versions.
    @app.post("/v1/interactions")
    @app.post("/v1beta/interactions")
    async def interactions_create(request: Request) -> Response:
        call = await sim.begin("gemini-interactions", request)
        if isinstance(call, Response):
            return call
        recording = sim.attempt_fails(call) or sim.load(call)
        if isinstance(recording, Response):
            return recording
        background = bool(call.body.get("background"))
        if recording.status < 400 and call.body.get("store", True) is not False:
            run = sim.store(call, recording, background=background)
            if run is not None and background and not call.stream:
                return sim.json(call, _with_status(first_object(call.api, [
                    f.payload for f in recording.stream_frames]), "in_progress"))
        if call.stream:
            return sim.stream_or_error(call, recording)
        return sim.recorded_object(call, recording)

    @app.get("/v1/interactions/{interaction_id}")
    @app.get("/v1beta/interactions/{interaction_id}")
    async def interactions_get(interaction_id: str, request: Request) -> Response:
        call = await sim.begin("gemini-interactions", request, creates=False,
                               stream=request.query_params.get("stream") == "true")
        if isinstance(call, Response):
            return call
        run = sim.run(interaction_id)
        if run is None or run.api != call.api:
            return sim.error(call, 404, f"Interaction {interaction_id} not found.")
        call.scenario = run.scenario
        if not call.stream:
            return await sim.poll(call, run)
        last = request.query_params.get("last_event_id")
        frames = run.recording.stream_frames
        if last:
            index = next((i for i, f in enumerate(frames) if f.cursor == last), None)
            if index is None:
                return sim.error(call, 400, f"last_event_id {last!r} is not an event of "
                                            f"interaction {interaction_id}.")
            frames = frames[max(0, index + 1 - run.knobs.resume_overlap):]
        return sim.sse(call, frames, _resume_knobs(sim, call, run))

    @app.post("/v1/interactions/{interaction_id}")
    @app.post("/v1/interactions/{interaction_id}/cancel")
    @app.post("/v1beta/interactions/{interaction_id}")
    @app.post("/v1beta/interactions/{interaction_id}/cancel")
    async def interactions_cancel(interaction_id: str, request: Request) -> Response:
        call = await sim.begin("gemini-interactions", request, creates=False)
        if isinstance(call, Response):
            return call
        if not request.url.path.endswith(("/cancel", ":cancel")):
            return sim.error(call, 404, f"simulator: no endpoint POST {request.url.path}; "
                                        "interactions are cancelled with POST …/{id}/cancel")
        interaction_id = interaction_id.removesuffix(":cancel")
        run = sim.run(interaction_id)
        if run is None:
            return sim.error(call, 404, f"Interaction {interaction_id} not found.")
        return sim.cancel(call, run)

    @app.get("/_simulator/scenarios")
    async def scenarios() -> Response:
        return Response(orjson.dumps({"defaults": sim.registry.defaults,
                                      "scenarios": sim.registry.listing()}),
                        media_type="application/json")

    @app.get("/_simulator/requests")
    async def requests_received(api: str | None = None) -> Response:
        return Response(orjson.dumps(sim.requests(api)), media_type="application/json")

    @app.get("/_simulator/model")
    async def reported_model() -> Response:
        return Response(orjson.dumps({"model": sim.report_model}),
                        media_type="application/json")

    @app.put("/_simulator/model")
    async def report_model(request: Request) -> Response:
        # {"model": "gpt-4o-mini-2025-01-31"} or {"model": null} (the recorded models again).
        try:
            doc = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            doc = None
        model = doc.get("model", "") if isinstance(doc, dict) else ""
        if model is not None and (not isinstance(model, str) or not model):
            return Response(orjson.dumps({"error": {
                "message": 'simulator: send {"model": "<name>"} or {"model": null}'}}),
                status_code=400, media_type="application/json")
        sim.report_model = model
        return Response(orjson.dumps({"model": model}), media_type="application/json")

    @app.delete("/_simulator/requests")
    @app.post("/_simulator/reset")
    async def reset() -> Response:
        sim.reset()
        return Response(status_code=204)

    @app.api_route("/{path:path}", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def unknown_endpoint(path: str, request: Request) -> Response:
        # Recorded too: a client calling a path the simulator lacks is worth seeing in a test.
        with sim._lock:
            sim._requests.append({"id": next(sim._ids), "time": time.time(),
                                  "method": request.method, "path": request.url.path,
                                  "query": dict(request.query_params), "api": None,
                                  "headers": {}, "body": None, "scenario": None, "status": 404})
        return Response(orjson.dumps({"error": {
            "code": 404, "status": "NOT_FOUND", "type": "not_found_error",
            "message": f"simulator: no endpoint {request.method} {request.url.path}; it serves "
                       "/v1/responses, /v1/chat/completions, /v1/messages, /v1beta/interactions "
                       "and /v1beta/models/{model}:(stream)generateContent"}}),
            status_code=404, media_type="application/json")

    return app


async def _plain(sim: Simulator, api: str, request: Request) -> Response:
    """Chat Completions and Claude Messages: one call, streamed or not, nothing stored."""
    call = await sim.begin(api, request)
    if isinstance(call, Response):
        return call
    recording = sim.attempt_fails(call) or sim.load(call)
    if isinstance(recording, Response):
        return recording
    if call.stream:
        return sim.stream_or_error(call, recording)
    return sim.recorded_object(call, recording)


def _after_sequence(frames: list[WireFrame], after: int) -> list[WireFrame]:
    """Frames whose sequence_number is greater than ``after`` (exclusive; OpenAI Background mode
    guide)."""
    return [f for f in frames if f.cursor is not None and int(f.cursor) > after]


def _resume_knobs(sim: Simulator, call: Call, run: StoredRun) -> Knobs:
    """A resumed stream keeps the run's pacing; a cut only when this request asks for one."""
    try:
        return replace(run.knobs, **{"cut_after_frame": None, **Knobs.from_headers(
            call.request.headers)})
    except ConfigError:
        return run.knobs


def create_app(registry: ScenarioRegistry | None = None, *, validate: bool = True,
               tasks: TaskIndex | None = None) -> FastAPI:
    """A fresh simulator app; ``app.state.simulator`` is its Simulator (requests(), reset())."""
    return Simulator(registry, validate=validate, tasks=tasks).app
