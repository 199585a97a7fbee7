"""The drop-in proxy against calling the provider directly, and against LiteLLM's proxy.

    .venv/bin/python bench/proxy.py                # --api chat --streams 100 --chunks 50 --interval-ms 10
    .venv/bin/python bench/proxy.py --api responses
    .venv/bin/python bench/proxy.py --no-litellm   # without LiteLLM (no venv of its own needed)

Starts a broker of its own (services/local/kafka_broker.py), the pipeline's topics, a worker,
the provider simulator (its own process, serving the bench's Chat Completions or Responses
streams), the gateway (``modelevents gateway``, OpenAI pointed at the simulator) and LiteLLM's
proxy (``litellm --config … --port …`` from a venv of its own, bench/litellm_proxy.py; every
model an OpenAI-compatible upstream at the simulator). A raw asyncio client in a fifth process
(bench/stream_client.py) streams the same requests to each arm, taking turns per round — every
paced round first, 5 s after the warm-up, then the unpaced bursts (a burst's tens of thousands
of frames keep the broker, the worker and the gateway's tee busy for seconds after it, on the
same cores: paced streams right after one measure that, not the proxy):

- direct: ``POST /v1/chat/completions`` (or ``/v1/responses``) at the simulator — the baseline;
- modelevents: the same request at the gateway's drop-in route (bytes passed through, every
  frame teed to ``frames``);
- LiteLLM: the same request at LiteLLM's proxy.

Figures, per arm and against direct in the same run:
- per-chunk delay: the simulator writes one chunk every ``--interval-ms``, each carrying the
  CLOCK_MONOTONIC time of its write (the simulator's ``stamp`` knob); the client subtracts it
  from the chunk's arrival. Added latency = the arm's percentile − direct's;
- time to first byte of the response, and to its first chunk;
- chunks/s with ``--burst-concurrency`` streams of ``--burst-chunks`` unpaced chunks at once,
  and the CPU time per chunk of the process in between (simulator, gateway, LiteLLM);
- for modelevents: the distinct frames on ``frames`` against every frame the simulator sent
  it, and each stream's end marker. Exit 1 when a target (issue #29) is not met.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import litellm_proxy  # bench/, beside this script
from proc_stats import cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
PACED, BURST = "bench/paced", "bench/burst"
# After the warm-up's bursts, before the paced streams: the worker digests their frames.
SETTLE_S = 5.0


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the streams ---------------------------------------------------------------------------------


def delta_text(index: int, stamped: bool) -> str:
    """The text of delta ``index``: the simulator's stamp marker, or its number. Never the same
    text twice in a row: LiteLLM cuts a stream whose chunks repeat ("The model is repeating
    the same chunk")."""
    return "ts:@sent_ns@ " if stamped else f"n:{index} "


def chat_recording(chunks: int, stamped: bool) -> bytes:
    """A Chat Completions stream: a role chunk, ``chunks`` text deltas (each ``ts:@sent_ns@``
    when ``stamped``, the simulator's stamp marker), a finish chunk, a usage chunk, [DONE]."""
    def chunk(delta: dict, finish: str | None = None, **extra: object) -> bytes:
        doc = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 1767225600,
               "model": "gpt-4o-mini-2024-07-18", "system_fingerprint": "fp_bench",
               "choices": [{"index": 0, "delta": delta, "logprobs": None,
                            "finish_reason": finish}] if delta is not None else [], **extra}
        return b"data: " + json.dumps(doc, separators=(",", ":")).encode() + b"\n\n"
    return b"".join([chunk({"role": "assistant", "content": ""}),
                     *(chunk({"content": delta_text(i, stamped)}) for i in range(chunks)),
                     chunk({}, "stop"),
                     chunk(None, usage={"prompt_tokens": 9, "completion_tokens": chunks,
                                        "total_tokens": 9 + chunks}),
                     b"data: [DONE]\n\n"])


def responses_recording(chunks: int, stamped: bool) -> bytes:
    """An OpenAI Responses stream: created, in_progress, the item and part added, ``chunks``
    text deltas (stamped as in :func:`chat_recording`), the text, part and item done, completed
    with usage. The folded texts say "bench", not the deltas: a stamp belongs to a delta."""
    events: list[dict] = []
    response = {"id": "resp_bench", "object": "response", "created_at": 1767225600,
                "status": "in_progress", "model": "gpt-5-mini-2025-08-07", "output": [],
                "usage": None, "error": None, "incomplete_details": None}
    part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    item = {"id": "msg_bench", "type": "message", "status": "in_progress", "role": "assistant",
            "content": []}
    at = {"item_id": "msg_bench", "output_index": 0, "content_index": 0}
    done_part = dict(part, text="bench")
    done_item = dict(item, status="completed", content=[done_part])
    events += [{"type": "response.created", "response": response},
               {"type": "response.in_progress", "response": response},
               {"type": "response.output_item.added", "output_index": 0, "item": item},
               {"type": "response.content_part.added", **at, "part": part}]
    events += [{"type": "response.output_text.delta", **at, "delta": delta_text(i, stamped),
                "logprobs": []} for i in range(chunks)]
    events += [{"type": "response.output_text.done", **at, "text": "bench", "logprobs": []},
               {"type": "response.content_part.done", **at, "part": done_part},
               {"type": "response.output_item.done", "output_index": 0, "item": done_item},
               {"type": "response.completed", "response": dict(
                   response, status="completed", output=[done_item],
                   usage={"input_tokens": 9, "output_tokens": chunks, "total_tokens": 9 + chunks,
                          "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}})}]
    return b"".join(f"event: {e['type']}\ndata: ".encode()
                    + json.dumps({"type": e["type"], "sequence_number": n,
                                  **{k: v for k, v in e.items() if k != "type"}},
                                 separators=(",", ":")).encode() + b"\n\n"
                    for n, e in enumerate(events))


@dataclass(frozen=True)
class Api:
    """One provider API the bench streams: its simulator API, path, recording, request."""

    name: str
    path: str
    recording: Callable[[int, bool], bytes]
    body: Callable[[str], dict]


APIS = {
    "chat": Api("openai-chat", "/v1/chat/completions", chat_recording, lambda model: {
        "model": model, "stream": True, "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "Say something."}]}),
    "responses": Api("openai-responses", "/v1/responses", responses_recording, lambda model: {
        "model": model, "stream": True, "store": False, "input": "Say something."}),
}


def frames_of(recording: bytes) -> int:
    return recording.count(b"\n\n")


def request_body(api: Api, scenario: str) -> bytes:
    return json.dumps(api.body(f"sim:{scenario}")).encode()


# --- the simulator (its own process) -------------------------------------------------------------


def simulator_main(args: argparse.Namespace) -> int:
    import uvicorn

    from modelevents.services.simulator.app import Simulator
    from modelevents.services.simulator.scenarios import Knobs, Scenario, ScenarioRegistry
    from modelevents.services.simulator.server import quiet_cuts

    folder = Path(args.workdir)
    registry = ScenarioRegistry.default(with_corpus=False)
    paced, burst = folder / "paced.sse", folder / "burst.sse"
    api = APIS[args.api]
    paced.write_bytes(api.recording(args.chunks, True))
    burst.write_bytes(api.recording(args.burst_chunks, False))
    registry.scenarios[PACED] = Scenario(PACED, paced, api.name, Knobs(
        interval_ms=args.interval_ms, stamp=True, chunking=False))
    registry.scenarios[BURST] = Scenario(BURST, burst, api.name, Knobs(chunking=False))
    quiet_cuts()
    # Idle connections kept 2 minutes, as a provider's servers keep them: with uvicorn's 5 s a
    # proxy's pooled connection can be closed just as it is reused (LiteLLM's aiohttp then
    # answers 500 "Connection error").
    config = uvicorn.Config(Simulator(registry).app, host="127.0.0.1", port=args.sim_port,
                            log_level="warning", lifespan="off", timeout_keep_alive=120)
    uvicorn.Server(config).run()
    return 0


# --- the load (its own process) ------------------------------------------------------------------


def pct(values: list[int], p: float) -> float:
    """The ``p`` percentile of nanosecond values, in ms."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] / 1e6 if ordered else 0.0


def load_main(args: argparse.Namespace) -> int:
    from stream_client import request_bytes, streams

    arms = json.loads(args.arms)
    sim_pid = args.simulator_pid
    out: dict[str, dict] = {arm["name"]: {"delays": [], "ttfb": [], "first": [],
                                          "failures": [], "rates": [], "paced_chunks": [], "stream_cpu_ms": [], "cpu_us": [],
                                          "sim_cpu_us": [], "sent": {PACED: 0, BURST: 0}}
                            for arm in arms}

    def requests(arm: dict, scenario: str, count: int) -> list[bytes]:
        out[arm["name"]]["sent"][scenario] += count
        api = APIS[args.api]
        return [request_bytes("127.0.0.1", arm["port"], arm["prefix"] + api.path,
                              request_body(api, scenario), arm.get("headers"))
                for _ in range(count)]

    def note(arm: dict, results: list, deltas: int) -> None:
        mine = out[arm["name"]]
        for result in results:
            if result.status != 200:
                mine["failures"].append(f"{result.status} {result.body_head[:200]!r}")
            elif result.deltas != deltas:
                # A 200 whose stream was cut or ended in an error event.
                mine["failures"].append(f"200, but {result.deltas} of {deltas} deltas: "
                                        f"{result.body_head[:200]!r}")

    def turns(round_: int) -> list[dict]:
        # Taking turns, the order rotated each round: a slow moment of the machine is shared
        # out, not all one arm's.
        return arms[round_ % len(arms):] + arms[:round_ % len(arms)]

    async def go() -> None:
        for arm in arms:
            say(f"  load: warming up {arm['name']} ...")
            results, _ = await streams("127.0.0.1", arm["port"],
                                       requests(arm, BURST, 2 * args.concurrency),
                                       args.concurrency)
            note(arm, results, args.burst_chunks)
        # Every paced round before the first burst, and a pause after the warm-up: the
        # latencies are of streams at a steady pace, not of the seconds after a burst (the
        # broker, the worker and the gateway's tee still busy with its thousands of frames).
        await asyncio.sleep(SETTLE_S)
        for round_ in range(args.rounds):
            for arm in turns(round_):
                say(f"  load: round {round_ + 1}, {arm['name']}: {args.streams} paced streams "
                    f"({args.concurrency} at once) ...")
                cpu = cpu_seconds(arm.get("pid"))
                results, _ = await streams("127.0.0.1", arm["port"],
                                           requests(arm, PACED, args.streams), args.concurrency)
                note(arm, results, args.chunks)
                mine = out[arm["name"]]
                mine["stream_cpu_ms"].append((cpu_seconds(arm.get("pid")) - cpu) * 1e3
                                             / args.streams)
                for result in results:
                    if result.status == 200:
                        mine["delays"] += result.delays_ns
                        mine["ttfb"].append(result.ttfb_ns)
                        mine["first"].append(result.first_frame_ns)
                        mine["paced_chunks"].append(result.chunks)
        for round_ in range(args.rounds):
            for arm in turns(round_):
                say(f"  load: round {round_ + 1}, {arm['name']}: {args.burst_streams} streams "
                    f"of {args.burst_chunks} chunks, {args.burst_concurrency} at once ...")
                batch = requests(arm, BURST, args.burst_streams)
                cpu, sim_cpu = cpu_seconds(arm.get("pid")), cpu_seconds(sim_pid)
                results, seconds = await streams("127.0.0.1", arm["port"], batch,
                                                 args.burst_concurrency)
                chunks = sum(r.chunks for r in results if r.status == 200)
                mine = out[arm["name"]]
                note(arm, results, args.burst_chunks)
                mine["rates"].append(chunks / seconds)
                if arm.get("pid") and chunks:
                    mine["cpu_us"].append((cpu_seconds(arm["pid"]) - cpu) * 1e6 / chunks)
                if chunks:
                    mine["sim_cpu_us"].append((cpu_seconds(sim_pid) - sim_cpu) * 1e6 / chunks)

    asyncio.run(go())
    summary = {}
    for name, mine in out.items():
        summary[name] = {
            "delay_p50": pct(mine["delays"], 0.50), "delay_p99": pct(mine["delays"], 0.99),
            "delays": len(mine["delays"]),
            "ttfb_p50": pct(mine["ttfb"], 0.50), "ttfb_p99": pct(mine["ttfb"], 0.99),
            "first_p50": pct(mine["first"], 0.50), "first_p99": pct(mine["first"], 0.99),
            "streams": len(mine["ttfb"]),
            "chunks_per_stream": sorted(set(mine["paced_chunks"])),
            "failures": mine["failures"][:5], "failed": len(mine["failures"]),
            "rate": statistics.median(mine["rates"]) if mine["rates"] else 0.0,
            "rates": mine["rates"],
            "cpu_us": statistics.median(mine["cpu_us"]) if mine["cpu_us"] else None,
            "sim_cpu_us": statistics.median(mine["sim_cpu_us"]) if mine["sim_cpu_us"] else None,
            "stream_cpu_ms": statistics.median(mine["stream_cpu_ms"]),
            "sent": mine["sent"]}
    print(json.dumps(summary))
    return 0


# --- the orchestration ---------------------------------------------------------------------------


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "modelevents.services.cli", *args]


def wait_http(url: str, process: subprocess.Popen, what: str, log: Path,
              timeout: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}; see {log}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"{what} did not answer {url} within {timeout:.0f} s; see {log}")


async def frames_on_topic(settings) -> dict[str, int]:
    """What ``frames`` holds now: records, distinct frame ids of the streams' own frames (a
    batch written twice counts once, as the worker dedupes it), and the streams whose
    end-of-stream marker is there (each proxied stream's last record)."""
    from modelevents.schemas.end_of_input import is_end_of_input
    from modelevents.services.kafka.clients import read_records

    records, ids, ended = 0, set(), set()
    async for record in read_records(settings, "frames", to_end=True, timeout=30):
        if record is None or record.value is None:
            continue
        records += 1
        if is_end_of_input(record.value):
            ended.add(record.value.stream_id)
        else:
            ids.add(record.value.frame_id)
    return {"records": records, "frames": len(ids), "streams": len(ended)}


def expected_frames(sent: dict, args: argparse.Namespace) -> int:
    api = APIS[args.api]
    return (sent[PACED] * frames_of(api.recording(args.chunks, True))
            + sent[BURST] * frames_of(api.recording(args.burst_chunks, False)))


def free_ports(count: int) -> list[int]:
    """Ports free on loopback now (bound and released; nothing else here takes them meanwhile
    but another program on the machine could)."""
    holders = [socket.socket() for _ in range(count)]
    for holder in holders:
        holder.bind(("127.0.0.1", 0))
    ports = [holder.getsockname()[1] for holder in holders]
    for holder in holders:
        holder.close()
    return ports


def commit() -> str:
    found = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (found.stdout.strip() or "unknown") + (" (with uncommitted changes)" if dirty else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--api", choices=tuple(APIS), default="chat",
                        help="OpenAI Chat Completions or Responses streams (default: %(default)s)")
    parser.add_argument("--streams", type=int, default=100, help="paced streams per arm and round")
    parser.add_argument("--chunks", type=int, default=50, help="stamped chunks per paced stream")
    parser.add_argument("--interval-ms", type=float, default=10.0, help="pace of those chunks")
    parser.add_argument("--concurrency", type=int, default=8, help="paced streams at once")
    parser.add_argument("--burst-streams", type=int, default=64, help="unpaced streams per arm "
                        "and round")
    parser.add_argument("--burst-chunks", type=int, default=500, help="unpaced chunks per stream")
    parser.add_argument("--burst-concurrency", type=int, default=32, help="unpaced streams at once")
    parser.add_argument("--rounds", type=int, default=3, help="turns of every arm")
    parser.add_argument("--no-litellm", action="store_true", help="leave LiteLLM's arm out")
    parser.add_argument("--no-modelevents", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--litellm-version", help="a LiteLLM release (default: the newest)")
    parser.add_argument("--port", type=int, default=19900, help="port of the bench's broker "
                        "(the simulator, the gateway and LiteLLM take free ones)")
    parser.add_argument("--sim-port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=("bench", "simulator", "load"), default="bench",
                        help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--arms", help=argparse.SUPPRESS)
    parser.add_argument("--simulator-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode == "bench":
        args.sim_port, args.gateway_port, args.litellm_port = free_ports(3)
    if args.mode == "simulator":
        return simulator_main(args)
    if args.mode == "load":
        return load_main(args)
    litellm = None if args.no_litellm else litellm_proxy.ensure_venv(args.litellm_version)

    from broker import bench_topics  # bench/, beside this script

    workdir = Path(tempfile.mkdtemp(prefix="modelevents-bench-proxy-"))
    result = None
    try:
        with bench_topics(args.port, "proxy") as settings:
            result = run_arms(args, settings, workdir, litellm)
    finally:
        if result is not None and not any(r["failed"] for r in result.values()):
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            say(f"the servers' logs are kept in {workdir}")
    print_table(result, args, litellm_proxy.installed_version() if litellm else None)
    return 0 if verdicts(result) else 1


def run_arms(args: argparse.Namespace, settings, workdir: Path, litellm: Path | None) -> dict:
    """Start the simulator, the worker, the gateway and LiteLLM, run the load, count frames."""
    processes: list[subprocess.Popen] = []
    shape = ["--api", args.api, "--chunks", str(args.chunks),
             "--interval-ms", str(args.interval_ms),
             "--burst-chunks", str(args.burst_chunks), "--sim-port", str(args.sim_port)]
    try:
        arms = start_arms(args, settings, workdir, litellm, shape, processes)
        say("all up; the load generator starts ...")
        load = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--mode", "load",
                               *shape, "--streams", str(args.streams),
                               "--concurrency", str(args.concurrency),
                               "--burst-streams", str(args.burst_streams),
                               "--burst-concurrency", str(args.burst_concurrency),
                               "--rounds", str(args.rounds), "--arms", json.dumps(arms),
                               "--simulator-pid", str(arms[0]["pid"])],
                              stdout=subprocess.PIPE, text=True)
        if load.returncode != 0:
            raise SystemExit(f"the load generator failed with {load.returncode}")
        result = json.loads(load.stdout.strip().splitlines()[-1])
        if "modelevents" in result:
            # The tee is asynchronous: give the last frames a moment to land.
            want = expected_frames(result["modelevents"]["sent"], args)
            streams = sum(result["modelevents"]["sent"].values())
            deadline = time.monotonic() + 60
            while True:
                found = asyncio.run(frames_on_topic(settings))
                if (found["frames"] >= want and found["streams"] >= streams
                        or time.monotonic() > deadline):
                    break
                time.sleep(1.0)
            result["modelevents"]["frames_topic"] = found
            result["modelevents"]["frames_sent"] = want
            result["modelevents"]["streams_sent"] = streams
    finally:
        for process in reversed(processes):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    return result


def start_arms(args: argparse.Namespace, settings, workdir: Path, litellm: Path | None,
               shape: list[str], processes: list[subprocess.Popen]) -> list[dict]:
    """The simulator, then each arm's server (appended to ``processes``), once they answer;
    the arms as the load generator takes them."""
    log_path = workdir / "processes.log"
    log = log_path.open("wb")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    simulator = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--mode",
                                  "simulator", *shape, "--workdir", str(workdir)],
                                 stdout=log, stderr=subprocess.STDOUT, env=env)
    processes.append(simulator)
    sim_url = f"http://127.0.0.1:{args.sim_port}"
    arms = [{"name": "direct", "port": args.sim_port, "prefix": "", "pid": simulator.pid}]
    waits = [(f"{sim_url}/_simulator/scenarios", simulator, "the simulator", log_path)]
    if not args.no_modelevents:
        kafka_args = ["--bootstrap-servers", settings.bootstrap_servers,
                      "--prefix", settings.topic_prefix]
        processes.append(subprocess.Popen(
            cli("worker", *kafka_args, "--app-id", settings.topic_prefix,
                "--workdir", str(workdir / "worker")),
            stdout=log, stderr=subprocess.STDOUT, env=env))
        gateway = subprocess.Popen(cli("gateway", "--port", str(args.gateway_port), *kafka_args,
                                       "--loglevel", "warning"),
                                   stdout=log, stderr=subprocess.STDOUT,
                                   env=dict(env, OPENAI_BASE_URL=f"{sim_url}/v1",
                                            OPENAI_API_KEY="sk-bench"))
        processes.append(gateway)
        arms.append({"name": "modelevents", "port": args.gateway_port,
                     "prefix": "/proxy/openai", "pid": gateway.pid})
        waits.append((f"http://127.0.0.1:{args.gateway_port}/readyz", gateway, "the gateway",
                      log_path))
    if litellm is not None:
        key = "sk-" + secrets.token_hex(32)
        config = litellm_proxy.write_config(workdir / "litellm.yaml", f"{sim_url}/v1",
                                            [f"sim:{PACED}", f"sim:{BURST}"], key)
        server = litellm_proxy.start(litellm, config, args.litellm_port, workdir / "litellm.log")
        processes.append(server)
        arms.append({"name": "LiteLLM", "port": args.litellm_port, "prefix": "",
                     "pid": server.pid, "headers": {"authorization": f"Bearer {key}"}})
        waits.append((f"http://127.0.0.1:{args.litellm_port}/health/liveliness", server,
                      "LiteLLM's proxy", workdir / "litellm.log"))
    for url, process, what, where in waits:
        say(f"waiting for {what} ...")
        wait_http(url, process, what, where, timeout=300)
    return arms


def print_table(result: dict, args: argparse.Namespace, litellm_version: str | None) -> None:
    names = list(result)
    base = result["direct"]
    heads = {"direct": "direct (baseline)", "modelevents": "modelevents",
             "LiteLLM": f"LiteLLM {litellm_version}"}
    print(f"commit {commit()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; OpenAI "
          f"{'Chat Completions' if args.api == 'chat' else 'Responses'} streams, "
          f"`{APIS[args.api].path}`")
    print("| figure | " + " | ".join(heads[n] for n in names) + " |")
    print("|---|" + "---:|" * len(names))

    def row(label: str, cell) -> None:
        print(f"| {label} | " + " | ".join(cell(n, result[n]) for n in names) + " |")

    def timed(key: str):
        def cell(name: str, r: dict) -> str:
            if name == "direct":
                return f"{r[key]:.2f} ms"
            return f"{r[key]:.2f} ms (+{r[key] - base[key]:.2f} ms, ×{r[key] / base[key]:.1f})" \
                if base[key] else f"{r[key]:.2f} ms"
        return cell

    chunks = f"{args.chunks} chunks every {args.interval_ms:g} ms, {args.concurrency} streams at once"
    row(f"per-chunk delay p50 (simulator's write → client; {chunks})", timed("delay_p50"))
    row("per-chunk delay p99 (target: added ≤ 1 ms)", timed("delay_p99"))
    row("time to first byte p50", timed("ttfb_p50"))
    row("time to first byte p99 (target: added ≤ 5 ms)", timed("ttfb_p99"))
    row("time to first chunk p50 / p99", lambda n, r: f"{r['first_p50']:.2f} / "
        f"{r['first_p99']:.2f} ms")
    row(f"chunks/s, {args.burst_concurrency} streams of {args.burst_chunks} unpaced chunks at "
        f"once (median of {args.rounds})", lambda n, r: f"{r['rate']:,.0f}" + (
            "" if n == "direct" else f" ({r['rate'] / base['rate']:.0%})"))
    row("CPU per chunk: the process in between (direct: the simulator) / the simulator",
        lambda n, r: (f"{r['cpu_us']:.0f} µs" if r["cpu_us"] is not None else "—")
        + ("" if n == "direct" else f" / {r['sim_cpu_us']:.0f} µs"))
    row("CPU per paced stream (its request and chunks), the process in between",
        lambda n, r: f"{r['stream_cpu_ms']:.1f} ms")
    row("chunks per paced stream at the client",
        lambda n, r: ", ".join(str(c) for c in r["chunks_per_stream"]) or "—")
    row("stamped chunks timed / streams", lambda n, r: f"{r['delays']:,} / {r['streams']}")
    row("distinct frames on `frames` / frames the simulator sent (streams ended on `frames` / "
        "sent)",
        lambda n, r: (f"{r['frames_topic']['frames']:,} / {r['frames_sent']:,} "
                      f"({r['frames_topic']['streams']:,} / {r['streams_sent']:,})"
                      if "frames_topic" in r else "—"))
    row("failed streams", lambda n, r: str(r["failed"]))
    for name in names:
        for failure in result[name]["failures"]:
            say(f"{name}: {failure}")


def verdicts(result: dict) -> bool:
    """The targets, one line each; True when every one is met."""
    base, ours, theirs = result["direct"], result.get("modelevents"), result.get("LiteLLM")
    met = True

    def line(text: str, ok: bool) -> None:
        nonlocal met
        met = met and ok
        print(f"- {text}: {'met' if ok else 'NOT met'}")

    if ours is not None:
        chunk, first = ours["delay_p99"] - base["delay_p99"], ours["ttfb_p99"] - base["ttfb_p99"]
        line(f"modelevents adds ≤ 1 ms per chunk at p99 ({chunk:+.2f} ms)", chunk <= 1.0)
        line(f"modelevents adds ≤ 5 ms to the first byte at p99 ({first:+.2f} ms)", first <= 5.0)
        found = ours.get("frames_topic", {}).get("frames", 0)
        ended = ours.get("frames_topic", {}).get("streams", 0)
        line(f"every frame on `frames` ({found:,} of {ours.get('frames_sent', 0):,}; "
             f"{ended:,} of {ours.get('streams_sent', 0):,} streams ended)",
             found == ours.get("frames_sent") and ended == ours.get("streams_sent"))
        if theirs is not None:
            line("modelevents adds less than LiteLLM per chunk (p50 and p99) and to the first "
                 "byte", all(ours[k] < theirs[k] for k in
                             ("delay_p50", "delay_p99", "ttfb_p50", "ttfb_p99")))
    line("no stream failed, direct or through modelevents",
         not any(r["failed"] for n, r in result.items() if n != "LiteLLM"))
    return met


if __name__ == "__main__":
    sys.exit(main())
