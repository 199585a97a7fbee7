"""``modelevents eval run | show | compare | parity``: run a corpus under bundles through the
gateway, or re-score recorded runs (an audit archive, the topics) without a provider call; show a
result; compare two; diff adapter revisions on recorded frames (eval_parity.py). The scoring is
services/migration/eval/; this module wires its sources: the gateway over HTTP, the topics, the
audit archive and the tool executor's receipt decoder."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

from modelevents.consumers.audit.export import archived_records
from modelevents.consumers.tools.receipts import decode_receipt, is_receipt
from modelevents.schemas.bundles import Bundle
from modelevents.schemas.errors import ConfigError
from modelevents.services.cli.commands import eval_parity
from modelevents.services.cli.kafka_options import (
    ENV_HELP,
    add_kafka_options,
    positive_float,
    positive_int,
    run_async,
    settings_from_args,
)
from modelevents.services.migration.bundles import reference
from modelevents.services.migration.bundles import store as bundle_store
from modelevents.services.migration.eval import live, report, result, store
from modelevents.services.migration.eval.corpus import Corpus, load_corpus
from modelevents.services.migration.eval.evidence import RunEvidence
from modelevents.services.migration.eval.prices import load_prices
from modelevents.services.migration.eval.scoring import score_runs
from modelevents.services.migration.eval.sources import EvidenceBook, paused_cycle_collection


def _say(message: str) -> None:
    print(f"eval: {message}", file=sys.stderr, flush=True)


def _receipt(value: bytes) -> Any | None:
    return decode_receipt(value) if is_receipt(value) else None


def _bundles(args: argparse.Namespace, frozen: bool) -> list[Bundle]:
    """The --bundle references resolved (services/migration/bundles/reference.py). Live, each
    is made sure to be on the bundles topic first — the gateway runs only bundles it finds
    there; frozen, nothing is written."""
    if not args.bundle:
        return []
    settings = settings_from_args(args)
    named = run_async(reference.resolve_all(settings, args.bundle))
    if not frozen:
        for item in run_async(reference.ensure_on_topic(settings, named)):
            _say(f"bundle {item.bundle.bundle_id[:16]}… ({item.bundle.name}) from {item.path} "
                 f"is on {settings.topic(bundle_store.TOPIC)}")
    return [item.bundle for item in named]


def register(sub: argparse._SubParsersAction) -> None:
    ev = sub.add_parser("eval", help="run an eval corpus under bundles (hard gates first, then "
                                     "a paired comparison of accepted runs); adapter parity")
    commands = ev.add_subparsers(dest="eval_command", required=True)
    p = commands.add_parser(
        "run", help="run a corpus under bundles through the gateway, or re-score recorded runs",
        description="Live: POST every task of --corpus, rendered by each --bundle, --repeat "
                    "times, to the gateway's /v1/runs; wait until the runs settle on the runs "
                    "topic; read their events, state, input packets and tool receipts from "
                    "Kafka. Frozen (--from-archive DIR or --from-topic): re-score the eval runs "
                    "an audit archive or the topics hold, calling no provider. Then: the five "
                    "hard gates per run, each task's checker, and the comparison of accepted "
                    "runs only, the rejected count beside every figure. The result goes to the "
                    "eval-results topic (unless --no-publish), stdout (text or --json) and "
                    "--out.",
        epilog=ENV_HELP + " Exit status: 0 done, 2 error (a corpus or bundle that does not "
                          "load, the gateway or Kafka unreachable).")
    p.add_argument("--corpus", required=True, metavar="DIR",
                   help="the corpus directory, or `example` for the one shipped")
    p.add_argument("--bundle", action="append", default=[], metavar="ID|FILE",
                   help="a bundle: an id or unique prefix on the bundles topic, a bundle file "
                        "(the YAML `bundle create` takes) or a bundle as `bundle show --json` "
                        "prints it; repeat: the first is A, each other is compared with it. "
                        "Live, a bundle from a file is written on the bundles topic first (the "
                        "gateway runs only bundles it finds there). Frozen: only these "
                        "bundles' runs (default: every bundle the runs name)")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--from-archive", type=Path, metavar="DIR",
                        help="re-score the runs an audit archive holds (modelevents audit run)")
    source.add_argument("--from-topic", action="store_true",
                        help="re-score the eval runs the events, runs, run-inputs and receipts "
                             "topics hold")
    p.add_argument("--repeat", type=positive_int, default=1, metavar="N",
                   help="run each task N times per bundle (nondeterminism; default 1)")
    p.add_argument("--gateway", default="http://127.0.0.1:8080", metavar="URL",
                   help="the gateway runs are started on (default %(default)s)")
    p.add_argument("--api-key", default=None, metavar="TOKEN",
                   help="the gateway's bearer token, when it asks for one")
    p.add_argument("--tenant", default=None, help="the tenant the runs are started for")
    p.add_argument("--simulator", action="store_true",
                   help="the gateway's providers are the simulator started with this corpus "
                        "(modelevents simulator --corpus): it answers each task with the "
                        "scenario it names for the API; tasks that name none for a bundle's "
                        "API are not sent")
    p.add_argument("--timeout", type=positive_float, default=300.0, metavar="SECONDS",
                   help="how long to wait for the runs to settle (default 300)")
    p.add_argument("--prices", type=Path, default=None, metavar="FILE",
                   help="the price table (USD per million tokens per model snapshot); without "
                        "it unit cost is left out")
    p.add_argument("--json", action="store_true", help="print the result record as JSON")
    p.add_argument("--out", type=Path, default=None, metavar="FILE",
                   help="also write the result record (JSON) here")
    p.add_argument("--no-publish", action="store_true",
                   help="do not write the result to the eval-results topic")
    add_kafka_options(p)
    p.set_defaults(run=_run)

    s = commands.add_parser("show", help="show an eval result (or list them)",
                            description="The result ID (or a unique prefix) from the "
                                        "eval-results topic; without ID, list every result.")
    s.add_argument("result", nargs="?", default=None, metavar="ID")
    s.add_argument("--json", action="store_true", help="the record as JSON")
    add_kafka_options(s)
    s.set_defaults(run=_show)

    c = commands.add_parser(
        "compare", help="compare two bundles' runs, paired by task",
        description="A and B are RESULT[:BUNDLE] (ids or unique prefixes): the runs of that "
                    "bundle in that result (default its first bundle). Paired by task over "
                    "accepted runs only, with bootstrap intervals and the rejected count of "
                    "each side beside every figure.")
    c.add_argument("a", metavar="A")
    c.add_argument("b", metavar="B")
    c.add_argument("--json", action="store_true", help="the comparison as JSON")
    add_kafka_options(c)
    c.set_defaults(run=_compare)
    eval_parity.register(commands)


def _print_record(record: dict[str, Any], as_json: bool) -> None:
    if as_json:
        sys.stdout.write(result.to_json(record).decode() + "\n")
    else:
        print(report.render(record))


def _frozen_runs(args: argparse.Namespace) -> list[RunEvidence]:
    book = EvidenceBook(_receipt)
    if args.from_archive is not None:
        if not (args.from_archive / "archive.json").is_file():
            raise ConfigError(f"--from-archive {args.from_archive} is not an audit archive (no "
                              "archive.json); `modelevents audit run` writes one")
        book.feed_all(rec.value for rec in archived_records(args.from_archive))
    else:
        settings = settings_from_args(args)
        run_async(_read_topics(settings, book))
    if book.unreadable:
        _say(f"{book.unreadable} records could not be read and were left out")
    return book.runs()


async def _read_topics(settings: Any, book: EvidenceBook) -> None:
    from modelevents.services.kafka.clients import read_records

    for topic in live.EVIDENCE_TOPICS:
        async for rec in read_records(settings, topic, timeout=5.0, to_end=True):
            if rec is not None:
                book.feed(rec.raw)


def _live_runs(args: argparse.Namespace, corpus: Corpus, bundles: list[Bundle]
               ) -> tuple[list[RunEvidence], dict[str, list[str]]]:
    settings = settings_from_args(args)
    plan = live.LivePlan(corpus, bundles, args.repeat, args.tenant, args.simulator,
                         args.timeout, args.api_key)
    started = live.start_runs(args.gateway, plan, _say)
    for note in started.notes:
        _say(note)
    ids = set(started.runs)
    if not ids:
        raise ConfigError("no run was started: the gateway refused every one (above)")
    waiting = run_async(live.wait_settled(settings, ids, args.timeout, _say))
    if waiting:
        _say(f"{len(waiting)} runs had not settled after {args.timeout:.0f} s; scored as they "
             f"stand: {', '.join(sorted(waiting)[:5])}")
    return run_async(live.read_evidence(settings, ids, _receipt)), started.not_started


def _tenant(args: argparse.Namespace, evidence: list[RunEvidence]) -> str | None:
    """The tenant a live eval ran as: --tenant, else the one every run's state names (the
    gateway's default, or the --api-key token's tenant)."""
    if args.tenant:
        return str(args.tenant)
    named = {r.state.tenant for r in evidence if r.state is not None}
    return named.pop() if len(named) == 1 else None


def _run(args: argparse.Namespace) -> int:
    corpus = load_corpus(args.corpus)
    frozen = args.from_archive is not None or args.from_topic
    bundles = _bundles(args, frozen)
    if not frozen and not bundles:
        raise ConfigError("eval run needs --bundle ID|FILE (one or more) to run the corpus under, "
                          "or --from-archive DIR / --from-topic to re-score recorded runs")
    prices = load_prices(args.prices)
    with paused_cycle_collection():
        evidence, not_started = ((_frozen_runs(args), {}) if frozen
                                 else _live_runs(args, corpus, bundles))
        _say(f"scoring {len(evidence)} runs")
        by_id = {b.bundle_id: b for b in bundles}
        grouped, skipped = score_runs(corpus, evidence, by_id, prices,
                                      only=[b.bundle_id for b in bundles] or None)
    if skipped:
        _say(f"{len(skipped)} runs left out, e.g. {skipped[0]}")
    if not grouped or not any(grouped.values()):
        raise ConfigError(f"no run of a task of {corpus.ref} under a bundle was found")
    record = result.build_result(corpus.ref, "frozen" if frozen else "live", grouped,
                                 {b.bundle_id: b.name for b in bundles},
                                 not_started=not_started,
                                 tenant=None if frozen else _tenant(args, evidence))
    if args.out is not None:
        args.out.write_bytes(result.to_json(record) + b"\n")
    if not args.no_publish:
        run_async(store.publish(settings_from_args(args), record))
        _say(f"result {record['result_id']} written to the {store.TOPIC} topic")
    _print_record(record, args.json)
    return 0


def _show(args: argparse.Namespace) -> int:
    results = run_async(store.read_all(settings_from_args(args)))
    if args.result is None:
        listing = [{"result_id": r["result_id"], "corpus": r["corpus"], "mode": r["mode"],
                    "created_at": r["created_at"],
                    "bundles": [b["bundle"] for b in r["bundles"]]}
                   for r in sorted(results.values(), key=lambda r: r["created_at"])]
        if args.json:
            sys.stdout.write(orjson.dumps(listing, option=orjson.OPT_INDENT_2).decode() + "\n")
        else:
            for item in listing:
                print(f"{item['result_id'][:20]}  {item['corpus']:<20} {item['mode']:<7} "
                      f"{len(item['bundles'])} bundles")
        return 0
    _print_record(store.pick(results, args.result), args.json)
    return 0


def _side(results: dict[str, dict[str, Any]], spec: str) -> tuple[dict[str, Any], str]:
    wanted, _, bundle = spec.partition(":")
    record = store.pick(results, wanted)
    ids = [b["bundle"] for b in record["bundles"]]
    chosen = [b for b in ids if b.startswith(bundle)] if bundle else ids[:1]
    if len(chosen) != 1:
        raise ConfigError(f"{spec}: result {record['result_id'][:20]} has bundles "
                          f"{', '.join(i[:16] for i in ids)}; name one as RESULT:BUNDLE")
    return record, chosen[0]


def _compare(args: argparse.Namespace) -> int:
    results = run_async(store.read_all(settings_from_args(args)))
    (ra, a), (rb, b) = _side(results, args.a), _side(results, args.b)
    figures = result.comparison(result.scored_runs(ra, a), result.scored_runs(rb, b))
    doc = {"a": {"result_id": ra["result_id"], "bundle": a},
           "b": {"result_id": rb["result_id"], "bundle": b}, "figures": figures}
    if ra["corpus"] != rb["corpus"]:
        _say(f"the results are of different corpora ({ra['corpus']}, {rb['corpus']}): only "
             "tasks of the same id are paired")
    if args.json:
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    print(report.render_comparison(doc))
    return 0
