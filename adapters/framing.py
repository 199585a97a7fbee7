"""Bytes → ProviderFrames: the four framings provider bodies arrive in.

    sse         Server-Sent Events; one frame per dispatched message, body = the data field
                (every provider's streaming endpoint).
    jsonl       one bare JSON document per line (recorders that kept only the SSE data
                payloads, e.g. the Vercel AI SDK's ``*.chunks.txt``).
    json-array  a streamed JSON array of objects, one frame per element (Gemini
                ``:streamGenerateContent`` without ``alt=sse``); elements may span lines.
    json        one whole JSON object: a complete provider object or an HTTP error body
                (transport "poll" unless the caller says otherwise).

Frame bodies are the provider's bytes, verbatim (never re-serialized): they are what the
envelope keeps and what replay re-normalizes. A frame longer than ``max_event_bytes`` (default
64 MiB; adapters/limits.py) — an SSE event, a JSON line, an array element, a whole object — is
refused with :class:`~modelevents.adapters.limits.InputLimitError`: the incremental readers
would otherwise buffer an element that never ends, and each frame is parsed into objects
several times its size. ``frame_id`` is ``f"{stream_id}:{index}"``, so the
same bytes always give the same frames.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from modelevents.adapters.errors import InputLimitError
from modelevents.adapters.limits import current_limits
from modelevents.adapters.sse import SSEDecoder, as_tuple, messages_of_body
from modelevents.schemas.errors import FramingError
from modelevents.schemas.frames import ProviderFrame, stream_frames
from modelevents.schemas.vocabulary import Transport

FRAMINGS = ("sse", "jsonl", "json-array", "json")

_BOM = b"\xef\xbb\xbf"
_SSE_FIELD_PREFIXES = (b"data:", b"event:", b"id:", b"retry:", b":")
_SSE_BARE_FIELDS = (b"data", b"event", b"id", b"retry")
_SNIFF_BYTES = 64 * 1024  # detection looks at the start only: bodies can be large
_SNIFF_LINES = 5
_SSE_SLICE = 64 * 1024


def _first_bytes(body: bytes | bytearray) -> str:
    return repr(bytes(body[:60]))


def detect_framing(body: bytes) -> str:
    """Which framing ``body`` is in: sse | jsonl | json-array | json. Raises FramingError."""
    head = bytes(body[:_SNIFF_BYTES])
    if head.startswith(_BOM):
        head = head[3:]
    head = head.lstrip()
    if not head:
        raise FramingError("the body is empty (or only whitespace): there is nothing to normalize")
    first_line = head.split(b"\n", 1)[0].rstrip(b"\r")
    if first_line.startswith(_SSE_FIELD_PREFIXES) or first_line in _SSE_BARE_FIELDS:
        return "sse"
    if head[:1] == b"[":
        return "json-array"
    if head[:1] == b"{":
        return _object_or_lines(body)
    if head[:2] == b"\x1f\x8b":
        raise FramingError("the body is gzip-compressed: decompress it first (a VCR cassette "
                           "with a gzip !!binary body is read as it is)")
    raise FramingError(
        f"the body is none of the framings modelevents reads (SSE, JSON lines, a JSON array, "
        f"a JSON object); it starts with {_first_bytes(head)}. An HTML page usually means a "
        f"proxy or gateway error rather than a provider response.")


def _object_or_lines(body: bytes) -> str:
    """A ``{`` opens either one (maybe pretty-printed) object or the first of many lines."""
    body = bytes(body)
    if body.startswith(_BOM):
        body = body[3:]
    # A body over the frame limit is not parsed whole (that could cost many times its size in
    # objects): one line is an object (refused as too long), several lines decide below.
    if len(body) > current_limits().max_event_bytes:
        if b"\n" not in body.strip():
            return "json"
    else:
        try:
            orjson.loads(body)  # for JSON lines this stops at the end of the first line
            return "json"
        except orjson.JSONDecodeError:
            pass
    # Not one object. JSON lines if one of the first lines is a whole document; otherwise a
    # single object that is broken or cut short — the adapter reports it as malformed.
    for line in body.split(b"\n", _SNIFF_LINES)[:_SNIFF_LINES]:
        line = line.strip()
        if not line:
            continue
        try:
            orjson.loads(line)
            return "jsonl"
        except orjson.JSONDecodeError:
            continue
    return "json"


def frames_from_bytes(body: bytes, *, run_key: str, provider: str, api: str,
                      framing: str = "auto", transport: Transport = "sse", stream_id: str = "s0",
                      received_at: int = 0, tenant: str = "default",
                      http_status: int | None = None) -> list[ProviderFrame]:
    """Cut a whole body into ProviderFrames (frame_id ``f"{stream_id}:{index}"``)."""
    if framing == "auto":
        framing = detect_framing(body)
    if framing == "sse":
        if len(body) <= _SSE_SLICE:
            # One slice (most streams): no view to cut, no copy, and no collector pause — a
            # body this size makes at most a few thousand frames, too few for the collector's
            # rescans that gc_paused avoids. Saves ~5 µs a stream (a 10-frame stream is ~25 µs).
            frames = stream_frames(
                messages_of_body(body if type(body) is bytes else bytes(body)), 0, stream_id,
                run_key, provider, api, transport, received_at, tenant)
        else:
            # Tuples, not SSEMessages (the decoder's fast paths build them inline).
            decoder = SSEDecoder(message=as_tuple)
            frames = []
            extend = frames.extend
            view = memoryview(body)
            # Fed in slices, as from a socket: the decoder's messages are short-lived instead
            # of all alive at once beside the frames.
            with gc_paused():
                for start in range(0, len(view) + _SSE_SLICE, _SSE_SLICE):
                    sliced: list[Any] = (decoder.feed(view[start:start + _SSE_SLICE])
                                         if start < len(view) else decoder.close())
                    extend(stream_frames(sliced, len(frames), stream_id, run_key, provider, api,
                                         transport, received_at, tenant))
    else:
        if framing == "jsonl":
            bodies = json_lines(body)
        elif framing == "json-array":
            splitter = JSONArraySplitter()
            bodies = splitter.feed(body) + splitter.close()
        elif framing == "json":
            bodies = [bytes(body).strip()]
            _check_frame_sizes(bodies, len(bodies[0]), "a JSON object")
            # A whole object is a poll response unless the caller says it came another way.
            transport = "poll" if transport == "sse" else transport
        else:
            raise FramingError(
                f"unknown framing {framing!r}; choose one of: auto, {', '.join(FRAMINGS)}")
        content_type = "application/json"
        with gc_paused():
            frames = [ProviderFrame(f"{stream_id}:{index}", run_key, provider, api, transport,
                                    received_at, content_type, data, tenant, stream_id, index)
                      for index, data in enumerate(bodies)]
    if http_status is not None:
        for frame in frames:
            frame.http_status = http_status
    return frames


def _check_frame_sizes(bodies: list[bytes], total: int, what: str) -> None:
    """Refuse a frame over max_event_bytes; only input longer than the limit is measured."""
    limit = current_limits().max_event_bytes
    if total > limit:
        longest = max(map(len, bodies), default=0)
        if longest > limit:
            raise InputLimitError(f"{what} of {longest:,} bytes", "max_event_bytes", value=limit)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a whole body becomes frames (or events).

    Bulk cutting allocates one container per frame and keeps them all; the collector would
    rescan that growing population again and again (measured: ~40% of the time for 200k
    frames). Nothing built here forms reference cycles, so nothing is lost by waiting. Only the
    whole-body paths use this; the incremental decoder (live streams) never touches GC state.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def json_lines(body: bytes) -> list[bytes]:
    """Non-blank lines, without their line endings or surrounding whitespace.

    Raises InputLimitError for a line over max_event_bytes."""
    body = bytes(body)
    if body.startswith(_BOM):
        body = body[3:]
    lines = [line for line in (raw.strip() for raw in body.split(b"\n")) if line]
    _check_frame_sizes(lines, len(body), "a JSON line")
    return lines


# Where an element's structure can change outside strings.
_STRUCTURAL = re.compile(rb'["{}\[\],]')
_WHITESPACE = frozenset(b" \t\r\n")


class JSONArraySplitter:
    """Incremental splitter of a streamed JSON array into its elements' verbatim bytes.

    Only structure is tracked (string boundaries with their escapes, bracket depth), never
    values, so a malformed element still comes out as one element — the adapter reports it —
    and the array after it is not lost. Elements are yielded as soon as their closing bracket
    arrives; ``close()`` yields an element the input cut short. An element longer than
    ``max_element_bytes`` (default: the limits in effect) raises InputLimitError as soon as so
    much of it is buffered.
    """

    __slots__ = ("_buf", "_pos", "_start", "_depth", "_in_string", "_state", "max_element_bytes")

    _BEFORE, _INSIDE, _AFTER = 0, 1, 2

    def __init__(self, max_element_bytes: int | None = None) -> None:
        self.max_element_bytes = (current_limits().max_event_bytes if max_element_bytes is None
                                  else max_element_bytes)
        self._reset()

    def _reset(self) -> None:
        self._buf = bytearray()
        self._pos = 0  # next byte of _buf to scan
        self._start = -1  # where the open element starts in _buf; -1 between elements
        self._depth = 0
        self._in_string = False
        self._state = self._BEFORE

    def feed(self, chunk: bytes) -> list[bytes]:
        buf = self._buf
        buf += chunk
        out: list[bytes] = []
        i, n = self._pos, len(buf)
        start, depth, in_string, state = self._start, self._depth, self._in_string, self._state
        while i < n:
            if in_string:
                j = buf.find(b'"', i)
                if j < 0:
                    i = n
                    break
                k = j - 1
                while buf[k] == 0x5C:  # a quote after an odd run of backslashes is escaped
                    k -= 1
                in_string = (j - 1 - k) % 2 == 1
                i = j + 1
                continue
            if start < 0:  # between elements, or before / after the array
                c = buf[i]
                if c in _WHITESPACE:
                    i += 1
                elif state == self._BEFORE:
                    if c == 0x5B:  # [
                        state = self._INSIDE
                        i += 1
                    elif buf[i:i + 3] == _BOM and i == 0:
                        i += 3
                    else:
                        raise FramingError(
                            f"a JSON array was expected, the body starts with "
                            f"{_first_bytes(buf[i:])}")
                elif state == self._AFTER:
                    raise FramingError(
                        f"bytes after the end of the JSON array: {_first_bytes(buf[i:])}")
                elif c == 0x2C:  # , between elements
                    i += 1
                elif c == 0x5D:  # ] closes the array
                    state = self._AFTER
                    i += 1
                else:
                    start, depth = i, 0
                continue
            match = _STRUCTURAL.search(buf, i)
            if match is None:
                i = n
                break
            i = match.start()
            c = buf[i]
            if c == 0x22:  # "
                in_string = True
            elif c == 0x7B or c == 0x5B:  # { [
                depth += 1
            elif c == 0x7D or c == 0x5D:  # } ]
                if depth == 0:  # ] after a bare scalar element: the array ends
                    out.append(bytes(buf[start:i]).strip())
                    start, state = -1, self._AFTER
                else:
                    depth -= 1
                    if depth == 0:
                        out.append(bytes(buf[start:i + 1]))
                        start = -1
            elif depth == 0:  # , after a bare scalar element
                out.append(bytes(buf[start:i]).strip())
                start = -1
            i += 1
        # Drop what is consumed; keep the open element.
        keep = start if start >= 0 else i
        if keep:
            del buf[:keep]
            i -= keep
            if start >= 0:
                start = 0
        self._pos, self._start, self._depth, self._in_string, self._state = (
            i, start, depth, in_string, state)
        if n > self.max_element_bytes:  # only then can an element be too long
            self._check_sizes(out)
        return out

    def _check_sizes(self, out: list[bytes]) -> None:
        limit = self.max_element_bytes
        open_size = len(self._buf) if self._start >= 0 else 0
        longest = max(open_size, max(map(len, out), default=0))
        if longest > limit:
            raise InputLimitError(f"a JSON array element of {longest:,} bytes or more",
                                  "max_event_bytes", value=limit)

    def close(self) -> list[bytes]:
        """End of input: an element cut short is returned as it is (it will not parse)."""
        rest = bytes(self._buf[self._start:]).strip() if self._start >= 0 else b""
        self._reset()
        return [rest] if rest else []
