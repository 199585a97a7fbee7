"""``modelevents demo``: the whole system on this machine, end to end, in one command.

Starts the local Kafka broker if needed (or uses ``KAFKA_BOOTSTRAP_SERVERS``), creates the demo's
topics, starts a worker process, the provider simulator and the gateway; feeds recorded sessions
of every provider API as frames (interleaved, some duplicated) and starts runs through the
gateway over real HTTP (one stream cut and resumed, one call answered 429 first, one polled in
the background), and checks every run against ``modelevents normalize`` of the same recording:
same final state, ``seq`` 0…n-1 with no gap and no duplicate. Then the consumers: the tool
executor runs a tool run to completion (receipts, the run continued through the gateway) and a
write that waits for an approval the demo grants over HTTP; the demo's topics are archived and
the archive verified; the finished runs are exported as OpenTelemetry spans to a collector in
the process; and it prints the UI's address (``--keep``: leave it all running for a browser).

The upstream half in detail: the recordings are the project's own fixtures; each run's state is
shown as it moves. The downstream half is services/cli/demo_stages.py. The worker's state and
log, the tools' SQLite database (``tools.db``) and the archive (``archive/``) go to
``$XDG_STATE_HOME/modelevents/demo`` (the settings tree's ``state_dir``, which places the
worker's own default beside it).
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from modelevents.adapters.registry import normalize_bytes
from modelevents.schemas.codec import decode
from modelevents.schemas.end_of_input import with_end_markers
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.run_state import RunState
from modelevents.services.errors import DemoError
from modelevents.services.kafka.clients import make_consumer, start_client, start_producer
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local import kafka_broker
from modelevents.services.local.feeder import feed_frames, frames_for_file
from modelevents.services.local.worker_process import start_worker_process, stop_worker_process
from modelevents.services.run_logic.run_machine import run_state_of

FIXTURES = Path(__file__).resolve().parents[3] / "tests" / "fixtures"
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


# Runs started through the gateway: (label, provider, api, simulator scenario, the recording
# it serves — the offline truth —, request options, what the gateway's call must show).
GATEWAY_SESSIONS: tuple[tuple[str, str, str, str, str | None, dict[str, Any], dict[str, int]],
                        ...] = (
    ("responses-tools", "openai", "openai-responses", "openai-responses/tool-call-parallel",
     "openai-responses/tool-call-parallel.sse", {}, {}),
    ("chat-reasoning", "openai", "openai-chat", "openai-chat/reasoning-then-text",
     "openai-chat/reasoning-then-text.sse", {}, {}),
    ("claude-pause-turn", "anthropic", "anthropic-messages",
     "anthropic-messages/pause-turn-then-continuation",
     "anthropic-messages/pause-turn-then-continuation.sse", {}, {}),
    ("interactions-cut-resumed", "google", "gemini-interactions",
     "gemini-interactions/cut-after-4-overlap-2",
     "gemini-interactions/google-search-cited-event-ids.sse", {}, {"resumed": 1}),
    ("generate-grounding", "google", "gemini-generate", "gemini-generate/grounding-citations",
     "gemini-generate/grounding-citations.sse", {}, {}),
    ("responses-429-retried", "openai", "openai-responses",
     "openai-responses/rate-limited-once", "openai-responses/text-with-usage.sse", {},
     {"retries": 1}),
    ("responses-background-polled", "openai", "openai-responses",
     "openai-responses/text-with-usage", None, {"background": True}, {"polls": 2}),
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="run the whole system locally: broker, worker, gateway and provider simulator "
             "with recorded sessions of every provider API, the tool executor, the audit "
             "archive, OpenTelemetry export and the UI",
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
    p.add_argument("--keep", action="store_true",
                   help="at the end, leave the worker, the gateway (its UI) and the simulator "
                        "running until Ctrl-C")
    p.add_argument("--prefix", default="modelevents.demo.",
                   help="topic prefix of the demo (default: %(default)s)")
    p.set_defaults(run=run)


@dataclass
class DemoRun:
    session: str
    run_id: str
    api: str
    frames: list[ProviderFrame]  # fed as recorded; empty for a run through the gateway
    expected: RunState
    expected_events: int | None  # None: a polled run, whose events no recording gives offline
    state: RunState | None = None
    seqs: set[int] = field(default_factory=set)
    records: int = 0
    via: str = "feed"
    expect_call: dict[str, int] = field(default_factory=dict)  # gateway runs: call facts
    call: dict | None = None  # gateway runs: GET /v1/runs/{id} calls[-1] at the end


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


def _gateway_runs(tag: str) -> list[DemoRun]:
    runs = []
    for label, _provider, api, _scenario, recording, _options, expect in GATEWAY_SESSIONS:
        run_id = f"demo-{tag}-gw-{label}"
        if recording is None:
            expected, count = RunState(run_id=run_id, tenant="default", status="completed"), None
        else:
            path = FIXTURES / recording
            events = normalize_bytes(path.read_bytes(), run_id=run_id, source_name=path.name).events
            expected, count = run_state_of(events, run_id=run_id), len(events)
        runs.append(DemoRun(label, run_id, api, [], expected, count, via="gateway",
                            expect_call=expect))
    return runs


def _settled(run: DemoRun) -> bool:
    return (run.state is not None and run.state.status == run.expected.status
            and len(run.seqs) >= (run.expected_events or run.state.last_seq + 1))


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
                    if tp.topic == settings.topic("events") and isinstance(record, ModelEvent):
                        run.records += 1
                        run.seqs.add(record.seq)
                        continue
                    if not isinstance(record, RunState):
                        raise DemoError(f"{tp.topic} holds a {type(record).__name__} record "
                                        "where the demo reads events and run states")
                    before = run.state.status if run.state else "created"
                    run.state = record
                    if record.status != before:
                        _say(f"  {run.run_id:<58} {before} → {record.status}"
                             + (f" ({record.reason})" if record.reason else ""))
    finally:
        await consumer.stop()


def _report(runs: list[DemoRun], feed_stats) -> bool:
    fed = [r for r in runs if r.via == "feed"]
    print(f"\nfed {feed_stats.sent} records ({feed_stats.duplicates} duplicates) for "
          f"{len(fed)} runs in {feed_stats.seconds:.1f} s; {len(runs) - len(fed)} runs "
          f"through the gateway\n")
    print(f"{'run':<58} {'via':<8} {'api':<19} {'state':<32} events  check")
    ok = True
    for run in runs:
        st = run.state
        if st is None:  # _watch returns once every run settled: each has its state
            raise DemoError(f"run {run.run_id} has no state to report")
        state = f"{st.status}" + (f" ({st.reason})" if st.reason else "")
        if st.needs_reconciliation:
            state += " !"
        contiguous = run.seqs == set(range(len(run.seqs))) == set(range(st.last_seq + 1))
        if run.expected_events is None:  # polled: the provider's own end, cleanly
            good = st.status == run.expected.status and not st.needs_reconciliation
            check = "✓ completed as polled" if good else "✗ expected completed"
        else:
            same = (st.status, st.reason, st.needs_reconciliation) == (
                run.expected.status, run.expected.reason, run.expected.needs_reconciliation)
            good = same and len(run.seqs) == run.expected_events
            check = "✓ as normalize" if good else (
                f"✗ expected {run.expected.status} ({run.expected.reason}), "
                f"{run.expected_events} events")
        call = run.call or {}
        wrong = [f"{name} {call.get(name)}" for name in run.expect_call
                 if call.get(name) != run.expect_call[name]]
        if wrong:
            check += f" ✗ gateway call: {', '.join(wrong)}, expected {run.expect_call}"
        good = good and contiguous and not wrong
        ok &= good
        dupes = run.records - len(run.seqs)
        facts = ", ".join(f"{k} {call[k]}" for k in ("resumed", "retries", "polls") if call.get(k))
        print(f"{run.run_id:<58} {run.via:<8} {run.api:<19} {state:<32} {len(run.seqs):>6}  "
              f"{check}" + (f"  [{dupes} re-sent, deduped by seq]" if dupes else "")
              + (f"  [gateway: {facts}]" if facts else ""))
    print("\n! = needs_reconciliation (here: a stream cut before the provider's terminal event)")
    return ok


def _gateway_config(settings: PipelineSettings, simulator_url: str):
    from pydantic import SecretStr

    from modelevents.services.gateway.config import GatewayConfig, ProviderConfig

    # model_validate: without pydantic's mypy plugin the type checker takes the fields whose
    # default is given as Field(default, …) for required ones; validation is the same either way.
    return GatewayConfig.model_validate({
        "kafka": settings, "port": 0, "poll_initial_s": 0.2, "poll_max_s": 1.0,
        "call_backoff_s": 0.2,
        "providers": {name: ProviderConfig(base_url=simulator_url,
                                             api_key=SecretStr(f"demo-{name}-key"))
                      for name in ("openai", "anthropic", "gemini")}})


async def _start_gateway_runs(gateway_url: str, runs: list[DemoRun]) -> None:
    """POST /v1/runs for each gateway session, as an application would."""
    import httpx

    by_label = {r.session: r for r in runs}
    async with httpx.AsyncClient(base_url=gateway_url, timeout=30) as client:
        for label, provider, api, scenario, _recording, options, _expect in GATEWAY_SESSIONS:
            run = by_label[label]
            body = {"run_id": run.run_id, "max_output_tokens": 512,
                    "target": {"provider": provider, "api": api, "model": f"sim:{scenario}"},
                    "transcript": [{"role": "user", "parts": [{"type": "text",
                                                               "text": "Hello from the demo"}]}],
                    **options}
            response = await client.post("/v1/runs", json=body)
            if response.status_code != 202:
                raise DemoError(f"POST /v1/runs for {label} answered {response.status_code}: "
                                f"{response.text}")
            _say(f"  POST {gateway_url}/v1/runs → 202 {run.run_id} "
                 f"({provider}/{api}{', background' if options.get('background') else ''})")




async def _gateway_calls(gateway_url: str, runs: list[DemoRun]) -> None:
    """What the gateway says of each of its runs' last call (GET /v1/runs/{id})."""
    import httpx

    async with httpx.AsyncClient(base_url=gateway_url, timeout=30) as client:
        for run in runs:
            if run.via == "gateway":
                calls = (await client.get(f"/v1/runs/{run.run_id}")).json().get("calls") or []
                run.call = calls[-1] if calls else None


async def _feed_and_watch(settings, runs, worker, deadline, args, gateway_url):
    frames = _interleave([r for r in runs if r.via == "feed"])
    producer = await start_producer(settings)
    try:
        watch = asyncio.create_task(_watch(settings, runs, worker, deadline))
        await _start_gateway_runs(gateway_url, runs)
        stats = await feed_frames(producer, settings, frames, duplicate=args.duplicate,
                                  rate=args.rate, seed=7)
        _say(f"  fed {stats.sent} records; waiting for the runs to settle ...")
        await watch
        await _gateway_calls(gateway_url, runs)
        return stats
    finally:
        await producer.stop()


def _start_servers(settings: PipelineSettings):
    """The provider simulator and the gateway (pointed at it), each on a free loopback port."""
    from modelevents.services.gateway.app import create_app
    from modelevents.services.gateway.calls.capabilities import load_manifest
    from modelevents.services.local.asgi_thread import serve_in_thread
    from modelevents.services.simulator.server import run_in_thread

    simulator = run_in_thread()
    try:
        app = create_app(_gateway_config(settings, simulator.base_url),
                         manifest=manifest_with_scenarios(load_manifest()))
        return simulator, serve_in_thread(app, name="gateway")
    except BaseException:
        simulator.stop()
        raise


def run(args: argparse.Namespace) -> int:
    import logging

    from modelevents.services import processor

    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    started = time.monotonic()
    _say("modelevents demo: broker, topics, a worker, the gateway and a provider simulator; "
         "recorded sessions of every provider API")
    broker = kafka_broker.start(progress=lambda line: _say(f"  {line}"))
    _say(f"  broker at {broker.bootstrap_servers}"
         + (" (already running)" if not broker.started and not broker.external else ""))
    settings = replace(PipelineSettings(bootstrap_servers=broker.bootstrap_servers),
                       topic_prefix=args.prefix,
                       # The worker's tables and internal topics follow the prefix: two demos on
                       # different prefixes never share state.
                       app_id=args.prefix.strip(".").replace(".", "-") or "modelevents-demo")
    from modelevents.services.kafka.topics import ensure_topics

    asyncio.run(ensure_topics(settings))
    asyncio.run(processor.prepare_topics(settings))
    _say(f"  topics {settings.topic_prefix}{{frames,ingest,events,runs,dlq}} ready")
    # The worker's state and log, beside the worker's own default (the settings tree loads only
    # when a command reads it, as in every command).
    from modelevents.services.cli.settings_tree import state_dir

    workdir = state_dir("demo")
    workdir.mkdir(parents=True, exist_ok=True)
    tag = secrets.token_hex(3)
    runs = _prepare_runs(tag) + _gateway_runs(tag)
    worker = start_worker_process(settings, workdir, workdir / "worker.log")
    simulator = gateway = None
    ok = False
    try:
        _say(f"  worker pid {worker.pid} (log: {workdir / 'worker.log'})")
        simulator, gateway = _start_servers(settings)
        _say(f"  provider simulator at {simulator.base_url}; gateway at {gateway.url} "
             f"(API docs {gateway.url}/docs)")
        fed = [r for r in runs if r.via == "feed"]
        _say(f"  feeding {sum(len(r.frames) for r in fed)} frames of {len(fed)} runs, "
             f"interleaved, {args.duplicate:.0%} duplicated, and starting "
             f"{len(runs) - len(fed)} runs through the gateway:")
        stats = asyncio.run(_feed_and_watch(settings, runs, worker, started + args.timeout, args,
                                            gateway.url))
        ok = _report(runs, stats)
        ok &= _downstream(settings, gateway.url, tag, workdir, runs, args.timeout)
        print(f"\nUI: {gateway.url}/ui (the runs above, live; API docs {gateway.url}/docs)")
        print(f"\n{'all runs match' if ok else 'MISMATCH'} ({time.monotonic() - started:.1f} s)",
              flush=True)
        if args.keep:
            ok &= _keep(broker_url=settings.bootstrap_servers, prefix=settings.topic_prefix,
                  worker=worker, gateway_url=gateway.url, simulator_url=simulator.base_url)
    except KeyboardInterrupt:
        _say("\ninterrupted: stopping the worker")
        return 130
    except DemoError as exc:
        tail = (workdir / "worker.log").read_text(errors="replace").splitlines()[-20:]
        raise DemoError(f"{exc}; last worker log lines:\n" + "\n".join(tail)) from None
    finally:
        for server in (gateway, simulator):
            if server is not None:
                server.stop()
        stop_worker_process(worker)
        if args.stop_broker:
            kafka_broker.stop()
            _say("broker stopped")
        else:
            _say(f"broker left running at {settings.bootstrap_servers}; "
                 f"`modelevents tail --prefix {settings.topic_prefix} --topic runs` shows the runs; "
                 "`modelevents kafka stop` stops it")
    return 0 if ok else 1


def _downstream(settings: PipelineSettings, gateway_url: str, tag: str, workdir: Path,
                runs: list[DemoRun], timeout: float) -> bool:
    """The consumers' half (services/cli/demo_stages.py): tools, archive, OTel; True if all held."""
    from modelevents.services.cli import demo_stages as stages

    _say(f"tools: the tool executor for tenant {stages.TOOLS_TENANT}, two runs through the "
         "gateway:")
    tools = asyncio.run(stages.run_tools(settings, gateway_url, tag, workdir,
                                         time.monotonic() + timeout, _say))
    print()
    stages.report_tools(tools, workdir / "tools.db")
    _say("archive: the demo's topics up to their ends, then verify ...")
    archived, _ = stages.archive_and_verify(settings, workdir / "archive", tag,
                                            list(tools.run_ids.values()))
    finished = [r.run_id for r in runs if r.state is not None
                and r.state.status in stages.TERMINAL]
    finished += [run_id for run_id, state in tools.states.items()
                 if state["status"] in stages.TERMINAL]
    _say(f"otel: exporting {len(finished)} finished runs to a collector in this process ...")
    exported = stages.export_spans(settings, finished)
    return tools.ok and archived and exported


def _keep(*, broker_url: str, prefix: str, worker: subprocess.Popen, gateway_url: str,
          simulator_url: str) -> bool:
    """Leave everything running until Ctrl-C (or SIGTERM): True, or False when the worker
    exits meanwhile."""
    import signal

    def _stop(*_: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    print(f"\nkept running (--keep): the broker at {broker_url} (topics {prefix}*), the worker "
          f"(pid {worker.pid}), the gateway at {gateway_url} (UI {gateway_url}/ui) and the "
          f"provider simulator at {simulator_url}. Ctrl-C stops the worker, the gateway and the "
          "simulator; `modelevents kafka stop` the broker.", flush=True)
    try:
        while worker.poll() is None:
            time.sleep(0.5)
        _say(f"the worker exited with code {worker.returncode}")
        return False
    except KeyboardInterrupt:
        _say("\nstopping the worker, the gateway and the simulator")
        return True


def manifest_with_scenarios(manifest: Any) -> Any:
    """``manifest`` (a gateway capability Manifest) with the model pattern ``sim:*`` on every
    API, offering that API's own capabilities: a gateway whose providers' base URLs point at
    the simulator then routes ``target.model = "sim:<scenario>"`` like a real model."""
    from modelevents.services.gateway.calls.capabilities import Manifest, ModelEntry
    from modelevents.services.simulator.scenarios import SCENARIO_MODEL_PREFIX

    entry = ModelEntry(match=[SCENARIO_MODEL_PREFIX + "*"])
    document = manifest.document.model_copy(update={"apis": [
        api.model_copy(update={"models": [entry, *api.models]})
        for api in manifest.document.apis]})
    return Manifest(document, f"{manifest.source} + simulator scenarios")
