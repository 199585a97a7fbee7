"""``modelevents eval``: evaluate bundles and adapter revisions on recorded or live runs.

services/cli/main.py loads this module by its dotted path (``COMMAND_MODULES``); each action is
a module of its own that adds its subparser here (``eval parity``: eval_parity.py).
"""

from __future__ import annotations

import argparse

from modelevents.services.cli.commands import eval_parity


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "eval", help="evaluate adapter revisions on recorded frames",
        description="Evaluate what changes between revisions before it ships. `parity` "
                    "re-normalizes recorded frames with a candidate revision of the adapters "
                    "and diffs the events with the current revision's (docs/migration.md).",
        epilog="Exit status: 0 no difference, 1 a difference, 2 error.")
    sub = parser.add_subparsers(dest="eval_command", metavar="ACTION", required=True)
    eval_parity.register(sub)


__all__ = ["register"]
