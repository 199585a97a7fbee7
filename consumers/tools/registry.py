"""Registering tools: ``ToolRegistry.register(contract)``, the ``@registry.tool(...)`` decorator,
and ``load_registry("package.module")`` for ``modelevents tools run --tools package.module``.

A registry module defines ``registry`` (a ToolRegistry) or ``make_registry(**options)``
returning one; options are what the CLI passes (``db``: the ``--db`` path).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any

from modelevents.consumers.tools.contract import ToolContract
from modelevents.schemas.errors import ConfigError

__all__ = ["ToolRegistry", "load_registry"]


class ToolRegistry:
    def __init__(self, contracts: list[ToolContract] | None = None) -> None:
        self._contracts: dict[str, ToolContract] = {}
        for contract in contracts or []:
            self.register(contract)

    def register(self, contract: ToolContract) -> ToolContract:
        if contract.name in self._contracts:
            raise ConfigError(f"tool {contract.name!r} is registered twice")
        self._contracts[contract.name] = contract
        return contract

    def tool(self, name: str, parameters: dict[str, Any], **options: Any
             ) -> Callable[[Callable[[dict[str, Any], Any], Any]], ToolContract]:
        """Decorate ``def run(arguments, context)`` into a registered contract."""
        def decorate(run: Callable[[dict[str, Any], Any], Any]) -> ToolContract:
            return self.register(ToolContract(name=name, parameters=parameters, run=run,
                                              description=options.pop("description", run.__doc__),
                                              **options))
        return decorate

    def get(self, name: str) -> ToolContract | None:
        return self._contracts.get(name)

    def __iter__(self) -> Iterator[ToolContract]:
        return iter(self._contracts.values())

    def __len__(self) -> int:
        return len(self._contracts)


def load_registry(dotted: str, **options: Any) -> ToolRegistry:
    try:
        module = importlib.import_module(dotted)
    except ImportError as exc:
        raise ConfigError(f"--tools {dotted}: cannot import it ({exc}); give a module on "
                          "the Python path that defines `registry` or `make_registry`") from exc
    if hasattr(module, "make_registry"):
        made = module.make_registry(**options)
    else:
        made = getattr(module, "registry", None)
    if not isinstance(made, ToolRegistry):
        raise ConfigError(f"--tools {dotted}: defines neither `registry` (a ToolRegistry) nor "
                          "`make_registry(**options)` returning one")
    return made
