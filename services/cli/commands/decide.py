"""``modelevents decide`` (record a decision, ``decide list``, ``decide show``) and
``modelevents decisions watch`` (the watcher that demotes decisions: consumers/decisions)."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from modelevents.schemas.decision_record import Decision
from modelevents.schemas.errors import InputError
from modelevents.services.cli.kafka_options import (
    ENV_HELP,
    add_kafka_options,
    positive_float,
    positive_int,
    run_async,
    settings_from_args,
)
from modelevents.services.kafka.clients import start_producer
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.migration.bundles.reference import resolve_all
from modelevents.services.migration.decisions import markdown, store
from modelevents.services.migration.decisions.eval_results import (
    EvalSummary,
    read_eval_file,
    read_eval_topic,
)
from modelevents.services.migration.decisions.make import new_decision


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "decide", help="record a decision on a bundle (with its retest triggers); list or show "
                       "decisions",
        description="`decide --bundle B --eval R… --owner NAME` records a decision on bundle B "
                    "(an id or unique prefix on the bundles topic, a bundle file as `bundle create` takes "
                    "or a bundle as `bundle show --json` prints it) resting on eval "
                    "results R (ids on eval-results, or JSON files of `eval run --json`): "
                    "availability from the results, the retest triggers from the bundle "
                    "(model snapshot, event adapters, event schema, tool contracts, capability "
                    "entry) and the results' unknown-event and needs_reconciliation rates. It "
                    "is written to the decisions topic and, with --out, as Markdown with YAML "
                    "front matter. `decide list` shows every decision and its status; `decide "
                    "show ID` one (its demotion, if any: trigger, reason, evidence).",
        epilog=ENV_HELP + " Exit status: 0 done, 2 error (unknown bundle or result, a result "
                          "of another bundle, Kafka unreachable).")
    p.add_argument("action", nargs="?", choices=["list", "show"],
                   help="list: every decision; show ID: one (default: record a decision)")
    p.add_argument("decision", nargs="?", metavar="ID", help="with show: a decision id or a "
                                                             "unique prefix")
    p.add_argument("--bundle", metavar="ID|FILE", help="the bundle decided on")
    p.add_argument("--eval", action="append", default=[], metavar="RESULT",
                   help="an eval result of the bundle (id or JSON file; repeat)")
    p.add_argument("--owner", help="who owns the decision")
    p.add_argument("--exception", action="append", default=[], metavar="TEXT",
                   help="what the decision knowingly accepts (repeat)")
    p.add_argument("--evidence", action="append", default=[], metavar="URL",
                   help="a URL of evidence: report, probe record, ticket (repeat)")
    p.add_argument("--require", action="append", default=[], metavar="CAPABILITY",
                   help="a capability the decision relies on, in the request vocabulary "
                        "(input.image, hosted_tools.web_search …; repeat); tools and "
                        "structured_output are added when the bundle uses them")
    p.add_argument("--out", type=Path, metavar="FILE",
                   help="also write the decision as Markdown with YAML front matter")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_kafka_options(p)
    p.set_defaults(run=_decide)

    decisions = sub.add_parser("decisions", help="the decisions watcher")
    commands = decisions.add_subparsers(dest="decisions_command", required=True)
    w = commands.add_parser(
        "watch", help="demote decisions whose retest triggers fire on live traffic",
        description="Read events, runs and receipts live; a run under a current decision (by "
                    "the bundle its run.started names, else by target provider/api/model) that "
                    "reports another model snapshot, another event adapter revision, another "
                    "event schema, another tool contract version — or a window of runs whose "
                    "unknown-event or needs_reconciliation rate is above the recorded one, or "
                    "a capability manifest entry that changed — demotes the decision: its next "
                    "revision, historical, with the trigger and the record that showed it, is "
                    "written to the decisions topic and logged. Stops on Ctrl-C.",
        epilog=ENV_HELP)
    w.add_argument("--window", type=positive_int, default=20, metavar="RUNS",
                   help="finished runs a rate is measured over (default 20)")
    w.add_argument("--margin", type=float, default=0.0, metavar="RATE",
                   help="how far above the recorded rate a window's may go (default 0)")
    w.add_argument("--capabilities-every", type=positive_float, default=60.0, metavar="S",
                   help="compare the capability manifest with the recorded entries every S "
                        "seconds (and at start; default 60)")
    w.add_argument("--manifest", type=Path, default=None, metavar="FILE",
                   help="the capability manifest (default: the shipped one)")
    w.add_argument("--from-beginning", action="store_true",
                   help="check what the topics hold, not only what arrives from now on")
    w.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help="serve Prometheus metrics on GET http://HOST:PORT/metrics: "
                        "modelevents_decision_current{decision_id,bundle,bundle_id,owner}, "
                        "modelevents_decision_demotions_total{trigger}, "
                        "modelevents_decision_runs_total{decision_id}")
    w.add_argument("--metrics-host", default="127.0.0.1", metavar="ADDRESS",
                   help="the address of the metrics endpoint (default 127.0.0.1)")
    add_kafka_options(w)
    w.set_defaults(run=_watch)


# --- decide ------------------------------------------------------------------------------------


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M")


def _check_urls(urls: list[str]) -> None:
    for url in urls:
        parts = urlsplit(url)
        if not parts.scheme or not (parts.netloc or parts.path):
            raise InputError(f"--evidence {url!r} is not a URL (scheme://…)")


async def _results(settings: PipelineSettings, references: list[str], bundle_id: str
                   ) -> list[EvalSummary]:
    out = []
    for reference in references:
        path = Path(reference)
        out.append(read_eval_file(path, bundle_id) if path.exists()
                   else await read_eval_topic(settings, reference, bundle_id))
    return out


async def _record(args: argparse.Namespace, settings: PipelineSettings) -> Decision:
    if not args.bundle:
        raise InputError("decide needs --bundle ID|FILE (or `decide list`, `decide show ID`)")
    if not args.owner:
        raise InputError("a decision needs an owner: --owner NAME")
    _check_urls(args.evidence)
    (named,) = await resolve_all(settings, [args.bundle])
    bundle = named.bundle
    results = await _results(settings, args.eval, bundle.bundle_id)
    decision = new_decision(bundle, results, owner=args.owner, exceptions=args.exception,
                            evidence=args.evidence, require=args.require)
    producer = await start_producer(settings)
    try:
        await store.publish(producer, settings, decision)
    finally:
        await producer.stop()
    return decision


def _row(d: Decision) -> str:
    why = f"  {d.demotion.trigger}: {d.demotion.reason}" if d.demotion else ""
    t = d.target
    return (f"{d.decision_id[:16]}  {d.status:<10}  r{d.revision:<3} {d.bundle_name[:24]:<24}  "
            f"{t.provider}/{t.api}/{t.snapshot or t.model}  {d.owner}  {_when(d.decided_at)}{why}")


def _decide(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    if args.action == "list":
        decisions = sorted(run_async(store.read_decisions(settings)).values(),
                           key=lambda d: d.decided_at)
        if args.json:
            print(orjson.dumps([d.as_dict() for d in decisions]).decode())
        elif not decisions:
            print("no decisions; record one with `modelevents decide --bundle … --eval … "
                  "--owner …`")
        for d in decisions if not args.json else ():
            print(_row(d))
        return 0
    if args.action == "show":
        if not args.decision:
            raise InputError("decide show needs a decision id (`decide list` shows them)")
        decision = store.find(run_async(store.read_decisions(settings)), args.decision)
    else:
        decision = run_async(_record(args, settings))
        if args.out is not None:
            markdown.write(decision, args.out)
    if args.json:
        print(orjson.dumps(decision.as_dict()).decode())
    else:
        print(markdown.render(decision).split("---\n", 2)[2].strip())
    return 0


# --- decisions watch -----------------------------------------------------------------------------


def _resolver(path: Path | None) -> Any:
    from modelevents.services.gateway.calls.capabilities import MANIFEST_PATH, load_manifest

    manifest_path = path or MANIFEST_PATH

    def resolve(provider: str, api: str, model: str) -> dict[str, Any] | None:
        # Read anew each time: a manifest edited under a running watcher is what it checks for.
        found = load_manifest(manifest_path).lookup(provider, api, model)
        return None if found is None else found.capabilities.model_dump(mode="json")

    return resolve


def _watch(args: argparse.Namespace) -> int:
    from modelevents.consumers.decisions.watcher import Watcher

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    watcher = Watcher(settings_from_args(args), resolve_capabilities=_resolver(args.manifest),
                      capabilities_every=args.capabilities_every, window=args.window,
                      margin=args.margin, from_beginning=args.from_beginning)
    if args.metrics_port is not None:
        # prometheus-client comes with the tools, worker and gateway extras: needed only here.
        from modelevents.consumers.decisions.metrics import serve_metrics

        server = serve_metrics(watcher, args.metrics_port, args.metrics_host)
        logging.getLogger("modelevents.decisions").info(
            "metrics on http://%s:%d/metrics", args.metrics_host, server.server_port)
    try:
        run_async(watcher.run())
    except (KeyboardInterrupt, asyncio.CancelledError):
        pass
    return 0
