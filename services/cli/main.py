"""The `modelevents` command line: one subcommand per module, each exposing ``register``.

The CLI is the composition root: it may load commands of any layer (consumers' replay too);
nothing else imports upward.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import modelevents.schemas
from modelevents.schemas.errors import ModelEventsError
from modelevents.services import logs
from modelevents.services.cli.extras import missing_extra, register_unavailable
from modelevents.services.settings.problems import ConfigProblems

# Each module exposes register(subparsers); the order here is the order in --help.
COMMAND_MODULES = (
    "modelevents.services.cli.commands.demo",
    "modelevents.services.cli.commands.normalize",
    "modelevents.services.cli.commands.conformance",
    "modelevents.services.cli.commands.kafka",
    "modelevents.services.cli.commands.topics",
    "modelevents.services.cli.commands.config",
    "modelevents.services.cli.commands.worker",
    "modelevents.services.cli.commands.feed",
    "modelevents.services.cli.commands.tail",
    "modelevents.services.cli.commands.gateway",
    "modelevents.services.cli.commands.ui",
    "modelevents.services.cli.commands.simulator",
    "modelevents.services.cli.commands.replay",
    "modelevents.services.cli.commands.eval",
    "modelevents.services.cli.commands.audit",
    "modelevents.services.cli.commands.tools",
    "modelevents.services.cli.commands.otel",
    "modelevents.services.cli.commands.decide",
    "modelevents.services.cli.commands.capabilities",
    "modelevents.services.cli.commands.bundle",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="modelevents",
        description="Normalize LLM provider output (OpenAI Responses and Chat Completions, Claude "
                    "Messages, Gemini Interactions and generateContent) into one event vocabulary, "
                    "and run the Kafka pipeline around it.")
    parser.add_argument("--version", action="version",
                        version=f"modelevents {modelevents.schemas.__version__}")
    logs.add_option(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:  # a core install without this command's extra
            register_unavailable(sub, name.rsplit(".", 1)[1], exc)
        else:
            module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, "unavailable", False):
        args = parser.parse_args(argv)  # argparse's own error for what it does not know
    try:
        logs.configure(args.log_format)
        return args.run(args) or 0
    except ConfigProblems as exc:  # an invalid configuration: every problem, one line each
        for problem in exc.problems:
            logs.report(f"modelevents: error: {problem}")
        return 2
    except ModelEventsError as exc:
        logs.report(f"modelevents: error: {exc}")
        return 2
    except ModuleNotFoundError as exc:
        missing = missing_extra(args.command, exc)
        if missing is None:
            raise
        logs.report(f"modelevents: error: {missing}")
        return 2
    except KeyboardInterrupt:
        logs.report("modelevents: interrupted")
        return 130
    except BrokenPipeError:
        # `modelevents normalize big.sse | head`: the reader left; that is not an error.
        sys.stderr.close()
        return 0

