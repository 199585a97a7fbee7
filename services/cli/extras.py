"""Which extra a command needs, so that a core install (the contract, the adapters, the consumer
API) answers a command it cannot run with the ``pip install`` line that makes it work.

A command module that cannot even be imported is still listed in ``--help``: its parser says
which extra it needs, and running it raises :class:`~modelevents.services.errors.MissingExtra`.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from modelevents.services.errors import MissingExtra

__all__ = ["COMMAND_EXTRAS", "extra_for", "missing_extra", "register_unavailable"]

# The extra each command needs beyond the core install (pyproject.toml's optional-dependencies).
COMMAND_EXTRAS = {
    "demo": "all", "worker": "worker", "gateway": "gateway", "ui": "gateway",
    "simulator": "simulator", "tools": "tools", "otel": "otel", "eval": "eval",
}
# For a command not listed: the extra a missing top-level module comes from.
MODULE_EXTRAS = {
    "fastapi": "gateway", "starlette": "gateway", "uvicorn": "gateway",
    "fastapi_offline": "gateway", "tenacity": "gateway", "httpx": "gateway",
    "faust": "worker", "mode": "worker", "jsonschema": "tools", "confusable_homoglyphs": "tools",
    "pyarrow": "audit", "opentelemetry": "otel", "openai": "simulator",
    "anthropic": "simulator", "google": "simulator",
}


def extra_for(command: str, module: str) -> str:
    return COMMAND_EXTRAS.get(command) or MODULE_EXTRAS.get(module.split(".")[0], "all")


def missing_extra(command: str, error: ModuleNotFoundError) -> MissingExtra | None:
    """The MissingExtra for ``error`` raised while ``modelevents COMMAND`` ran, or None when
    the module missing is modelevents' own (a broken install, not a missing extra)."""
    module = error.name or ""
    if not module or module.split(".")[0] == "modelevents":
        return None
    return MissingExtra(f"`modelevents {command}`", extra_for(command, module), module)


def register_unavailable(sub: argparse._SubParsersAction, command: str,
                         error: ModuleNotFoundError) -> None:
    """List ``command`` although its module needs what is not installed."""
    problem = missing_extra(command, error)
    if problem is None:
        raise error
    parser = sub.add_parser(command, help=f"(needs the {problem.extra!r} extra)",
                            description=str(problem))

    def run(_args: Any) -> NoReturn:
        raise problem

    # main() lets such a command take any options: the answer is the missing extra.
    parser.set_defaults(run=run, unavailable=True)
