"""The UI's figures: event on ``events`` → shown in the page, and the page's memory.

    .venv/bin/python bench/ui.py            # --runs 20 --rate 200 --seconds 20 --events 10000

Starts a broker of its own, the topics and the gateway (bench/ui_stack.py; no worker: the bench
writes what a worker would — each run's RunState on ``runs`` and its ModelEvents on ``events``).
Debian's headless Chromium opens one page per run (``/ui#/runs/<id>``, 1280×800), each following
its run over SSE as an operator's would: the pages are tabs of one browser profile, one
operator with 20 runs open, whose tabs share one stream of their runs (``GET /v1/events``,
through a SharedWorker). ``--profiles`` opens each page in a browser context of its own
instead, as separate operators (each profile then has its own stream and worker) — the
bench's setup before the shared stream, when a profile's seventh run view waited for one of
the browser's six connections.

1. **Latency.** Text deltas are written to ``events`` at ``--rate`` events/s in all, round-robin
   over ``--runs`` open runs, for ``--seconds``. For each event: the time just before it is
   produced, and the time the page has put it in the DOM (the page's ``modelevents:rendered``
   event, fired after an event is applied). Baseline, measured in the same run: a plain Python
   SSE client per run (httpx) reading the same ``/events`` streams — the gateway's own floor —
   and a Kafka consumer of ``events`` itself (Kafka's share of it). p50/p99 of each, and the
   page's over the SSE client's.
2. **Memory.** One page follows one run of ``--events`` events (text deltas, every 20th a
   reasoning delta, every 500th a tool call), written as fast as Kafka takes them. The page's
   JS heap after a forced garbage collection and its DOM node count (Chrome DevTools Protocol
   ``Performance.getMetrics``) are read with the run view empty (baseline), after a tenth of
   the events, and after all of them; ratios against the baseline.

Its figures and how to read them: docs/performance.md, "The UI".
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from proc_stats import cpu_seconds
from ui_stack import Stack, chromium, run_off_loop, say, write_records

RENDERED_HOOK = """
window.__rendered = [];
document.addEventListener("modelevents:rendered",
  (e) => window.__rendered.push([e.detail.run_id, e.detail.seq, Date.now()]));
"""


def now_ms() -> float:
    return time.time() * 1000


def event(run_id: str, seq: int, kind: str, payload, at: int):
    from modelevents.schemas.events import Envelope, EventSource, ModelEvent

    event_id = f"{run_id}-{seq}"
    return ModelEvent(event_id=event_id, run_id=run_id, tenant="default", provider="openai",
                      api="openai-chat", model="bench", kind=kind,
                      source=EventSource(frame_id=event_id, index=0, transport="sse"),
                      received_at=at, adapter="bench/1",
                      envelope=Envelope(content_type="text/event-stream",
                                        body=b'{"bench": true}'),
                      payload=payload, seq=seq)


def body_event(run_id: str, seq: int, at: int):
    from modelevents.schemas.events import Reasoning, Text, ToolCall

    if seq % 500 == 0:
        return event(run_id, seq, "tool.call",
                     ToolCall(1, "lookup", f"call_{seq}", '{"q": "bench"}', arguments_valid=True),
                     at)
    if seq % 20 == 0:
        return event(run_id, seq, "reasoning.delta",
                     Reasoning(0, 0, "summary", f"thinking {seq} "), at)
    return event(run_id, seq, "text.delta", Text(2, 0, f"word{seq} and some more text "), at)


def open_runs(stack: Stack, run_ids: list[str]) -> None:
    """Each run started: its state on ``runs`` (so the gateway knows its tenant) and seq 0."""
    from modelevents.schemas.events import RunStarted
    from modelevents.schemas.run_state import RunState

    at = int(now_ms())
    states = [RunState(run_id=r, tenant="default", status="in_progress", provider="openai",
                       api="openai-chat", model="bench", started_at=at, updated_at=at,
                       last_seq=0, event_count=1) for r in run_ids]
    run_off_loop(write_records(stack.settings, "runs", states))
    run_off_loop(write_records(stack.settings, "events", [
        event(r, 0, "run.started", RunStarted("in_progress"), at) for r in run_ids]))


async def produce_paced(settings, run_ids: list[str], rate: float, seconds: float,
                        sent: dict[tuple[str, int], float]) -> None:
    from modelevents.services.kafka import clients

    producer = await clients.start_producer(settings)
    futures = []
    try:
        total = int(rate * seconds)
        start = time.monotonic()
        for i in range(total):
            run_id = run_ids[i % len(run_ids)]
            seq = 1 + i // len(run_ids)
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            sent[(run_id, seq)] = now_ms()
            futures.append(await clients.send_record(producer, settings, "events", run_id,
                                                     body_event(run_id, seq, int(now_ms()))))
        await clients.await_acks(settings, futures)
    finally:
        await producer.stop()


async def produce_all(settings, run_id: str, first: int, last: int) -> None:
    from modelevents.services.kafka import clients

    producer = await clients.start_producer(settings)
    try:
        futures = [await clients.send_record(producer, settings, "events", run_id,
                                             body_event(run_id, seq, int(now_ms())))
                   for seq in range(first, last + 1)]
        await clients.await_acks(settings, futures)
    finally:
        await producer.stop()


async def kafka_reader(settings, run_ids: set[str], direct: dict[tuple[str, int], float],
                       connected: list[str]) -> None:
    """A reader of ``events`` itself (every partition, from its end): Kafka's own share."""
    from modelevents.services.kafka import clients

    connected.append("kafka")
    async for record in clients.read_records(settings, "events", from_beginning=False,
                                             timeout=float("inf")):
        value = record.value if record is not None else None
        if getattr(value, "run_id", None) in run_ids:
            direct[(value.run_id, value.seq)] = now_ms()


def python_followers(url: str, settings, run_ids: list[str],
                     arrived: dict[tuple[str, int], float], direct: dict[tuple[str, int], float],
                     stop: threading.Event, ready: threading.Event) -> None:
    """The baselines, in a thread with its own event loop: one plain SSE reader per run, and a
    consumer of ``events`` itself."""
    import httpx

    async def follow(client: httpx.AsyncClient, run_id: str, connected: list[str]) -> None:
        async with client.stream("GET", f"{url}/v1/runs/{run_id}/events") as response:
            connected.append(run_id)
            async for line in response.aiter_lines():
                if line.startswith("id: "):
                    arrived[(run_id, int(line[4:]))] = now_ms()
                if stop.is_set():
                    return

    async def main() -> None:
        connected: list[str] = []
        async with httpx.AsyncClient(timeout=None) as client:
            tasks = [asyncio.create_task(follow(client, r, connected)) for r in run_ids]
            tasks.append(asyncio.create_task(kafka_reader(settings, set(run_ids), direct,
                                                          connected)))
            while len(connected) < len(run_ids) + 1:
                await asyncio.sleep(0.05)
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.2)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    asyncio.run(main())


def machine_busy(before: tuple[int, int] | None = None):
    """The machine's (busy, total) CPU ticks from /proc/stat; with ``before``: the busy share
    since then (every process of the machine: the bench's and anyone else's)."""
    fields = [int(v) for v in open("/proc/stat").readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    now = (sum(fields) - idle, sum(fields))
    if before is None:
        return now
    return (now[0] - before[0]) / max(1, now[1] - before[1])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def wait_pages(pages: list, want: int, what: str, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while sum(p.evaluate("window.__rendered.length") for p in pages) < want:
        if time.monotonic() > deadline:
            raise SystemExit(f"the pages did not show {what} within {timeout:.0f} s")
        time.sleep(0.2)


def latency(stack: Stack, browser, args: argparse.Namespace) -> dict[str, float]:
    run_ids = [f"lat-{uuid.uuid4().hex[:8]}-{n}" for n in range(args.runs)]
    open_runs(stack, run_ids)
    # A browser context per page, as separate operators (each with its own connections: one
    # profile holds at most six per host), or one for all.
    contexts, pages = [], []
    for run_id in run_ids:
        if not args.profiles and contexts:
            context = contexts[0]  # every page a tab of one profile: one shared stream
        else:
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            context.add_init_script(RENDERED_HOOK)
            contexts.append(context)
        page = context.new_page()
        page.goto(f"{stack.url}/ui#/runs/{run_id}")
        pages.append(page)
    wait_pages(pages, len(run_ids), "every run's first event")
    arrived: dict[tuple[str, int], float] = {}
    direct: dict[tuple[str, int], float] = {}
    stop, ready = threading.Event(), threading.Event()
    floor = threading.Thread(target=python_followers,
                             args=(stack.url, stack.settings, run_ids, arrived, direct, stop,
                                   ready), daemon=True)
    floor.start()
    ready.wait(60)
    sent: dict[tuple[str, int], float] = {}
    say(f"{args.rate:g} events/s over {args.runs} runs for {args.seconds:g} s ...")
    producer = threading.Thread(target=lambda: asyncio.run(produce_paced(
        stack.settings, run_ids, args.rate, args.seconds, sent)))
    cpu_before, wall_before = cpu_seconds(stack.gateway.pid), time.monotonic()
    busy_before = machine_busy()
    producer.start()
    producer.join()
    gateway_cpu = (cpu_seconds(stack.gateway.pid) - cpu_before) / (time.monotonic() - wall_before)
    machine = machine_busy(busy_before)
    wait_pages(pages, len(run_ids) + len(sent), "every event")
    stop.set()
    shown: dict[tuple[str, int], float] = {}
    for page in pages:
        for run_id, seq, at in page.evaluate("window.__rendered"):
            shown[(run_id, seq)] = at
    for context in contexts:
        context.close()
    stages = stage_times(stack.trace, sent, shown) if stack.trace is not None else {}
    page_ms = [shown[key] - at for key, at in sent.items() if key in shown]
    floor_ms = [arrived[key] - at for key, at in sent.items() if key in arrived]
    kafka_ms = [direct[key] - at for key, at in sent.items() if key in direct] or [float("nan")]
    return {"events": len(sent), "shown": len(page_ms), "floor_seen": len(floor_ms),
            "page_p50": percentile(page_ms, 0.5), "page_p99": percentile(page_ms, 0.99),
            "page_max": max(page_ms), "floor_p50": percentile(floor_ms, 0.5),
            "floor_p99": percentile(floor_ms, 0.99), "page_mean": statistics.fmean(page_ms),
            "gateway_cpu": gateway_cpu, "machine_busy": machine,
            "kafka_p50": percentile(kafka_ms, 0.5), "kafka_p99": percentile(kafka_ms, 0.99),
            "stages": stages}


def stage_times(trace, sent: dict[tuple[str, int], float], shown: dict[tuple[str, int], float]
                ) -> dict[str, list[float]]:
    """From bench/traced_gateway.py's lines: each event's time from being produced to the
    gateway's tail decoding it, from there to its SSE bytes handed to the server (the last of
    its followers: the page's and the Python client's), and from there to the page's DOM."""
    got: dict[tuple[str, int], float] = {}
    written: dict[tuple[str, int], float] = {}
    for line in open(trace):
        stage, run_id, seq, at = line.split()
        key = (run_id, int(seq))
        if stage == "got":
            got.setdefault(key, float(at))
        else:
            written[key] = max(written.get(key, 0.0), float(at))
    keys = [k for k in sent if k in got and k in written and k in shown]
    return {"produced → the gateway's tail decoded it": [got[k] - sent[k] for k in keys],
            "→ its SSE bytes handed to the server": [written[k] - got[k] for k in keys],
            "→ in the page's DOM": [shown[k] - written[k] for k in keys]}


def metrics(cdp) -> dict[str, float]:
    cdp.send("HeapProfiler.collectGarbage")
    values = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    return {"heap_mb": values["JSHeapUsedSize"] / 1e6, "nodes": values["Nodes"]}


def memory(stack: Stack, browser, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    run_id = f"mem-{uuid.uuid4().hex[:8]}"
    open_runs(stack, [run_id])
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.add_init_script(RENDERED_HOOK)
    page = context.new_page()
    page.goto(f"{stack.url}/ui#/runs/{run_id}")
    wait_pages([page], 1, "the run's first event")
    cdp = context.new_cdp_session(page)
    cdp.send("Performance.enable")
    out = {"empty run view": metrics(cdp)}
    tenth = args.events // 10
    run_off_loop(produce_all(stack.settings, run_id, 1, tenth))
    wait_pages([page], 1 + tenth, f"{tenth} events")
    out[f"after {tenth:,} events"] = metrics(cdp)
    say(f"{args.events:,} events into one run ...")
    run_off_loop(produce_all(stack.settings, run_id, tenth + 1, args.events))
    wait_pages([page], 1 + args.events, f"{args.events} events")
    out[f"after {args.events:,} events"] = metrics(cdp)
    text_chars = page.evaluate("document.querySelector('.item.text .body').textContent.length")
    out["text"] = {"chars": text_chars}
    context.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rate", type=float, default=200.0, help="events/s over all runs")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--events", type=int, default=10_000, help="events of the memory run")
    parser.add_argument("--port", type=int, default=19960, help="port of the bench's broker")
    parser.add_argument("--gateway-port", type=int, default=19970)
    parser.add_argument("--profiles", action="store_true",
                        help="open each run view in a browser profile of its own, as separate "
                             "operators (the bench's default before the shared stream), rather "
                             "than as tabs of one operator's browser")
    parser.add_argument("--trace", action="store_true",
                        help="run the gateway traced (bench/traced_gateway.py) and print where "
                             "an event's time goes: Kafka, the gateway, the browser")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    trace = Path(tempfile.mkdtemp(prefix="modelevents-bench-ui-trace-")) / "trace.txt"
    stack = Stack(args.port, args.gateway_port, worker=False,
                  trace=trace if args.trace else None)
    try:
        with sync_playwright() as playwright:
            browser = chromium(playwright)
            try:
                lat = latency(stack, browser, args)
                mem = memory(stack, browser, args)
            finally:
                browser.close()
    finally:
        stack.stop()
    load = os.getloadavg()
    print(f"Machine: {os.cpu_count()} cores, load average {load[0]:.1f} / {load[1]:.1f} / "
          f"{load[2]:.1f} (1/5/15 min) when the bench ended; the broker, the gateway, "
          f"{args.runs} Chromium pages and the Python clients share them.\n")
    print(f"Latency: an event on `events` → in the page's DOM; {lat['events']:,} text deltas at "
          f"{args.rate:g}/s over {args.runs} open runs (one page each), {lat['shown']:,} shown.\n")
    print("| | p50 | p99 | max |\n|---|---:|---:|---:|")
    print(f"| page (Chromium, /ui run view) | {lat['page_p50']:.0f} ms | {lat['page_p99']:.0f} ms "
          f"| {lat['page_max']:.0f} ms |")
    print(f"| baseline: a Python SSE client of the same streams | {lat['floor_p50']:.0f} ms | "
          f"{lat['floor_p99']:.0f} ms | |")
    print(f"| Kafka's own share: a consumer of `events` | {lat['kafka_p50']:.0f} ms | "
          f"{lat['kafka_p99']:.0f} ms | |")
    print(f"| the gateway's CPU while the events were written | {lat['gateway_cpu']:.0%} of a "
          "core | | |")
    print(f"| the whole machine's CPU busy meanwhile | {lat['machine_busy']:.0%} | | |")
    print(f"| page ÷ baseline | {lat['page_p50'] / max(lat['floor_p50'], 1):.2f}× | "
          f"{lat['page_p99'] / max(lat['floor_p99'], 1):.2f}× | |")
    if lat["stages"]:
        print("\nWhere the time goes (--trace; each stage's own p50 / p99 — p99s do not add up):\n")
        print("| stage | p50 | p99 |\n|---|---:|---:|")
        for name, values in lat["stages"].items():
            print(f"| {name} | {percentile(values, 0.5):.0f} ms | "
                  f"{percentile(values, 0.99):.0f} ms |")
    base = mem["empty run view"]
    print(f"\nMemory: one page following one run (text {mem['text']['chars']:,} characters at "
          "the end); JS heap after a forced GC, DOM nodes.\n")
    print("| | JS heap | × empty | DOM nodes |\n|---|---:|---:|---:|")
    for name, row in mem.items():
        if name == "text":
            continue
        print(f"| {name} | {row['heap_mb']:.1f} MB | {row['heap_mb'] / base['heap_mb']:.2f}× | "
              f"{row['nodes']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
