"""A proxied response's bytes → the ProviderFrames the worker's adapters read, as they arrive.

The client gets the upstream's bytes untouched; a :class:`Framer` gets the same bytes after
them and cuts frames the way the gateway's own calls do (``calls/runner.py``), so the worker
cannot tell a proxied call from one the gateway made:

    sse         every SSE event one frame (transport ``sse``, body = its data, the SSE event name
                and id kept): streams of every API, Gemini's ``alt=sse``
    json-array  every element one frame (Gemini ``streamGenerateContent`` without ``alt=sse``)
    json        the whole body one frame (transport ``poll``, with the HTTP status and request
                id): an answer without streaming, a poll, a cancel, an error

Frame ids are ``{stream_id}:{index}`` (``{stream_id}:{what}`` for a whole body) with a stream id
unique to the proxied request, so a frame written twice (a retried batch) is dropped by the
worker and no two calls of a run collide. Each frame is stamped with the arrival time of the
bytes that completed it. A compressed body (``content-encoding: gzip`` or ``deflate``) is
inflated for the frames only. Cutting frames never raises: what cannot be framed (an SSE event
over the adapters' size limit, a body that does not inflate) ends the framing, logged, and the
client's bytes flow on.
"""

from __future__ import annotations

import logging
import time
import zlib
from typing import Literal

from modelevents.adapters.framing import JSONArraySplitter
from modelevents.adapters.sse import SSEDecoder, as_tuple
from modelevents.schemas.frames import BUNDLE_FRAME_HEADER, ProviderFrame, stream_frames

__all__ = ["Framer", "Framing", "now_ms"]

log = logging.getLogger("modelevents.gateway.proxy")

Framing = Literal["sse", "json-array", "json"]
# Response headers a whole-body frame keeps (as the runner's poll frames do).
_KEPT_HEADERS = ("x-request-id", "request-id")


def now_ms() -> int:
    return int(time.time() * 1000)


class Framer:
    """The frames of one upstream response (see the module docstring)."""

    def __init__(self, framing: Framing, *, run_key: str, provider: str, api: str, tenant: str,
                 stream_id: str, what: str = "create", status: int = 200,
                 headers: dict[str, str] | None = None, content_encoding: str = "",
                 bundle: str | None = None) -> None:
        self.framing = framing
        self.run_key, self.provider, self.api, self.tenant = run_key, provider, api, tenant
        self.stream_id, self.what, self.status = stream_id, what, status
        self.headers = {k: v for k, v in (headers or {}).items() if k in _KEPT_HEADERS}
        # A call under a bundle names it on each of its frames (the adapters put it on
        # run.started): the whole body's headers, and each stream frame's.
        self.bundle = bundle
        if bundle is not None:
            self.headers[BUNDLE_FRAME_HEADER] = bundle
        self.count = 0  # frames cut so far
        self.broken: str | None = None  # why framing stopped
        encoding = content_encoding.strip().lower()
        # wbits 47: a gzip or zlib header, detected (HTTP's "deflate" is zlib-wrapped).
        self._inflate = zlib.decompressobj(47) if encoding in ("gzip", "deflate") else None
        self._sse = SSEDecoder(strict=True, message=as_tuple) if framing == "sse" else None
        self._array = JSONArraySplitter() if framing == "json-array" else None
        self._whole: list[bytes] = []

    def feed(self, chunk: bytes) -> list[ProviderFrame]:
        """The frames the chunk completes (usually none for a whole body)."""
        if self.broken is not None:
            return []
        try:
            data = self._inflate.decompress(chunk) if self._inflate is not None else chunk
            return self._cut(data, now_ms())
        except Exception as exc:  # a size limit, bad compression: framing ends, bytes flow on
            self._break(exc)
            return []

    def close(self) -> list[ProviderFrame]:
        """The frames the end of the body completes (a whole body's one frame)."""
        if self.broken is not None:
            return []
        try:
            rest = self._inflate.flush() if self._inflate is not None else b""
            received = now_ms()
            frames = self._cut(rest, received) if rest else []
            if self._sse is not None:
                frames += self._numbered(self._sse.close(), received)
            elif self._array is not None:
                frames += self._elements(self._array.close(), received)
            else:
                body = b"".join(self._whole).strip()
                if body:
                    frames.append(ProviderFrame(
                        f"{self.stream_id}:{self.what}", self.run_key, self.provider, self.api,
                        "poll", received, "application/json", body, self.tenant,
                        self.stream_id, 0, headers=self.headers, http_status=self.status))
                    self.count += 1
            return frames
        except Exception as exc:
            self._break(exc)
            return []

    def _cut(self, data: bytes, received: int) -> list[ProviderFrame]:
        if not data:
            return []
        if self._sse is not None:
            return self._numbered(self._sse.feed(data), received)
        if self._array is not None:
            return self._elements(self._array.feed(data), received)
        self._whole.append(data)
        return []

    def _numbered(self, messages: list, received: int) -> list[ProviderFrame]:
        if not messages:
            return []
        frames = stream_frames(messages, self.count, self.stream_id, self.run_key,
                               self.provider, self.api, "sse", received, self.tenant)
        if self.bundle is not None:
            for frame in frames:
                frame.headers = {BUNDLE_FRAME_HEADER: self.bundle}
        self.count += len(frames)
        return frames

    def _elements(self, bodies: list[bytes], received: int) -> list[ProviderFrame]:
        frames = []
        for body in bodies:
            frames.append(ProviderFrame(
                f"{self.stream_id}:{self.count}", self.run_key, self.provider, self.api, "sse",
                received, "application/json", body, self.tenant, self.stream_id, self.count,
                headers={BUNDLE_FRAME_HEADER: self.bundle} if self.bundle is not None else {}))
            self.count += 1
        return frames

    def _break(self, exc: Exception) -> None:
        self.broken = f"{type(exc).__name__}: {exc}"
        log.warning("proxy: run %s stream %s: frames end after %d (%s); the client's bytes "
                    "were not affected", self.run_key, self.stream_id, self.count, self.broken)
