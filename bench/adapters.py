"""Adapter throughput over the recorded corpus, one core, one run.

    .venv/bin/python bench/adapters.py [--corpus DIR] [--seconds 0.5] [--rounds 5]

For every provider API, over every recorded *stream* of the corpus (frames re-framed as SSE
bytes, exactly what a provider sends), measures frames per second of:

  (d) floor   split the SSE body and orjson.loads each data field: the practical limit for any
              Python adapter;
  (a) ours    SSE decoding + ProviderFrames + the adapter → ModelEvents (the whole path:
              ``adapters/framing.frames_from_bytes``, then one adapter per stream);
  (b) ours+avro  (a) plus Avro single-object encoding of every event;
  (c) SDK     the official SDK parsing the same bytes into its own stream event objects over an
              in-memory httpx transport (openai, anthropic, google-genai).

Each figure is the best of --rounds rounds, all in this process; in every round each path runs
for at least --seconds, the paths taking turns, so that load on a shared machine falls on all of
them alike and the ratios compare like with like. Prints a Markdown table (the one in docs/performance.md),
then the CPU time per frame of (d), (a) and (b) — the best round's process time, which does not
count time the machine's other tenants took, so it moves less than the rates from hour to hour.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson

from modelevents.adapters.cassette import looks_like_cassette, read_cassette
from modelevents.adapters.framing import detect_framing, frames_from_bytes
from modelevents.adapters.registry import ADAPTERS, api_for_uri, decoded_docs, detect_api
from modelevents.schemas.codec import encode
from modelevents.schemas.errors import ModelEventsError
from modelevents.schemas.frames import ProviderFrame

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures"


@dataclass
class Corpus:
    """Per API: the SSE bodies of every recorded stream and their frame count."""

    streams: dict[str, list[bytes]] = field(default_factory=dict)
    frames: dict[str, int] = field(default_factory=dict)


def _as_sse(frames: list[ProviderFrame]) -> bytes:
    out = bytearray()
    for frame in frames:
        event = frame.sse_event
        if event is None:
            # Recorders that kept only data payloads dropped the event line; the SDKs of
            # Anthropic dispatch on it, so restore it from the payload's own type.
            try:
                event = orjson.loads(frame.body).get("type")
            except (orjson.JSONDecodeError, AttributeError):
                event = None
        if event:
            out += b"event: " + event.encode() + b"\n"
        body = bytes(frame.body)
        if b"\n" in body:  # a pretty-printed JSON-array element: SSE data is one line
            body = orjson.dumps(orjson.loads(body))
        out += b"data: " + body + b"\n\n"
    return bytes(out)


def load_corpus(root: Path) -> Corpus:
    corpus = Corpus()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix != ".md"):
        body = path.read_bytes()
        bodies: list[tuple[bytes, str | None]] = []
        if looks_like_cassette(body):
            bodies = [(i.body, i.uri) for i in read_cassette(body)
                      if i.content_type.startswith("text/event-stream")]
        else:
            bodies = [(body, None)]
        for raw, uri in bodies:
            try:
                framing = detect_framing(raw)
                if framing == "json":
                    continue  # a whole object, not a stream: nothing for an SSE SDK to parse
                frames = frames_from_bytes(raw, run_key="bench", provider="", api="",
                                           framing=framing)
                api = api_for_uri(uri) or detect_api(decoded_docs(frames))
            except ModelEventsError:
                continue
            corpus.streams.setdefault(api, []).append(_as_sse(frames))
            corpus.frames[api] = corpus.frames.get(api, 0) + len(frames)
    return corpus


# --- the four measured paths -------------------------------------------------------------------


def floor(streams: list[bytes]) -> None:
    loads, error = orjson.loads, orjson.JSONDecodeError
    for body in streams:
        for block in body.split(b"\n\n"):
            for line in block.split(b"\n"):
                if line.startswith(b"data: "):
                    try:
                        loads(line[6:])
                    except error:  # [DONE] and the corpus' few malformed frames
                        pass


def ours(api: str, with_avro: bool):
    cls = ADAPTERS[api]
    provider = cls.default_provider

    def run(streams: list[bytes]) -> None:
        for n, body in enumerate(streams):
            adapter = cls(f"bench-{n}")
            # The project's own bytes → ProviderFrames path (what `normalize`, the gateway's
            # forwarded bodies and the local feeder use): SSE decoding, one frame per message.
            for frame in frames_from_bytes(body, run_key=adapter.run_id, provider=provider,
                                           api=api, framing="sse", stream_id="s"):
                events = adapter.feed(frame)
                if with_avro:
                    for event in events:
                        encode(event)
            events = adapter.close()
            if with_avro:
                for event in events:
                    encode(event)
    return run


class _Replay:
    """An in-memory HTTP transport answering every request with the current body as an SSE
    stream. Clients are built once, outside the measured loop: only parsing is timed."""

    def __init__(self, http=httpx) -> None:  # the anthropic SDK ships its own fork, httpx2
        self.body = b""
        self.http = http
        self.client = http.Client(transport=http.MockTransport(self.respond))

    def respond(self, request):
        return self.http.Response(200, headers={"content-type": "text/event-stream"},
                                  content=self.body)


def sdk(api: str):
    """The official SDK reading the same bytes into its typed stream events."""
    if api in ("openai-responses", "openai-chat"):
        import openai
        replay = _Replay()
        client = openai.OpenAI(api_key="x", http_client=replay.client, max_retries=0)

        def parse() -> None:
            if api == "openai-responses":
                stream = client.responses.create(model="m", input="x", stream=True)
            else:
                stream = client.chat.completions.create(model="m", messages=[], stream=True)
            for _ in stream:
                pass
    elif api == "anthropic-messages":
        import anthropic
        import httpx2
        replay = _Replay(httpx2)
        client = anthropic.Anthropic(api_key="x", http_client=replay.client, max_retries=0)

        def parse() -> None:
            for _ in client.messages.create(model="m", max_tokens=1, messages=[], stream=True):
                pass
    elif api in ("gemini-generate", "gemini-interactions"):
        from google import genai
        from google.genai import types
        replay = _Replay()
        client = genai.Client(api_key="x", http_options=types.HttpOptions(
            httpx_client=replay.client))

        def parse() -> None:
            if api == "gemini-generate":
                for _ in client.models.generate_content_stream(model="m", contents="x"):
                    pass
            else:
                for _ in client.interactions.create(model="m", input="x", stream=True):
                    pass
    else:
        raise KeyError(api)

    def run(streams: list[bytes]) -> None:
        for body in streams:
            replay.body = body
            try:
                parse()
            except Exception:
                pass
    return run


def frames_per_second(paths: dict[str, Callable[[list[bytes]], None] | None],
                      streams: list[bytes], frames: int, seconds: float,
                      rounds: int) -> tuple[dict[str, float], dict[str, float]]:
    """Best frames/s of each path over ``rounds`` rounds of at least ``seconds`` each, and its
    best CPU time per frame in µs (process time, one core).

    The paths take turns round by round (floor, ours, ours+Avro, SDK, floor, ...) rather than
    one path's rounds back to back: on a shared machine load comes and goes over seconds, and
    interleaving puts every path through the same spells, so the ratios stay comparable.
    A path that is None (an SDK that could not parse the corpus) reads NaN."""
    best = {name: 0.0 if fn is not None else float("nan") for name, fn in paths.items()}
    cpu = {name: float("inf") if fn is not None else float("nan") for name, fn in paths.items()}
    for _ in range(rounds):
        for name, fn in paths.items():
            if fn is None:
                continue
            count, start, cpu_start = 0, time.perf_counter(), time.process_time()
            while True:
                fn(streams)
                count += 1
                elapsed = time.perf_counter() - start
                if elapsed >= seconds:
                    break
            best[name] = max(best[name], count * frames / elapsed)
            cpu[name] = min(cpu[name], (time.process_time() - cpu_start) / (count * frames) * 1e6)
    return best, cpu


def sdk_or_none(api: str) -> Callable[[list[bytes]], None] | None:
    """The SDK path, or None when the SDK's client cannot be built (reported, not hidden)."""
    try:
        return sdk(api)
    except Exception as exc:
        print(f"  {api}: no SDK path: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS,
                        help="recorded provider corpus (default: %(default)s)")
    parser.add_argument("--seconds", type=float, default=0.5,
                        help="minimum duration of one path's turn in a round (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds; each path's best is reported (default: %(default)s)")
    parser.add_argument("--api", action="append", help="only these APIs (repeatable)")
    args = parser.parse_args()
    if not args.corpus.is_dir():
        sys.exit(f"corpus not found at {args.corpus}; pass --corpus")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as the issue asks
    corpus = load_corpus(args.corpus)
    rows, cpu_rows = [], []
    for api in ADAPTERS:
        if args.api and api not in args.api or api not in corpus.streams:
            continue
        streams, frames = corpus.streams[api], corpus.frames[api]
        print(f"measuring {api}: {len(streams)} streams, {frames} frames ...", file=sys.stderr)
        best, cpu = frames_per_second(
            {"d": floor, "a": ours(api, False), "b": ours(api, True),
             "c": sdk_or_none(api)}, streams, frames, args.seconds, args.rounds)
        d, a, b, c = best["d"], best["a"], best["b"], best["c"]
        rows.append((api, len(streams), frames, d, a, b, c))
        cpu_rows.append((api, cpu["d"], cpu["a"], cpu["b"]))
    print("| API | streams | frames | (d) floor f/s | (a) ours f/s | (a)/(d) | (b) ours+Avro f/s "
          "| (c) SDK f/s | (a)/(c) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for api, n, frames, d, a, b, c in rows:
        print(f"| {api} | {n} | {frames} | {d:,.0f} | {a:,.0f} | {a / d:.0%} | {b:,.0f} | "
              f"{c:,.0f} | {a / c:.1f}× |")
    if len(rows) > 1:
        # The whole corpus at once: total frames over the total time each path needs for them.
        total = sum(r[2] for r in rows)
        d, a, b, c = (total / sum(r[2] / r[i] for r in rows) for i in (3, 4, 5, 6))
        print(f"| **all** | {sum(r[1] for r in rows)} | {total} | {d:,.0f} | {a:,.0f} | "
              f"{a / d:.0%} | {b:,.0f} | {c:,.0f} | {a / c:.1f}× |")
    print("\n| API | (d) CPU µs/frame | (a) CPU µs/frame | (d)/(a) by CPU | (b) CPU µs/frame |")
    print("|---|---:|---:|---:|---:|")
    for api, d, a, b in cpu_rows:
        print(f"| {api} | {d:.2f} | {a:.2f} | {d / a:.0%} | {b:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
