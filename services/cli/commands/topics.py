"""``modelevents topics create|verify|check|apply|delete``: the pipeline's Kafka topics.

create: create the missing topics (frames, ingest, events, runs, run-inputs, calls and bundles compacted,
dlq, run-owners, receipts) with the configured partition count and verify the existing ones; verify:
only check what a worker needs (partitions, cleanup policy); check: every difference between the
existing topics and the configured ones (services/kafka/topic_drift.py), exit 1 when any; apply:
fix them (configs altered, missing topics created, partitions added only with --add-partitions,
the kafka-reassign-partitions.sh steps printed for a replication factor); delete: remove them
(with --yes).
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
from modelevents.services.kafka import topic_drift, topics
from modelevents.services.kafka.settings import PipelineSettings


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "topics",
        help="create, verify, check or apply the pipeline's Kafka topics (frames, ingest, "
             "events, runs, dlq, run-owners, run-inputs, receipts, calls, audit-heads, bundles)",
        description="Create the pipeline's topics that are missing and verify the ones that exist "
                    "(create), or only verify them (verify): each must have the configured number "
                    "of partitions — Faust's changelogs get the same count and a worker refuses a "
                    "source topic that differs — and runs must be compacted. The broker's "
                    "auto-create is off, so run `topics create` once before feeding or starting a "
                    "worker. Existing topics are kept as they are by create: check lists every "
                    "difference between them (and the worker's own topics of the app id) and the "
                    "configuration — partitions, replication factor, retention.ms, "
                    "retention.bytes, cleanup.policy, min.insync.replicas; apply alters the "
                    "configs (only those named), creates missing topics, adds partitions only "
                    "with --add-partitions and prints the kafka-reassign-partitions.sh steps for "
                    "a replication factor, which no config changes. delete removes the topics "
                    "and their records (needs --yes).",
        epilog=ENV_HELP + " Exit status: 0 ok; 1 (check, apply) differences remain, each "
                          "printed; 2 a topic is missing or differs (create, verify), a change "
                          "the broker refused, or Kafka is unreachable.")
    p.add_argument("action", choices=("create", "verify", "check", "apply", "delete"),
                   help="create: create missing topics and verify the rest; verify: only check "
                        "what a worker needs; check: list every difference from the "
                        "configuration; apply: fix them; delete: delete the topics of this prefix")
    p.add_argument("--add-partitions", action="store_true",
                   help="apply: also add partitions to topics with fewer than configured. This "
                        "moves runs to other partitions: the worker's state must be rebuilt "
                        "(a new app id)")
    p.add_argument("--app-id", default=None,
                   help="check, apply: the worker app id whose own topics (internal topics, "
                        "table changelogs) are checked too (default: $MODELEVENTS_APP_ID or "
                        "modelevents)")
    p.add_argument("--yes", action="store_true", help="delete: really delete (records are lost)")
    add_kafka_options(p, partitions=True)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args, app_id=args.app_id)
    where = f"{settings.bootstrap_servers}, {settings.partitions} partitions"
    if args.add_partitions and args.action != "apply":
        raise ConfigError("--add-partitions goes with `topics apply`")
    if args.action == "check":
        return _check(settings)
    if args.action == "apply":
        return _apply(settings, args.add_partitions)
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


def _check(settings: PipelineSettings) -> int:
    found = run_async(topic_drift.differences(settings))
    for difference in found:
        print(difference.line())
    where = f"{settings.bootstrap_servers}, prefix {settings.topic_prefix!r}, app id {settings.app_id!r}"
    if found:
        print(f"{len(found)} difference(s) on {where}: `modelevents topics apply` fixes what a "
              f"config can fix and prints the steps for the rest", file=sys.stderr)
        return 1
    print(f"every topic as configured on {where}", file=sys.stderr)
    return 0


def _apply(settings: PipelineSettings, add_partitions: bool) -> int:
    if add_partitions:
        print(f"WARNING: --add-partitions: {topic_drift.ADD_PARTITIONS_WARNING}", file=sys.stderr)
    done = run_async(topic_drift.apply(settings, add_partitions=add_partitions))
    for name in done.created:
        print(f"created   {name}")
    for name, configs in done.altered.items():
        print(f"altered   {name}: " + ", ".join(f"{k}={v}" for k, v in sorted(configs.items())))
    for name, count in done.partitions_added.items():
        print(f"added     {name}: {count} partitions")
    if done.partitions_added:
        print(f"WARNING: partitions were added to {len(done.partitions_added)} topic(s): "
              f"{topic_drift.ADD_PARTITIONS_WARNING}", file=sys.stderr)
    for difference in done.left:
        print(f"left      {difference.line()}")
    for line in topic_drift.reassignment_steps(settings, done):
        print(line)
    if any(d.what == "partitions" and d.fix == "add-partitions" for d in done.left):
        print(f"partitions are added only with --add-partitions: "
              f"{topic_drift.ADD_PARTITIONS_WARNING}", file=sys.stderr)
    if done.left:
        print(f"{len(done.left)} difference(s) left (above)", file=sys.stderr)
        return 1
    print("every topic as configured", file=sys.stderr)
    return 0
