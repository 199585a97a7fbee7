"""Tools that make the executor's life hard, for tests/integration/tools/test_safety.py (and
``modelevents tools run --tools tests.integration.tools.awkward_tools --db PATH``; ``db`` names a
directory where their effects are recorded):

- ``append_line`` (write, no reconcile hook): appends its text to ``effects.txt``, then — the
  first time only — blocks for ``block_s`` seconds (the executor is killed meanwhile);
- ``odd_output`` (read): returns what JSON cannot hold as it is, by ``kind``;
- ``write_then_raise`` (write): appends to ``effects.txt``, returns, and its postcondition
  raises (an exception after the tool returned).
"""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path
from typing import Any

from modelevents.consumers.tools.contract import ToolContract, ToolError
from modelevents.consumers.tools.registry import ToolRegistry

__all__ = ["make_registry", "effects", "ODD_KINDS", "BIG"]

BIG = 2_000_000  # bytes: over the broker's 1 MB record limit


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


class Opaque:
    def __repr__(self) -> str:
        return "Opaque()"


ODD_KINDS: dict[str, Any] = {
    "decimal": lambda: {"price": Decimal("12.50")},
    "set": lambda: {"tags": {"b", "a"}},
    "bytes": lambda: {"blob": b"\x00\xff"},
    "int_key": lambda: {1: "one", (2, 3): "pair"},
    "object": lambda: {"thing": Opaque()},
    "deep": lambda: _nested(400),
    "huge": lambda: "x" * BIG,
    "cycle": lambda: (lambda x: (x.append(x), x)[1])([]),
}


def effects(directory: Path) -> list[str]:
    path = Path(directory) / "effects.txt"
    return path.read_text().splitlines() if path.exists() else []


def make_registry(db: str | Path = ".", block_s: float = 600.0, **_options: Any) -> ToolRegistry:
    directory = Path(db)
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / "effects.txt"

    def append(text: str) -> bool:
        first = not log.exists()
        with log.open("a") as out:
            out.write(text + "\n")
        return first

    def append_line(arguments: dict[str, Any], context: Any) -> Any:
        if append(arguments["text"]):
            time.sleep(block_s)
        return {"appended": arguments["text"]}

    def odd_output(arguments: dict[str, Any], context: Any) -> Any:
        kind = arguments["kind"]
        if kind == "huge_error":
            raise ToolError("permanent", "no: " + "e" * BIG)
        if kind == "huge_exception":
            raise ValueError("broken: " + "v" * BIG)
        return ODD_KINDS[kind]()

    def write_then_raise(arguments: dict[str, Any], context: Any) -> Any:
        append(arguments["text"])
        return {"written": Decimal("1")}

    def postcondition(arguments: dict[str, Any], output: Any) -> bool:
        raise RuntimeError("the system of record is unreachable")

    text = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    registry = ToolRegistry()
    registry.register(ToolContract(name="append_line", run=append_line, action="write",
                                   timeout_s=block_s + 60, parameters=text))
    registry.register(ToolContract(
        name="odd_output", run=odd_output, action="read", max_output_bytes=5 * BIG,
        parameters={"type": "object", "properties": {"kind": {"type": "string"}},
                    "required": ["kind"]}))
    registry.register(ToolContract(name="write_then_raise", run=write_then_raise,
                                   action="write", parameters=text,
                                   postcondition=postcondition))
    return registry
