"""``modelevents bundle create FILE | show ID | diff A B | list | example``: migration bundles.

create resolves a bundle file (services/migration/bundles/bundle_file.py) and writes the bundle
on the ``bundles`` topic; show, list and diff read it back (an id or a unique prefix of one;
diff also takes bundle files); example prints the file users start from. docs/migration.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from modelevents.schemas.bundle_record import StoredBundle
from modelevents.schemas.bundles import Bundle
from modelevents.services.cli.kafka_options import (
    ENV_HELP,
    add_kafka_options,
    run_async,
    settings_from_args,
)
from modelevents.services.gateway.calls.capabilities import load_manifest
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.migration.bundles import store
from modelevents.services.migration.bundles.bundle_file import EXAMPLE_PATH, read_bundle_file
from modelevents.services.migration.bundles.diff import diff


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bundle",
        help="create, show, diff and list migration bundles (the bundles topic)",
        description="A bundle is everything that shapes a run — instruction text and version, "
                    "target with the model snapshot, request and event adapter revisions, "
                    "event schema, tool contracts, capability manifest entry, sampling — "
                    "content-addressed: its id (bnd-…) is the SHA-256 of its content. create "
                    "reads a bundle file (YAML: name, description, instruction, target, tools, "
                    "sampling; `bundle example` prints one), resolves the rest from the "
                    "installed modelevents and the capability manifest, and writes it on the "
                    "bundles topic (writing it again is harmless). show, list and diff read it "
                    "back; an id may be shortened to any unique prefix. POST /v1/runs with "
                    "\"bundle\": ID runs a request under it (docs/migration.md).",
        epilog=ENV_HELP + " Exit status: 0 ok; 1 (diff) the bundles differ; 2 an invalid "
                          "bundle file (each field at fault is named), an unknown id or an "
                          "ambiguous prefix, or Kafka is unreachable.")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="resolve a bundle file and write the bundle",
                                description="Resolve FILE and write the bundle on the bundles "
                                            "topic; prints its id (--json: the whole bundle).")
    create.add_argument("file", type=Path, metavar="FILE", help="the bundle file (YAML)")
    create.add_argument("--manifest", type=Path, default=None, metavar="FILE",
                        help="the capability manifest to resolve the target against (default: "
                             "the shipped one, as the gateway's default)")
    create.add_argument("--dry-run", action="store_true",
                        help="resolve and print the bundle, write nothing")
    show = actions.add_parser("show", help="print one bundle",
                              description="Print the bundle ID names (an id or a unique "
                                          "prefix).")
    show.add_argument("ref", metavar="ID", help="a bundle id or a unique prefix of one")
    compare = actions.add_parser("diff", help="field-level differences between two bundles",
                                 description="Print each field whose value differs between "
                                             "A and B (dotted paths; tools by name). A and B "
                                             "are bundle ids (or unique prefixes) or bundle "
                                             "files. Exit 1 when they differ, 0 when not.")
    compare.add_argument("a", metavar="A", help="a bundle id, prefix or bundle file")
    compare.add_argument("b", metavar="B", help="a bundle id, prefix or bundle file")
    compare.add_argument("--manifest", type=Path, default=None, metavar="FILE",
                         help="the manifest bundle files are resolved against")
    actions.add_parser("list", help="every bundle on the topic, oldest first",
                       description="One line per bundle: id, created, name, target, snapshot, "
                                   "instruction version.")
    actions.add_parser("example", help="print a bundle file to start from",
                       description="Print the example bundle file (every field it can have, "
                                   "commented).")
    for parser in (create, show, compare, actions.choices["list"]):
        parser.add_argument("--json", action="store_true", help="print JSON")
        add_kafka_options(parser)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "example":
        sys.stdout.write(EXAMPLE_PATH.read_text(encoding="utf-8"))
        return 0
    settings = settings_from_args(args)
    if args.action == "create":
        return _create(args, settings)
    if args.action == "show":
        stored = run_async(store.get(settings, args.ref))
        _print_bundle(stored.bundle, stored.created_at, args.json)
        return 0
    if args.action == "list":
        return _list(settings, args.json)
    return _diff(args, settings)


def _create(args: argparse.Namespace, settings: PipelineSettings) -> int:
    manifest = load_manifest(args.manifest) if args.manifest else None
    bundle = read_bundle_file(args.file, manifest)
    if args.dry_run:
        _print_bundle(bundle, None, args.json)
        return 0
    stored = run_async(store.put(settings, bundle))
    if args.json:
        _print_bundle(bundle, stored.created_at, True)
    else:
        print(bundle.bundle_id)
        print(f"bundle {bundle.name!r} written on {settings.topic(store.TOPIC)}", file=sys.stderr)
    return 0


def _list(settings: PipelineSettings, as_json: bool) -> int:
    bundles = run_async(store.read_all(settings))
    if as_json:
        print(json.dumps([_doc(s.bundle, s.created_at) for s in bundles.values()], indent=2))
        return 0
    for stored in bundles.values():
        b = stored.bundle
        print("\t".join([b.bundle_id, _iso(stored.created_at), b.name,
                         f"{b.target.provider}/{b.target.api}/{b.target.model}",
                         b.target.snapshot or "-", f"instruction {b.instruction.version}"]))
    if not bundles:
        print(f"no bundles on {settings.topic(store.TOPIC)}; create one with "
              "`modelevents bundle create FILE`", file=sys.stderr)
    return 0


def _diff(args: argparse.Namespace, settings: PipelineSettings) -> int:
    manifest = load_manifest(args.manifest) if args.manifest else None
    on_topic: dict[str, StoredBundle] | None = None

    def load(ref: str) -> Bundle:
        nonlocal on_topic
        path = Path(ref)
        if path.suffix in (".yaml", ".yml") or path.is_file():
            return read_bundle_file(path, manifest)
        if on_topic is None:
            on_topic = run_async(store.read_all(settings))
        return store.find(on_topic, ref).bundle

    a, b = load(args.a), load(args.b)
    changes = diff(a, b)
    if args.json:
        print(json.dumps({"a": a.bundle_id, "b": b.bundle_id,
                          "changes": [c.as_dict() for c in changes]}, indent=2))
    else:
        print(f"a {a.bundle_id} ({a.name})\nb {b.bundle_id} ({b.name})")
        for change in changes:
            if change.only_in is not None:
                value = change.before if change.only_in == "a" else change.after
                print(f"{change.path}: only in {change.only_in}: {_text(value)}")
            else:
                print(f"{change.path}: {_text(change.before)} -> {_text(change.after)}")
        if not changes:
            print("no differences")
    return 1 if changes else 0


def _doc(bundle: Bundle, created_at: int | None) -> dict[str, Any]:
    doc: dict[str, Any] = {"bundle_id": bundle.bundle_id}
    if created_at is not None:
        doc["created_at"] = _iso(created_at)
    doc.update(bundle.model_dump(mode="json", by_alias=True))
    return doc


def _print_bundle(bundle: Bundle, created_at: int | None, as_json: bool) -> None:
    doc = _doc(bundle, created_at)
    if as_json:
        print(json.dumps(doc, indent=2))
        return
    print(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100), end="")


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="seconds")
