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

# Each module exposes register(subparsers); the order here is the order in --help.
COMMAND_MODULES = (
    "modelevents.services.commands.demo",
    "modelevents.services.commands.normalize",
    "modelevents.services.commands.conformance",
    "modelevents.services.commands.kafka",
    "modelevents.services.commands.topics",
    "modelevents.services.commands.worker",
    "modelevents.services.commands.feed",
    "modelevents.services.commands.tail",
    "modelevents.services.commands.gateway",
    "modelevents.services.commands.simulator",
    "modelevents.consumers.replay_cli",
    "modelevents.consumers.audit_cli",
    "modelevents.consumers.otel_cli",
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
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        logs.configure(args.log_format)
        return args.run(args) or 0
    except ModelEventsError as exc:
        logs.report(f"modelevents: error: {exc}")
        return 2
    except KeyboardInterrupt:
        logs.report("modelevents: interrupted")
        return 130
    except BrokenPipeError:
        # `modelevents normalize big.sse | head`: the reader left; that is not an error.
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
