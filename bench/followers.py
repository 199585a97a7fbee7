"""Gateway memory with many SSE followers of one run (slow clients).

    .venv/bin/python bench/followers.py            # --followers 200 --deltas 2000

Starts a broker of its own (services/local/kafka_broker.py), the pipeline's topics, a worker and the
gateway (``modelevents gateway``), each in its own process. A run is forwarded to the gateway
in part (``--deltas`` text deltas of an OpenAI Chat Completions stream, the stream left open),
then ``--followers`` raw asyncio clients follow ``GET /v1/runs/{id}/events`` until each has
every event so far, and stay connected. The gateway's resident memory (VmRSS, bench/
proc_stats.py) is read idle, with the followers connected, and after they all left; the
figures and their ratios are printed. Memory only: nothing here is timed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from gateway import wait_ready  # bench/gateway.py, beside this script
from proc_stats import rss_mb

ROOT = Path(__file__).resolve().parents[1]
SETTLE_S = 3.0  # after a phase, before memory is read (allocations and frees settle)


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def chat_stream(deltas: int) -> bytes:
    """An open OpenAI Chat Completions stream: a role chunk and ``deltas`` text deltas."""
    def chunk(delta: dict) -> bytes:
        doc = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1,
               "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": delta,
                                                    "finish_reason": None}]}
        return b"data: " + json.dumps(doc, separators=(",", ":")).encode() + b"\n\n"
    return chunk({"role": "assistant", "content": ""}) + b"".join(
        chunk({"content": f"word{i} "}) for i in range(deltas))


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "modelevents.services.cli", *args]


def forward(port: int, run_id: str, body: bytes) -> None:
    import httpx

    answer = httpx.post(f"http://127.0.0.1:{port}/v1/runs/{run_id}/frames", content=body,
                        params={"api": "openai-chat", "end": "none"}, timeout=120,
                        headers={"content-type": "text/event-stream"})
    if answer.status_code != 200:
        raise SystemExit(f"forwarding failed: {answer.status_code} {answer.text}")


def events_so_far(port: int, run_id: str) -> int:
    import httpx

    answer = httpx.get(f"http://127.0.0.1:{port}/v1/runs/{run_id}/events",
                       params={"follow": "false"}, timeout=120)
    return answer.text.count("\nevent: ")  # one per SSE event (each starts with its id)


async def follower(port: int, run_id: str, last_seq: int, caught_up: asyncio.Event,
                   stop: asyncio.Event) -> None:
    """One SSE follower: reads until it has event ``last_seq``, then stays connected."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /v1/runs/{run_id}/events HTTP/1.1\r\nhost: 127.0.0.1\r\n"
                 "accept: text/event-stream\r\n\r\n".encode())
    wanted, seen = f"id: {last_seq}\n".encode(), b""
    while not caught_up.is_set():
        data = await reader.read(1 << 16)
        if not data:
            raise SystemExit("a follower's connection closed")
        seen = seen[-64:] + data
        if wanted in seen:
            caught_up.set()
    reading = asyncio.create_task(reader.read(1 << 16))  # keep-alives meanwhile
    await stop.wait()
    reading.cancel()
    writer.close()


async def followed(port: int, pid: int, run_id: str, last_seq: int, count: int) -> dict:
    stop = asyncio.Event()
    flags = [asyncio.Event() for _ in range(count)]
    tasks = [asyncio.create_task(follower(port, run_id, last_seq, flag, stop)) for flag in flags]
    await asyncio.wait_for(asyncio.gather(*(flag.wait() for flag in flags)), 600)
    await asyncio.sleep(SETTLE_S)
    connected = rss_mb(pid)
    stop.set()
    await asyncio.gather(*tasks)
    await asyncio.sleep(SETTLE_S)
    return {"connected_mb": connected, "after_mb": rss_mb(pid)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--followers", type=int, default=200)
    parser.add_argument("--deltas", type=int, default=2000, help="events of the run so far")
    parser.add_argument("--port", type=int, default=19980, help="port of the bench's broker")
    parser.add_argument("--gateway-port", type=int, default=19990)
    args = parser.parse_args()

    from modelevents.adapters.registry import normalize_bytes
    from modelevents.services.kafka import topics
    from modelevents.services.kafka.settings import PipelineSettings
    from modelevents.services.local import kafka_broker

    workdir = Path(tempfile.mkdtemp(prefix="modelevents-bench-followers-"))
    kafka = kafka_broker.LocalBrokerSettings(port=args.port, state_root=workdir / "kafka", heap="512m")
    say(f"starting a broker on {args.port} ...")
    broker = kafka_broker.start(kafka, fresh=True, progress=lambda line: say(f"  {line}"))
    prefix = f"bench{uuid.uuid4().hex[:6]}."
    settings = PipelineSettings(bootstrap_servers=broker.bootstrap_servers, topic_prefix=prefix)
    kafka_args = ["--bootstrap-servers", broker.bootstrap_servers, "--prefix", prefix]
    processes: list[subprocess.Popen] = []
    try:
        asyncio.run(topics.ensure_topics(settings))
        log = (workdir / "processes.log").open("wb")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        processes.append(subprocess.Popen(cli("worker", *kafka_args, "--app-id", prefix,
                                              "--workdir", str(workdir / "worker")),
                                          stdout=log, stderr=subprocess.STDOUT, env=env))
        gateway = subprocess.Popen(cli("gateway", "--port", str(args.gateway_port), *kafka_args,
                                       "--loglevel", "warning"),
                                   stdout=log, stderr=subprocess.STDOUT, env=env)
        processes.append(gateway)
        wait_ready(args.gateway_port, gateway, timeout=120.0)
        run_id = f"bench-{uuid.uuid4().hex[:8]}"
        body = chat_stream(args.deltas)
        # What normalize gives but the end-of-input error (the stream stays open here).
        expected = sum(e.kind != "error" for e in normalize_bytes(
            body, api="openai-chat", framing="sse").events)
        forward(args.gateway_port, run_id, body)
        say(f"run {run_id} forwarded; waiting for its events ...")
        deadline = time.monotonic() + 600
        while (count := events_so_far(args.gateway_port, run_id)) < expected:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {count} events after 600 s; see {log.name}")
            time.sleep(1.0)
        time.sleep(SETTLE_S)
        idle = rss_mb(gateway.pid)
        say(f"{count} events; {args.followers} followers connecting ...")
        result = asyncio.run(followed(args.gateway_port, gateway.pid, run_id, count - 1,
                                      args.followers))
    finally:
        for process in reversed(processes):
            process.terminate()
            process.wait(timeout=30)
        kafka_broker.stop(kafka)
    print("| figure | value |\n|---|---:|")
    print(f"| gateway RSS idle (a run of {count:,} events followed by nobody) | {idle:.0f} MB |")
    print(f"| with {args.followers} SSE followers of the run, each caught up | "
          f"{result['connected_mb']:.0f} MB ({result['connected_mb'] / idle:.2f}× idle) |")
    print(f"| after they all left | {result['after_mb']:.0f} MB "
          f"({result['after_mb'] / idle:.2f}× idle) |")
    print(f"| per follower while connected | "
          f"{(result['connected_mb'] - idle) * 1024 / args.followers:.0f} KB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
