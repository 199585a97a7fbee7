"""``modelevents topics create|verify|delete``: the pipeline's Kafka topics.

create: create the missing topics (frames, ingest, events, runs, run-inputs and calls compacted,
dlq, run-owners, receipts) with the configured partition count and verify the existing ones; verify:
only check; delete: remove them (with --yes).
"""

from __future__ import annotations

import argparse
import sys

from modelevents.schemas.errors import ConfigError
from modelevents.services.cli.kafka_options import (
    ENV_HELP,
    add_kafka_options,
    run_async,
    settings_from_args,
)
from modelevents.services.kafka import topics


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "topics",
        help="create or verify the pipeline's Kafka topics (frames, ingest, events, runs, dlq, "
             "run-owners, run-inputs, receipts, calls)",
        description="Create the pipeline's topics that are missing and verify the ones that exist "
                    "(create), or only verify them (verify): each must have the configured number "
                    "of partitions — Faust's changelogs get the same count and a worker refuses a "
                    "source topic that differs — and runs must be compacted. The broker's "
                    "auto-create is off, so run `topics create` once before feeding or starting a "
                    "worker. delete removes the topics and their records (needs --yes).",
        epilog=ENV_HELP + " Exit status: 0 ok, 2 a topic is missing or differs, or Kafka is unreachable.")
    p.add_argument("action", choices=("create", "verify", "delete"),
                   help="create: create missing topics and verify the rest; verify: only check; "
                        "delete: delete the topics of this prefix")
    p.add_argument("--yes", action="store_true", help="delete: really delete (records are lost)")
    add_kafka_options(p, partitions=True)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    where = f"{settings.bootstrap_servers}, {settings.partitions} partitions"
    if args.action == "delete":
        if not args.yes:
            raise ConfigError(f"`topics delete` removes every record of the {settings.topic_prefix}* "
                              "topics; repeat with --yes to do it")
        deleted = run_async(topics.delete_topics(settings))
        for name in deleted:
            print(f"deleted   {name}")
        if not deleted:
            print(f"no topics with prefix {settings.topic_prefix!r} on {settings.bootstrap_servers}",
                  file=sys.stderr)
        return 0
    if args.action == "create":
        result = run_async(topics.ensure_topics(settings))
    else:
        result = run_async(topics.verify_topics(settings))
    for name, what in result.items():
        compacted = " (compacted)" if name in (settings.topic("runs"), settings.topic("run-inputs")) else ""
        print(f"{what:<9} {name}{compacted}")
    print(f"{len(result)} topics ok on {where}", file=sys.stderr)
    for warning in run_async(topics.durability_warnings(settings)):
        print(f"warning: {warning}", file=sys.stderr)
    return 0
