"""Gateway throughput and latency at the edge: signed webhook deliveries and a forwarded stream.

    .venv/bin/python bench/gateway.py                 # --seconds 10 --rate 2000 --connections 64

Starts a broker of its own (services/local/kafka_broker.py, like bench/pipeline.py), the pipeline's
topics, and the gateway in its own process (uvicorn, one worker, what `modelevents gateway`
serves). A load generator in a third process talks HTTP/1.1 with keep-alive over loopback; it is
a raw asyncio client (one coroutine per connection, requests pre-built and pre-signed before the
clock starts), far cheaper than httpx, so the client is not what is measured. Figures:

- (a) max load: ``--connections`` connections send signed OpenAI webhook deliveries back to back
  for ``--seconds``: deliveries/s and p50/p99 latency of the 2xx (each after acks=all);
- (b) steady load: deliveries offered at ``--rate`` per second on a fixed schedule (open loop);
  latency is measured from each delivery's scheduled time, so a queue that builds up counts;
- (c) forwarded stream: a large SSE body (``--stream-frames`` events) posted to
  ``/v1/runs/{id}/frames``: frames/s until every frame is acknowledged.

Every response is checked (200 and "accepted"); the count of non-2xx answers is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import hmac
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from proc_stats import cpu_seconds  # bench/, beside this script

ROOT = Path(__file__).resolve().parents[1]
SECRET = "whsec_" + base64.b64encode(b"bench-gateway-secret-32-bytes!!!").decode()


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the load generator (runs in its own process) --------------------------------------------


def signed_request(port: int, webhook_id: str, body: bytes, key: bytes) -> bytes:
    ts = str(int(time.time()))
    sig = base64.b64encode(hmac.new(key, f"{webhook_id}.{ts}.".encode() + body,
                                    hashlib.sha256).digest()).decode()
    head = (f"POST /webhooks/openai HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
            f"webhook-id: {webhook_id}\r\nwebhook-timestamp: {ts}\r\n"
            f"webhook-signature: v1,{sig}\r\n\r\n")
    return head.encode() + body


def deliveries(port: int, count: int, tag: str) -> list[bytes]:
    key = base64.b64decode(SECRET.removeprefix("whsec_"))
    out = []
    for i in range(count):
        # response.failed would also be fetched; the bench measures the edge, so the webhooks
        # name objects of a type that is not fetched: batch.completed (OpenAI Webhooks guide).
        body = json.dumps({"id": f"evt_{tag}_{i}", "object": "event", "created_at": 1,
                           "type": "batch.completed", "data": {"id": f"batch_{tag}_{i % 5000}"}},
                          separators=(",", ":")).encode()
        out.append(signed_request(port, f"wh_{tag}_{i}", body, key))
    return out


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n"):
        if line[:15].lower() == b"content-length:":
            length = int(line[15:])
    body = await reader.readexactly(length) if length else b""
    return status, body


async def max_load(port: int, requests: list[bytes], connections: int, seconds: float) -> dict:
    latencies: list[float] = []
    failures = 0
    position = 0
    deadline = time.perf_counter() + seconds

    async def connection() -> None:
        nonlocal position, failures
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while time.perf_counter() < deadline and position < len(requests):
                request = requests[position]
                position += 1
                start = time.perf_counter()
                writer.write(request)
                status, body = await read_response(reader)
                latencies.append(time.perf_counter() - start)
                if status != 200 or b'"accepted"' not in body:
                    failures += 1
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(connection() for _ in range(connections)))
    elapsed = time.perf_counter() - start
    return summary(latencies, failures, elapsed)


async def steady_load(port: int, requests: list[bytes], rate: float, seconds: float,
                      connections: int) -> dict:
    total = min(len(requests), int(rate * seconds))
    latencies: list[float] = []
    failures = 0
    queue: asyncio.Queue = asyncio.Queue()
    start = time.perf_counter() + 0.2

    async def schedule() -> None:
        for i in range(total):
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            queue.put_nowait((due, requests[i]))
        for _ in range(connections):
            queue.put_nowait(None)

    async def connection() -> None:
        nonlocal failures
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while (item := await queue.get()) is not None:
                due, request = item
                writer.write(request)
                status, body = await read_response(reader)
                latencies.append(time.perf_counter() - due)
                if status != 200 or b'"accepted"' not in body:
                    failures += 1
        finally:
            writer.close()

    await asyncio.gather(schedule(), *(connection() for _ in range(connections)))
    elapsed = time.perf_counter() - start
    return summary(latencies, failures, elapsed) | {"offered_per_s": rate}


async def forwarded(port: int, frames: int) -> dict:
    fixture = (ROOT / "tests/fixtures/openai-responses/text-with-usage.sse").read_bytes()
    events = [e for e in fixture.split(b"\n\n") if e.strip()]
    # The recorded stream's head, then its text deltas repeated, then its terminal events: one
    # big, valid stream with `frames` SSE events.
    head, deltas, tail = events[:4], [e for e in events if b"output_text.delta" in e], events[-3:]
    middle = [deltas[i % len(deltas)] for i in range(max(0, frames - len(head) - len(tail)))]
    body = b"\n\n".join(head + middle + tail) + b"\n\n"
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    request = (f"POST /v1/runs/{run_id}/frames?api=openai-responses HTTP/1.1\r\n"
               f"host: 127.0.0.1:{port}\r\ncontent-type: text/event-stream\r\n"
               f"content-length: {len(body)}\r\n\r\n").encode() + body
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    start = time.perf_counter()
    writer.write(request)
    status, answer = await read_response(reader)
    elapsed = time.perf_counter() - start
    writer.close()
    accepted = json.loads(answer).get("accepted", 0) if status == 200 else 0
    return {"frames": accepted, "body_bytes": len(body), "seconds": elapsed,
            "frames_per_s": accepted / elapsed if elapsed else 0.0, "status": status}


async def measured(pid: int | None, work) -> dict:
    """Run a phase; add the gateway's CPU ms per delivery (or frame): on a shared, noisy
    machine the capacity figure that other processes' load does not distort."""
    before = cpu_seconds(pid)
    result = await work
    used = cpu_seconds(pid) - before
    count = result.get("deliveries") or result.get("frames") or 0
    result["gateway_cpu_s"] = used
    result["gateway_cpu_ms_each"] = used * 1000 / count if count else 0.0
    return result


def summary(latencies: list[float], failures: int, elapsed: float) -> dict:
    ordered = sorted(latencies)

    def pct(p: float) -> float:
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000 if ordered else 0.0

    return {"deliveries": len(latencies), "failures": failures, "seconds": elapsed,
            "per_s": len(latencies) / elapsed if elapsed else 0.0, "p50_ms": pct(0.50),
            "p99_ms": pct(0.99), "max_ms": ordered[-1] * 1000 if ordered else 0.0,
            "mean_ms": statistics.fmean(ordered) * 1000 if ordered else 0.0}


def load_main(args: argparse.Namespace) -> int:
    tag = uuid.uuid4().hex[:6]
    say("  load: signing deliveries ...")
    warm = deliveries(args.port, 2000, f"w{tag}")
    heavy = deliveries(args.port, int(args.seconds * 6000), f"m{tag}")
    steady = deliveries(args.port, int(args.seconds * args.rate) + 10, f"s{tag}")
    result: dict = {}

    async def go() -> None:
        await max_load(args.port, warm, args.connections, 30.0)  # warm-up: JIT-free, but caches
        say("  load: (a) max load ...")
        result["max"] = await measured(args.gateway_pid, max_load(
            args.port, heavy, args.connections, args.seconds))
        await asyncio.sleep(1.0)
        say(f"  load: (b) steady {args.rate:g}/s ...")
        result["steady"] = await measured(args.gateway_pid, steady_load(
            args.port, steady, args.rate, args.seconds, args.connections))
        await asyncio.sleep(1.0)
        say(f"  load: (c) forwarded stream of {args.stream_frames} frames ...")
        result["forwarded"] = await measured(args.gateway_pid,
                                             forwarded(args.port, args.stream_frames))

    asyncio.run(go())
    print(json.dumps(result))
    return 0


# --- the orchestration ------------------------------------------------------------------------


def serve_main(args: argparse.Namespace) -> int:
    """The gateway process: `modelevents gateway` with the bench's settings."""
    from modelevents.services.cli.commands import gateway

    parser = argparse.ArgumentParser()
    gateway.register(parser.add_subparsers())
    gw_args = parser.parse_args(["gateway", "--port", str(args.port), "--bootstrap-servers",
                                 args.bootstrap, "--prefix", args.prefix, "--loglevel", "warning"])
    return gw_args.run(gw_args)


def wait_ready(port: int, process: subprocess.Popen, timeout: float = 60.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the gateway exited with {process.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("the gateway did not become ready")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of (a) and (b)")
    parser.add_argument("--rate", type=float, default=2000.0, help="offered load of (b), per s")
    parser.add_argument("--connections", type=int, default=64, help="keep-alive connections")
    parser.add_argument("--stream-frames", type=int, default=50_000, help="SSE events of (c)")
    parser.add_argument("--port", type=int, default=19960, help="port of the bench's own broker")
    parser.add_argument("--gateway-port", type=int, default=19970)
    parser.add_argument("--mode", choices=("bench", "serve", "load"), default="bench",
                        help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--gateway-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode == "serve":
        args.port = args.gateway_port
        return serve_main(args)
    if args.mode == "load":
        args.port = args.gateway_port
        return load_main(args)

    from modelevents.services.kafka import topics
    from modelevents.services.kafka.settings import PipelineSettings
    from modelevents.services.local import kafka_broker

    workdir = Path(tempfile.mkdtemp(prefix="modelevents-bench-gateway-"))
    kafka = kafka_broker.LocalBrokerSettings(port=args.port, state_root=workdir / "kafka", heap="1g")
    say(f"starting a broker on {args.port} ...")
    broker = kafka_broker.start(kafka, fresh=True, progress=lambda line: say(f"  {line}"))
    prefix = f"bench{uuid.uuid4().hex[:6]}."
    settings = PipelineSettings(bootstrap_servers=broker.bootstrap_servers, topic_prefix=prefix)
    gateway = None
    try:
        asyncio.run(topics.ensure_topics(settings))
        env = dict(os.environ, MODELEVENTS_BENCH="1")
        env["OPENAI_WEBHOOK_SECRET"] = SECRET
        env.pop("OPENAI_API_KEY", None)
        script = str(Path(__file__).resolve())
        common = ["--gateway-port", str(args.gateway_port)]
        gateway = subprocess.Popen([sys.executable, script, "--mode", "serve", *common,
                                    "--bootstrap", broker.bootstrap_servers, "--prefix", prefix],
                                   env=env)
        wait_ready(args.gateway_port, gateway)
        say(f"gateway on {args.gateway_port}; load generator starting ...")
        load = subprocess.run([sys.executable, script, "--mode", "load", *common,
                               "--seconds", str(args.seconds), "--rate", str(args.rate),
                               "--connections", str(args.connections),
                               "--stream-frames", str(args.stream_frames),
                               "--gateway-pid", str(gateway.pid)],
                              capture_output=True, text=True, env=env)
        sys.stderr.write(load.stderr)
        if load.returncode != 0:
            raise SystemExit(f"the load generator failed with {load.returncode}")
        result = json.loads(load.stdout.strip().splitlines()[-1])
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(timeout=30)
        kafka_broker.stop(kafka)
    m, s, f = result["max"], result["steady"], result["forwarded"]
    print("| figure | value |\n|---|---:|")
    print(f"| (a) max load, {args.connections} connections: deliveries/s | {m['per_s']:,.0f} |")
    print(f"| (a) p50 / p99 latency | {m['p50_ms']:.1f} ms / {m['p99_ms']:.1f} ms |")
    print(f"| (b) steady {s['offered_per_s']:,.0f}/s offered: delivered/s | {s['per_s']:,.0f} |")
    print(f"| (b) p50 / p99 latency | {s['p50_ms']:.1f} ms / {s['p99_ms']:.1f} ms |")
    print(f"| (c) forwarded SSE stream, {f['frames']:,} frames ({f['body_bytes'] / 1e6:.1f} MB): "
          f"frames/s | {f['frames_per_s']:,.0f} |")
    print(f"| gateway CPU per delivery (a) / (b) | {m['gateway_cpu_ms_each']:.2f} ms / "
          f"{s['gateway_cpu_ms_each']:.2f} ms |")
    print(f"| gateway CPU per forwarded frame (c) | {f['gateway_cpu_ms_each'] * 1000:.0f} µs |")
    print(f"| non-2xx answers (a)+(b) | {m['failures'] + s['failures']} |")
    print(f"| machine load average at the end | {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
