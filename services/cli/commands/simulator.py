"""``modelevents simulator``: the provider simulator on a local port, in the foreground.

Serves OpenAI, Anthropic and Gemini endpoints from recorded streams (services/simulator) and
prints the base URL each official SDK should use. Stop it with Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from modelevents.schemas.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "simulator",
        help="serve the providers' HTTP endpoints from recorded streams (for tests and demos)",
        description="A local HTTP server that speaks OpenAI Responses and Chat Completions, "
                    "Claude Messages and Gemini Interactions / generateContent from recorded "
                    "streams: real SSE split at random byte offsets, resume cursors "
                    "(starting_after, last_event_id), background runs, and request validation "
                    "against the official SDKs' request types. Pick a recording with the "
                    "x-simulator-scenario header or a model named sim:<scenario>. With "
                    "--corpus, a request whose conversation is an eval task (the same user "
                    "text) is answered with the scenario the task names for the request's API, "
                    "whatever model it names (docs/migration.md, 'Running on the simulator'). "
                    "A request that names none is answered by the first by_request rule of "
                    "scenarios.yaml it matches (API, model, what its body asks for), else by "
                    "the endpoint's default. GET /_simulator/scenarios lists them.",
        epilog="knob headers: x-simulator-cut-after-frame N, x-simulator-fail STATUS[:COUNT], "
               "x-simulator-delay-ms MS, x-simulator-chunk-seed N|off, "
               "x-simulator-interval-ms MS (one frame every MS from the stream's start), "
               "x-simulator-stamp 1 (each frame's @sent_ns@ becomes the CLOCK_MONOTONIC ns of "
               "its write), "
               "x-simulator-retry-after-ms MS, x-simulator-poll-steps N, "
               "x-simulator-poll-delay-ms MS, x-simulator-cancel-polls N, "
               "x-simulator-resume-overlap N, x-simulator-model NAME (the model the answer "
               "reports), x-simulator-session ID (separate attempt counters). Needs the SDKs: pip install 'modelevents[simulator]'.")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: %(default)s)")
    p.add_argument("--port", type=int, default=8765,
                   help="port to listen on, 0 for a free one (default: %(default)s)")
    p.add_argument("--fixtures", type=Path, action="append", default=[], metavar="DIR",
                   help="a folder of recordings to serve as well (repeatable); every file "
                        "becomes a scenario named <folder>/<path without suffix>")
    p.add_argument("--corpus", default=None, metavar="DIR",
                   help="an eval corpus (a directory, or `example` for the one shipped): "
                        "answer each of its tasks with the scenario it names for the "
                        "request's API, and serve its recordings/ folder too")
    p.add_argument("--no-corpus", action="store_true",
                   help="do not serve the recorded provider corpus (recordings, not an eval corpus: a shared/fixtures "
                        "folder beside the checkout) even when it is present")
    p.add_argument("--report-model", default=None, metavar="MODEL",
                   help="every answer reports MODEL as the model that answered (its snapshot), "
                        "in place of the recorded one — a provider that moved to another "
                        "snapshot; change it while running with PUT /_simulator/model "
                        '{"model": "…"} (null: the recorded ones again), or per request with '
                        "the x-simulator-model header")
    p.add_argument("--no-validate", action="store_true",
                   help="answer requests without checking them against the providers' schemas")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: the SDKs and the ASGI stack load only when the simulator is wanted.
    try:
        import uvicorn

        from modelevents.services.simulator.app import Simulator
        from modelevents.services.simulator.eval_tasks import TaskIndex
        from modelevents.services.simulator.scenarios import ScenarioRegistry
        from modelevents.services.simulator.server import base_urls, quiet_cuts
    except ImportError as exc:
        raise ConfigError(f"the simulator needs its extra dependencies ({exc}); install them "
                          "with: pip install 'modelevents[simulator]'") from exc
    tasks = TaskIndex.load(args.corpus) if args.corpus else None
    extra = [tasks.recordings] if tasks is not None and tasks.recordings else []
    registry = ScenarioRegistry.default([*args.fixtures, *extra],
                                        with_corpus=not args.no_corpus)
    simulator = Simulator(registry, validate=not args.no_validate, tasks=tasks)
    simulator.report_model = args.report_model
    base = f"http://{args.host}:{args.port}"
    print(f"provider simulator on {base} ({len(registry.scenarios)} scenarios)")
    if tasks is not None:
        print(f"  eval corpus   {tasks.corpus.ref}: {len(tasks.corpus.tasks)} tasks answered "
              "with the scenarios they name")
    for sdk, url in base_urls(base).items():
        print(f"  {sdk:<13} base_url={url}")
    print(f"  scenarios     {base}/_simulator/scenarios")
    print(f"  requests      {base}/_simulator/requests")
    sys.stdout.flush()
    quiet_cuts()
    config = uvicorn.Config(simulator.app, host=args.host, port=args.port, log_level="warning",
                            lifespan="off")
    server = uvicorn.Server(config)
    server.run()
    # uvicorn returns (instead of raising) when it could not bind the port.
    return 0 if server.started else 1
