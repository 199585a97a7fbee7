"""Options and argument types shared by the commands that talk to the pipeline's Kafka topics.

Not a command itself (services/cli/main.py loads only the modules in COMMAND_MODULES).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from modelevents.schemas.errors import ConfigError
from modelevents.services.kafka import security
from modelevents.services.kafka.settings import PipelineSettings

if TYPE_CHECKING:  # the tree (pydantic, the gateway's models) loads when a command runs
    from modelevents.services.cli.settings_tree import Settings
    from modelevents.services.settings.loader import Resolved

T = TypeVar("T")

ENV_HELP = ("environment: KAFKA_BOOTSTRAP_SERVERS (default: the local broker, 127.0.0.1:"
            "$MODELEVENTS_KAFKA_PORT or 9092), MODELEVENTS_TOPIC_PREFIX (default modelevents.), "
            "MODELEVENTS_PARTITIONS (default 4), MODELEVENTS_TENANT, MODELEVENTS_REPLICATION_FACTOR "
            "(replicas of the topics created, default 1), MODELEVENTS_MIN_INSYNC_REPLICAS (default "
            "the factor - 1, at least 1); TLS and SASL for every client: "
            + security.ENV_HELP + "; MODELEVENTS_CONFIG (the default of --config). A secret "
            "NAME may be given as NAME_FILE, a file holding it. Precedence: defaults < config "
            "file < environment < options (docs/operations.md \"Configuration\").")


def add_kafka_options(parser: argparse.ArgumentParser, *, partitions: bool = False) -> None:
    """--config, --bootstrap-servers and --prefix (and --partitions where topics are created or
    checked)."""
    parser.add_argument("--config", type=Path, default=None, metavar="FILE",
                        help="the config file, YAML or TOML (.toml): the gateway's settings at "
                             "the top, kafka:, worker: and tools: sections (default: "
                             "$MODELEVENTS_CONFIG; the environment and the options win over it)")
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


def load_from_args(args: argparse.Namespace,
                   options: dict[str, tuple[Any, str]] | None = None) -> Resolved[Settings]:
    """The settings tree for a command: its --config file, the environment, its Kafka options
    and ``options`` (``{"worker.state_dir": (args.workdir, "--workdir")}``)."""
    from modelevents.services.cli.settings_tree import load_settings

    if getattr(args, "partitions", None) is not None and args.partitions < 1:
        raise ConfigError(f"--partitions {args.partitions}: a topic needs at least 1 partition")
    cli: dict[str, tuple[Any, str]] = {
        "kafka.bootstrap_servers": (getattr(args, "bootstrap_servers", None) or None,
                                    "--bootstrap-servers"),
        "kafka.topic_prefix": (getattr(args, "prefix", None), "--prefix"),
        "kafka.partitions": (getattr(args, "partitions", None), "--partitions"),
        **(options or {})}
    return load_settings(getattr(args, "config", None), cli=cli)


def settings_from_args(args: argparse.Namespace, **extra: object) -> PipelineSettings:
    """The Kafka settings of a command: the tree's kafka section, ``extra`` (kafka keys, e.g.
    ``app_id=args.app_id``; None: not given) the command's own options over it."""
    options = {f"kafka.{key}": (value, f"--{key.replace('_', '-')}")
               for key, value in extra.items()}
    return PipelineSettings.from_kafka(load_from_args(args, options).settings.kafka)


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
