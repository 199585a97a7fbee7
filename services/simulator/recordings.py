"""A recorded provider response, cut into the frames the simulator puts on the wire.

A recording is either a stream (SSE frames, each kept as its exact wire bytes, with the
provider's resume cursor where it has one) or one JSON object (a complete response, a poll
result, or an HTTP error body with its status). What each file holds:

    .sse            served verbatim; cut at the blank lines that end SSE messages
    .jsonl / .txt   bare JSON payloads, one per line (the Vercel AI SDK's ``*.chunks.txt``):
                    framed as the provider frames them (each provider's streaming reference):
                    ``event:`` + ``data:`` for OpenAI Responses, Claude and Interactions, ``data:``
                    alone for Chat Completions, ``data:`` with CRLF CRLF for Gemini generateContent
    .json-array     Gemini's streamed JSON array (kept whole for requests without ``alt=sse``)
    .json           one object; an error body (``{"error": …}``) carries its HTTP status
    .yaml           a VCR cassette: the Nth model call's response body (``name#N``, default 0)

Resume cursors (OpenAI Background mode guide, Gemini Interactions API reference): OpenAI Responses
frames carry ``sequence_number``; Interactions frames carry ``event_id`` (or an SSE ``id:`` line).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from modelevents.adapters.cassette import read_cassette
from modelevents.adapters.framing import (
    JSONArraySplitter,
    detect_framing,
    frames_from_bytes,
    json_lines,
)
from modelevents.adapters.registry import api_facts, api_for_uri, decoded_docs, detect_api
from modelevents.adapters.sse import SSEDecoder
from modelevents.schemas.errors import InputError
from modelevents.services.simulator.provider_http import ENVELOPES, envelope

# The APIs the simulator serves, named as the adapters name them.
STREAM_APIS = ("openai-responses", "openai-chat", "anthropic-messages", "gemini-generate",
               "gemini-interactions")

# An SSE message ends at a blank line; CRLF, LF and CR line ends all occur (Gemini uses CRLF).
_MESSAGE_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")


@dataclass(slots=True)
class WireFrame:
    raw: bytes  # exactly what goes on the wire for this frame, terminator included
    payload: Any  # the decoded data JSON; None for comments, [DONE], malformed data
    cursor: str | None  # the provider's resume cursor of this frame, if it has one


@dataclass
class Recording:
    name: str
    api: str  # one of STREAM_APIS
    path: Path
    frames: list[WireFrame] | None = None  # a stream
    body: bytes | None = None  # one JSON object (complete response, poll, error body)
    status: int = 200
    # Gemini's streamed JSON array, verbatim, for :streamGenerateContent without alt=sse.
    json_array: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def is_stream(self) -> bool:
        return self.frames is not None

    @property
    def stream_frames(self) -> list[WireFrame]:
        """The frames of a stream (``is_stream``); a recording of one object has none."""
        if self.frames is None:
            raise ValueError(f"recording {self.name} holds one object, not a stream")
        return self.frames

    def stream_bytes(self) -> bytes:
        return b"".join(frame.raw for frame in self.frames or ())

    def object_bytes(self) -> bytes:
        """What an answer that is not a stream sends: the recorded object, else (an error
        status recorded with a stream) the stream's bytes as they were recorded."""
        return self.body if self.body is not None else self.stream_bytes()


# Where each API reports the model that answered (its snapshot): a key of the frame's or the
# object's JSON, at any depth (OpenAI Responses nests it in `response`, Claude in `message`).
MODEL_KEYS = ("model", "modelVersion")


def reported_models(doc: Any) -> set[str]:
    """Every model name ``doc`` reports under :data:`MODEL_KEYS`."""
    found: set[str] = set()
    if isinstance(doc, dict):
        for key, value in doc.items():
            if key in MODEL_KEYS and isinstance(value, str):
                found.add(value)
            else:
                found |= reported_models(value)
    elif isinstance(doc, list):
        for item in doc:
            found |= reported_models(item)
    return found


def _replaced(doc: Any, model: str) -> Any:
    if isinstance(doc, dict):
        return {key: model if key in MODEL_KEYS and isinstance(value, str)
                else _replaced(value, model) for key, value in doc.items()}
    if isinstance(doc, list):
        return [_replaced(item, model) for item in doc]
    return doc


def _reporting(raw: bytes, doc: Any, model: str) -> tuple[bytes, Any]:
    """``raw`` (and its decoded ``doc``) with every reported model replaced by ``model``; the
    rest of the bytes as recorded (a JSON string replaced by another: framing unchanged)."""
    recorded = reported_models(doc)
    new = orjson.dumps(model)
    for old in recorded:
        raw = raw.replace(orjson.dumps(old), new)
    return raw, (_replaced(doc, model) if recorded else doc)


def reporting_model(recording: Recording, model: str) -> Recording:
    """A copy of ``recording`` whose frames and objects report ``model`` as the model that
    answered (the simulator's ``model`` knob: a provider that moved to another snapshot)."""
    frames = None
    if recording.frames is not None:
        frames = []
        for frame in recording.frames:
            raw, payload = _reporting(frame.raw, frame.payload, model)
            frames.append(WireFrame(raw, payload, frame.cursor))
    body = json_array = None
    if recording.body is not None:
        body = _reporting(recording.body, _json_or_none(recording.body), model)[0]
    if recording.json_array is not None:
        json_array = _reporting(recording.json_array, _json_or_none(recording.json_array),
                                model)[0]
    return Recording(recording.name, recording.api, recording.path, frames=frames, body=body,
                     status=recording.status, json_array=json_array,
                     headers=dict(recording.headers))


def _json_or_none(raw: bytes) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None


def load_recording(name: str, path: Path, api: str | None = None, call: int = 0) -> Recording:
    """Read ``path`` as a recording of ``api`` (detected when None). Raises InputError."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read recording {path}: {exc.strerror or exc}") from exc
    if path.suffix in (".yaml", ".yml"):
        return _from_cassette(name, path, raw, api, call)
    return _from_body(name, path, raw, api)


def _from_cassette(name: str, path: Path, raw: bytes, api: str | None, call: int) -> Recording:
    calls = [i for i in read_cassette(raw) if api_for_uri(i.uri) in STREAM_APIS
             and (api is None or api_for_uri(i.uri) == api)]
    if call >= len(calls):
        raise InputError(f"cassette {path} has {len(calls)} model calls"
                         f"{' of ' + api if api else ''}; call #{call} does not exist")
    interaction = calls[call]
    recording = _from_body(name, path, interaction.body, api_for_uri(interaction.uri))
    if interaction.status >= 400:
        recording.status = interaction.status
    return recording


def _from_body(name: str, path: Path, raw: bytes, api: str | None) -> Recording:
    # A JSON-lines file of one line looks like one object; its name says it is a stream.
    framing = "jsonl" if path.name.endswith((".jsonl", ".chunks.txt")) else detect_framing(raw)
    if api is None:
        provider_frames = frames_from_bytes(raw, run_key=name, provider="", api="",
                                            framing=framing)
        api = detect_api(decoded_docs(provider_frames), candidates=STREAM_APIS)
    if framing == "sse":
        return Recording(name, api, path, frames=split_sse(raw, api))
    if framing == "json":
        return Recording(name, api, path, body=raw.strip(), status=error_status(raw, api))
    if framing == "jsonl":
        payloads = json_lines(raw)
    else:  # json-array
        splitter = JSONArraySplitter()
        payloads = splitter.feed(raw) + splitter.close()
    frames = [frame_payload(payload, api) for payload in payloads]
    return Recording(name, api, path, frames=frames,
                     json_array=raw if framing == "json-array" else None)


def split_sse(raw: bytes, api: str) -> list[WireFrame]:
    """Cut an SSE body into its messages, each with its verbatim bytes (joined: ``raw``)."""
    frames: list[WireFrame] = []
    start = 0
    for match in _MESSAGE_END.finditer(raw):
        frames.append(_sse_frame(raw[start:match.end()], api))
        start = match.end()
    if start < len(raw):  # a recording that stops mid-message (a truncated stream)
        frames.append(_sse_frame(raw[start:], api))
    return frames


def _sse_frame(raw: bytes, api: str) -> WireFrame:
    decoder = SSEDecoder()
    messages = decoder.feed(raw) + decoder.close()
    if not messages:
        return WireFrame(raw, None, None)
    message = messages[-1]
    payload = _loads(message.data)
    return WireFrame(raw, payload, api_facts(api).stream_cursor(message.id, message.data))


def frame_payload(payload: bytes, api: str) -> WireFrame:
    """A bare JSON payload framed as ``api``'s SSE endpoint frames it."""
    doc = _loads(payload)
    if (b"\n" in payload or b"\r" in payload) and doc is not None:
        # Pretty-printed elements of a JSON array: providers send one line per SSE data field.
        payload = orjson.dumps(doc)
    facts = api_facts(api)
    end = facts.sse_line_end
    name = doc.get(facts.sse_event_field) \
        if facts.sse_event_field is not None and isinstance(doc, dict) else None
    raw = (b"event: " + str(name).encode() + end if name else b"") \
        + b"data: " + payload + end + end
    return WireFrame(raw, doc, facts.stream_cursor(None, payload))


def error_status(raw: bytes, api: str) -> int:
    """The HTTP status an error body was answered with (200 for anything else)."""
    doc = _loads(raw)
    if not isinstance(doc, dict) or "error" not in doc:
        return 200
    error = doc["error"]
    if not isinstance(error, dict):
        return 500
    if isinstance(error.get("code"), int) and 400 <= error["code"] < 600:  # Google, vLLM
        return error["code"]
    if doc.get("type") == "error":  # Anthropic's error body, at whichever API it was recorded
        return ENVELOPES["anthropic"].error_status(error)
    return envelope(api).error_status(error)


def _loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
