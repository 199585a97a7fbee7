"""``modelevents demo``: the whole pipeline on this machine, end to end, in one command.

Starts the local Kafka broker if needed (or uses ``KAFKA_BOOTSTRAP_SERVERS``), creates the demo's
topics, starts a worker process, feeds recorded sessions of every provider API from the project's
own fixtures — interleaved, with duplicated frames — and shows each run's state as it moves. At
the end it checks every run against the offline truth (``modelevents normalize`` of the same
file): same final state, and ``seq`` 0…n-1 on ``events`` with no gap and no duplicate.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from modelevents.adapters.registry import normalize_bytes
from modelevents.schemas.codec import decode
from modelevents.schemas.errors import ModelEventsError
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.run_state import RunState
from modelevents.services import kafka_local
from modelevents.services.feeder import feed_frames, frames_for_file, with_end_markers
from modelevents.services.kafka_io import make_consumer, start_client, start_producer
from modelevents.services.run_machine import run_state_of
from modelevents.services.settings import PipelineSettings
from modelevents.services.worker_process import start_worker_process, stop_worker_process

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
# One recorded session per provider API, plus a two-call tool loop and a cut stream.
SESSIONS = (
    "openai-responses/tool-call-parallel.sse",
    "openai-responses/text-with-usage.sse",
    "openai-chat/reasoning-then-text.sse",
    "anthropic-messages/pause-turn-then-continuation.sse",
    "gemini-interactions/google-search-cited-event-ids.sse",
    "gemini-generate/grounding-citations.sse",
    "cassettes/anthropic-tool-loop.yaml",
    "openai-responses/truncated-mid-text.sse",
)


class DemoError(ModelEventsError):
    """The demo could not finish (the worker died, or runs did not settle in time)."""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "demo",
        help="run the whole pipeline locally on recorded sessions of every provider API",
        description=__doc__.split("\n\n")[1].replace("\n", " ").replace("``", "`"))
    p.add_argument("--duplicate", type=float, default=0.15, metavar="RATE",
                   help="share of frames sent twice, as retries would (default: %(default)s)")
    p.add_argument("--rate", type=float, default=150.0, metavar="FRAMES_PER_S",
                   help="feed pace, so that progress is visible (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=180.0, metavar="S",
                   help="give up when the runs have not settled after this long (default: "
                        "%(default)s)")
    p.add_argument("--stop-broker", action="store_true",
                   help="stop the local broker at the end (default: leave it running for "
                        "`modelevents tail` and the next demo)")
    p.add_argument("--prefix", default="modelevents.demo.",
                   help="topic prefix of the demo (default: %(default)s)")
    p.set_defaults(run=run)


@dataclass
class DemoRun:
    session: str
    run_id: str
    api: str
    frames: list[ProviderFrame]
    expected: RunState
    expected_events: int
    state: RunState | None = None
    seqs: set[int] = field(default_factory=set)
    records: int = 0


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _prepare_runs(tag: str) -> list[DemoRun]:
    runs = []
    for session in SESSIONS:
        path = FIXTURES / session
        body = path.read_bytes()
        run_id = f"demo-{tag}-{Path(session).stem}"
        fed = frames_for_file(path, run_id=run_id)
        offline = normalize_bytes(body, run_id=run_id, source_name=path.name)
        # End-of-input markers tell the processor where each recorded stream stopped, as the
        # gateway does when a provider connection closes.
        runs.append(DemoRun(session, run_id, fed.api, with_end_markers(fed.frames),
                            run_state_of(offline.events, run_id=run_id), len(offline.events)))
    return runs


def _interleave(runs: list[DemoRun]) -> list[ProviderFrame]:
    """Round-robin over the runs, each run's frames in order: runs progress side by side."""
    queues = [list(r.frames) for r in runs]
    out: list[ProviderFrame] = []
    while any(queues):
        for queue in queues:
            if queue:
                out.append(queue.pop(0))
    return out


def _settled(run: DemoRun) -> bool:
    return (run.state is not None and run.state.status == run.expected.status
            and len(run.seqs) >= run.expected_events)


async def _watch(settings: PipelineSettings, runs: list[DemoRun], worker: subprocess.Popen,
                 deadline: float) -> None:
    by_id = {r.run_id: r for r in runs}
    consumer = make_consumer(settings, settings.topic("runs"), settings.topic("events"),
                             from_beginning=True)
    await start_client(consumer, settings)
    try:
        while not all(_settled(r) for r in runs):
            if worker.poll() is not None:
                raise DemoError(f"the worker exited with code {worker.returncode}")
            if time.monotonic() > deadline:
                late = ", ".join(r.run_id for r in runs if not _settled(r))
                raise DemoError(f"runs not settled in time: {late}")
            batches = await consumer.getmany(timeout_ms=200)
            for tp, messages in batches.items():
                for message in messages:
                    run = by_id.get(message.key.decode()) if message.key else None
                    if run is None:
                        continue
                    record = decode(message.value)
                    if tp.topic == settings.topic("events"):
                        run.records += 1
                        run.seqs.add(record.seq)
                        continue
                    before = run.state.status if run.state else "created"
                    run.state = record
                    if record.status != before:
                        _say(f"  {run.run_id:<58} {before} → {record.status}"
                             + (f" ({record.reason})" if record.reason else ""))
    finally:
        await consumer.stop()


def _report(runs: list[DemoRun], feed_stats) -> bool:
    print(f"\nfed {feed_stats.sent} records ({feed_stats.duplicates} duplicates) for "
          f"{len(runs)} runs in {feed_stats.seconds:.1f} s\n")
    print(f"{'run':<58} {'api':<19} {'state':<32} events  check")
    ok = True
    for run in runs:
        st = run.state
        state = f"{st.status}" + (f" ({st.reason})" if st.reason else "")
        if st.needs_reconciliation:
            state += " !"
        contiguous = run.seqs == set(range(len(run.seqs)))
        same = (st.status, st.reason, st.needs_reconciliation) == (
            run.expected.status, run.expected.reason, run.expected.needs_reconciliation)
        good = same and contiguous and len(run.seqs) == run.expected_events
        ok &= good
        check = "✓ as normalize" if good else (
            f"✗ expected {run.expected.status} ({run.expected.reason}), "
            f"{run.expected_events} events")
        dupes = run.records - len(run.seqs)
        print(f"{run.run_id:<58} {run.api:<19} {state:<32} {len(run.seqs):>6}  {check}"
              + (f"  [{dupes} re-sent, deduped by seq]" if dupes else ""))
    print("\n! = needs_reconciliation (here: a stream cut before the provider's terminal event)")
    return ok




async def _feed_and_watch(settings, runs, worker, deadline, args):
    frames = _interleave(runs)
    producer = await start_producer(settings)
    try:
        watch = asyncio.create_task(_watch(settings, runs, worker, deadline))
        stats = await feed_frames(producer, settings, frames, duplicate=args.duplicate,
                                  rate=args.rate, seed=7)
        _say(f"  fed {stats.sent} records; waiting for the runs to settle ...")
        await watch
        return stats
    finally:
        await producer.stop()


def run(args: argparse.Namespace) -> int:
    import logging

    from modelevents.services import processor

    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    started = time.monotonic()
    _say("modelevents demo: broker, topics, a worker, recorded sessions of every provider API")
    broker = kafka_local.start(progress=lambda line: _say(f"  {line}"))
    _say(f"  broker at {broker.bootstrap_servers}"
         + (" (already running)" if not broker.started and not broker.external else ""))
    settings = replace(PipelineSettings(bootstrap_servers=broker.bootstrap_servers),
                       topic_prefix=args.prefix,
                       # The worker's tables and internal topics follow the prefix: two demos on
                       # different prefixes never share state.
                       app_id=args.prefix.strip(".").replace(".", "-") or "modelevents-demo")
    from modelevents.services.topics import ensure_topics

    asyncio.run(ensure_topics(settings))
    asyncio.run(processor.prepare_topics(settings))
    _say(f"  topics {settings.topic_prefix}{{frames,ingest,events,runs,dlq}} ready")
    workdir = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    workdir = workdir / "modelevents" / "demo"
    workdir.mkdir(parents=True, exist_ok=True)
    runs = _prepare_runs(secrets.token_hex(3))
    worker = start_worker_process(settings, workdir, workdir / "worker.log")
    _say(f"  worker pid {worker.pid} (log: {workdir / 'worker.log'})")
    _say(f"  feeding {sum(len(r.frames) for r in runs)} frames of {len(runs)} runs, "
         f"interleaved, {args.duplicate:.0%} duplicated:")
    ok = False
    try:
        stats = asyncio.run(_feed_and_watch(settings, runs, worker, started + args.timeout, args))
        ok = _report(runs, stats)
    except KeyboardInterrupt:
        _say("\ninterrupted: stopping the worker")
        return 130
    except DemoError as exc:
        tail = (workdir / "worker.log").read_text(errors="replace").splitlines()[-20:]
        raise DemoError(f"{exc}; last worker log lines:\n" + "\n".join(tail)) from None
    finally:
        stop_worker_process(worker)
        if args.stop_broker:
            kafka_local.stop()
            _say("broker stopped")
        else:
            _say(f"broker left running at {settings.bootstrap_servers}; "
                 f"`modelevents tail --prefix {settings.topic_prefix} --topic runs` shows the runs; "
                 "`modelevents kafka stop` stops it")
    print(f"\n{'all runs match' if ok else 'MISMATCH'} ({time.monotonic() - started:.1f} s)")
    return 0 if ok else 1
