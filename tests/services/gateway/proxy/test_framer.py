"""The proxy's framer (services/gateway/proxy/framer.py) cuts what the client got into the frames
the gateway's own calls would have written, whatever the chunking and compression, and never
raises into the relay."""

from __future__ import annotations

import gzip
import random

import pytest

from modelevents.adapters.framing import frames_from_bytes
from modelevents.services.gateway.proxy.framer import Framer
from tests.paths import FIXTURES


def chunks(body: bytes, seed: int) -> list[bytes]:
    rng, out, start = random.Random(seed), [], 0
    while start < len(body):
        end = min(len(body), start + rng.randint(1, 97))
        out.append(body[start:end])
        start = end
    return out


def cut(framer: Framer, body: bytes, seed: int = 1) -> list:
    frames = [f for chunk in chunks(body, seed) for f in framer.feed(chunk)]
    return frames + framer.close()


def fields(frames: list) -> list[tuple]:
    return [(f.frame_id, f.transport, f.content_type, f.body, f.sse_event, f.cursor, f.index)
            for f in frames]


@pytest.mark.parametrize("encoding", ["", "gzip"])
def test_an_sse_stream_makes_the_frames_of_the_whole_body(encoding) -> None:
    body = (FIXTURES / "openai-responses" / "tool-call-parallel.sse").read_bytes()
    wire = gzip.compress(body) if encoding else body
    framer = Framer("sse", run_key="run_1", provider="openai", api="openai-responses",
                    tenant="acme", stream_id="x1.s0", content_encoding=encoding)
    expected = frames_from_bytes(body, run_key="run_1", provider="openai",
                                 api="openai-responses", stream_id="x1.s0", tenant="acme")
    got = cut(framer, wire)
    assert fields(got) == fields(expected) and len(got) > 5
    assert {f.tenant for f in got} == {"acme"} and all(f.received_at > 0 for f in got)


def test_a_json_array_makes_one_frame_per_element() -> None:
    body = (FIXTURES / "gemini-generate" / "tool-call-parallel.json-array").read_bytes()
    framer = Framer("json-array", run_key="run_1", provider="google", api="gemini-generate",
                    tenant="default", stream_id="x1.s0")
    expected = frames_from_bytes(body, run_key="run_1", provider="google",
                                 api="gemini-generate", framing="json-array", stream_id="x1.s0")
    assert fields(cut(framer, body, seed=3)) == fields(expected)


def test_a_whole_body_is_one_poll_frame_with_its_status_and_request_id() -> None:
    framer = Framer("json", run_key="run_1", provider="openai", api="openai-chat",
                    tenant="default", stream_id="x1.p0", what="error", status=429,
                    headers={"x-request-id": "req_1", "x-ratelimit-remaining": "0"})
    [frame] = cut(framer, b'{"error": {"message": "slow down"}}\n')
    assert (frame.frame_id, frame.transport, frame.http_status, frame.headers) == (
        "x1.p0:error", "poll", 429, {"x-request-id": "req_1"})
    assert frame.body == b'{"error": {"message": "slow down"}}'


def test_what_cannot_be_framed_ends_the_framing_without_raising() -> None:
    framer = Framer("sse", run_key="run_1", provider="openai", api="openai-chat",
                    tenant="default", stream_id="x1.s0", content_encoding="gzip")
    assert framer.feed(b"data: not gzip at all\n\n") == []
    assert framer.close() == [] and framer.broken is not None
