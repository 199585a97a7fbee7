"""``modelevents config show``: the configuration the services would run with, secrets masked.

The settings tree (services/cli/settings_tree.py) resolved exactly as ``modelevents gateway``,
``worker``, ``tools run``, ``ui`` and the topic commands resolve it — defaults < the config file
(``--config`` or ``$MODELEVENTS_CONFIG``) < the environment (``NAME_FILE`` secrets included) <
the options — and checked the same way: an invalid configuration is the same lines, one per
problem, the service would stop with, exit status 2. Every value says where it came from
(``default``, ``file PATH: key``, ``env NAME``, ``cli --option``). Secrets (API keys, webhook
secrets, API tokens, the SASL and TLS key passwords) are printed as ``**********``, never their
value, so the output can be pasted into an issue.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from modelevents.services import logs
from modelevents.services.cli.kafka_options import ENV_HELP, add_kafka_options, load_from_args
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.settings.sources import SERVICES

if TYPE_CHECKING:
    from modelevents.services.cli.settings_tree import Settings
    from modelevents.services.settings.loader import Resolved

MASK = "**********"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show the effective configuration (secrets masked)",
                       description="Configuration of the pipeline's commands.")
    actions = p.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = actions.add_parser(
        "show", help="print the effective configuration, secrets masked, with each value's origin",
        description="Print the configuration the services would run with here — from the "
                    "defaults, the config file (--config), the environment and the options, in "
                    "that order of precedence, checked as they check it — and where each value "
                    f"came from (default, file, env, cli). Secrets are printed as {MASK}.",
        epilog=ENV_HELP + " Exit status: 0 valid, 2 invalid (one line per problem).")
    show.add_argument("--service", choices=sorted(SERVICES), default=None,
                      help="only the sections this service reads (default: every service's)")
    show.add_argument("--json", action="store_true",
                      help="JSON (the values, and \"sources\": each value's origin by its "
                           "dotted key) instead of YAML with the origin as a comment")
    show.add_argument("--check", action="store_true",
                      help="only check: print nothing but the problems (exit 2) or one line "
                           "saying the configuration is valid (exit 0)")
    add_kafka_options(show, partitions=True)
    show.set_defaults(run=run)


def _sections(resolved: Resolved[Settings], service: str | None) -> dict[str, Any]:
    settings = resolved.settings
    kafka = settings.kafka
    everything: dict[str, Any] = {
        "kafka": {**kafka.model_dump(mode="json"), "bootstrap_servers": kafka.bootstrap,
                  "min_insync_replicas": PipelineSettings.from_kafka(kafka).min_insync},
        "gateway": settings.gateway.model_dump(mode="json"),  # SecretStr dumps as **********
        "worker": {**settings.worker.model_dump(mode="json"),
                   "state_dir": str(settings.worker.workdir)},
        "tools": settings.tools.model_dump(mode="json"),
    }
    wanted = SERVICES[service] if service else tuple(everything)
    return {name: value for name, value in everything.items() if name in wanted}


def _leaves(prefix: tuple[str, ...], value: Any) -> list[tuple[tuple[str, ...], Any]]:
    if isinstance(value, dict) and value:
        return [leaf for key, inner in value.items() for leaf in _leaves((*prefix, key), inner)]
    return [(prefix, value)]


def effective(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, str]]:
    """The configuration as one JSON-able document, secrets masked, and each leaf's origin."""
    resolved = load_from_args(args)
    document = _sections(resolved, args.service)
    sources = {".".join(key): str(resolved.origin(key)) for key, _ in _leaves((), document)}
    if "kafka" in document:
        pipeline = PipelineSettings.from_kafka(resolved.settings.kafka)
        document["kafka"]["topics"] = pipeline.topic_names
    document["log_format"] = "json" if logs.is_json() else "text"
    return document, sources


def _render(value: Any, key: tuple[str, ...], sources: dict[str, str], depth: int) -> list[str]:
    # YAML, one leaf a line, its origin as a comment (scalars and lists written as JSON, which
    # YAML reads as they are).
    lines: list[str] = []
    pad = "  " * depth
    for name, inner in value.items():
        here = (*key, name)
        if isinstance(inner, dict) and inner:
            lines.append(f"{pad}{name}:")
            lines += _render(inner, here, sources, depth + 1)
        else:
            origin = sources.get(".".join(here))
            comment = f"  # {origin}" if origin else ""
            lines.append(f"{pad}{name}: {json.dumps(inner, ensure_ascii=False)}{comment}")
    return lines


def run(args: argparse.Namespace) -> int:
    document, sources = effective(args)  # an invalid configuration: ConfigProblems, exit 2
    if args.check:
        print("the configuration is valid")
    elif args.json:
        json.dump({**document, "sources": sources}, sys.stdout, indent=2, sort_keys=False)
        print()
    else:
        print("\n".join(_render(document, (), sources, 0)))
    return 0
