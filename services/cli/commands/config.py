"""``modelevents config show``: the configuration a command would run with, secrets masked.

What the environment, the gateway's config file (``--config``) and the options give, resolved
the way ``modelevents gateway`` and ``modelevents worker`` resolve them (the Kafka settings and
their TLS/SASL, the topics' names and replication, the gateway's listeners, providers, tenants
and limits, the worker's state directory and retention, the log format) — and checked the same
way: an invalid value is the same one-line error the service would stop with, exit status 2.
Secrets (API keys, webhook secrets, API tokens, the SASL password) are printed as
``**********``, never their value, so the output can be pasted into an issue.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from modelevents.services import logs
from modelevents.services.cli.commands.gateway import build_config
from modelevents.services.cli.commands.worker import default_workdir, retention_setting
from modelevents.services.cli.kafka_options import ENV_HELP, add_kafka_options
from modelevents.services.processor.tuning import ProcessorTuning

MASK = "**********"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show the effective configuration (secrets masked)",
                       description="Configuration of the pipeline's commands.")
    actions = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = actions.add_parser(
        "show", help="print the effective configuration, secrets masked",
        description="Print the configuration `modelevents gateway` and `modelevents worker` "
                    "would run with here: from the environment, the gateway's config file "
                    "(--config) and the options, checked as they check it. Secrets are "
                    f"printed as {MASK}.",
        epilog=ENV_HELP + " Exit status: 0 valid, 2 invalid (one line per problem).")
    show.add_argument("--config", type=Path, default=None, metavar="FILE",
                      help="the gateway's config file (YAML or TOML), as `gateway --config`")
    show.add_argument("--json", action="store_true", help="JSON instead of YAML")
    add_kafka_options(show, partitions=True)
    show.set_defaults(run=run)


def effective(args: argparse.Namespace) -> dict[str, Any]:
    """The configuration as one JSON-able document, secrets masked."""
    config = build_config(args)
    kafka = config.kafka
    security = kafka.security
    gateway = config.model_dump(mode="json", exclude={"kafka"})  # SecretStr dumps as ******
    return {
        "kafka": {
            "bootstrap_servers": kafka.bootstrap_servers,
            "topic_prefix": kafka.topic_prefix,
            "partitions": kafka.partitions,
            "replication_factor": kafka.replication_factor,
            "min_insync_replicas": kafka.min_insync,
            "app_id": kafka.app_id,
            "tenant": kafka.tenant,
            "security": {**{f.name: getattr(security, f.name)
                            for f in dataclasses.fields(security) if not f.name.startswith("_")},
                         "sasl_password": MASK if security.sasl_password else None},
            "topics": kafka.topic_names,
        },
        "gateway": gateway,
        "worker": {
            "state_dir": str(default_workdir()),
            "run_retention_s": retention_setting(argparse.Namespace(retention=None))
            or ProcessorTuning().retention,
        },
        "log_format": "json" if logs.is_json() else "text",
    }


def run(args: argparse.Namespace) -> int:
    document = effective(args)
    if args.json:
        json.dump(document, sys.stdout, indent=2, sort_keys=False)
        print()
    else:
        yaml.safe_dump(document, sys.stdout, sort_keys=False, default_flow_style=False)
    return 0
