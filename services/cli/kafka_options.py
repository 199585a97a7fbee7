"""Options and argument types shared by the commands that talk to the pipeline's Kafka topics.

Not a command itself (services/cli/main.py loads only the modules in COMMAND_MODULES).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
from collections.abc import Awaitable
from typing import TypeVar

from modelevents.schemas.errors import ConfigError
from modelevents.services.kafka import security
from modelevents.services.kafka.settings import PipelineSettings

T = TypeVar("T")

ENV_HELP = ("environment: KAFKA_BOOTSTRAP_SERVERS (default: the local broker, 127.0.0.1:"
            "$MODELEVENTS_KAFKA_PORT or 9092), MODELEVENTS_TOPIC_PREFIX (default modelevents.), "
            "MODELEVENTS_PARTITIONS (default 4), MODELEVENTS_TENANT, MODELEVENTS_REPLICATION_FACTOR "
            "(replicas of the topics created, default 1), MODELEVENTS_MIN_INSYNC_REPLICAS (default "
            "the factor - 1, at least 1); TLS and SASL for every client: "
            + security.ENV_HELP + ".")


def add_kafka_options(parser: argparse.ArgumentParser, *, partitions: bool = False) -> None:
    """--bootstrap-servers and --prefix (and --partitions where topics are created or checked)."""
    group = parser.add_argument_group("Kafka")
    group.add_argument("--bootstrap-servers", metavar="HOST:PORT", default=None,
                       help="Kafka bootstrap address (default: $KAFKA_BOOTSTRAP_SERVERS or the "
                            "local broker started by `modelevents kafka start`)")
    group.add_argument("--prefix", metavar="P", default=None,
                       help="topic name prefix (default: $MODELEVENTS_TOPIC_PREFIX or modelevents.)")
    if partitions:
        group.add_argument("--partitions", metavar="N", type=int, default=None,
                           help="partitions of every topic (default: $MODELEVENTS_PARTITIONS or 4); "
                                "must equal what the Faust worker runs with")


def settings_from_args(args: argparse.Namespace, **extra: object) -> PipelineSettings:
    """PipelineSettings from the environment, overridden by the options the user gave."""
    overrides: dict[str, object] = {k: v for k, v in extra.items() if v is not None}
    if getattr(args, "bootstrap_servers", None):
        overrides["bootstrap_servers"] = args.bootstrap_servers
    if getattr(args, "prefix", None) is not None:
        overrides["topic_prefix"] = args.prefix
    if getattr(args, "partitions", None) is not None:
        if args.partitions < 1:
            raise ConfigError(f"--partitions {args.partitions}: a topic needs at least 1 partition")
        overrides["partitions"] = args.partitions
    return dataclasses.replace(PipelineSettings(), **overrides)  # type: ignore[arg-type]


def positive_float(text: str) -> float:
    """argparse type: a number greater than 0 (rates, seconds)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} must be greater than 0")
    return value


def positive_int(text: str) -> int:
    """argparse type: a whole number of at least 1 (batch sizes, counts)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value


def run_async(coro: Awaitable[T]) -> T:
    """Run a command's coroutine. aiokafka logs every failed connection attempt at ERROR; the
    command reports an unreachable broker itself (KafkaUnavailable), so that noise is muted."""
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    return asyncio.run(coro)  # type: ignore[arg-type]
