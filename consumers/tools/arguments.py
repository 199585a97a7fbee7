"""A call's arguments, parsed under limits before anything else looks at them.

The model's arguments come from a tenant: nothing about them can be trusted, not even that they
are small, shallow or an object. :func:`parse_arguments` checks, in this order and before the
schema, the policy or the idempotency key see them:

    size     UTF-8 bytes of the text          ≤ the contract's ``max_argument_bytes``
    JSON     orjson parses it (NaN, Infinity, numbers beyond a double and nesting past 1,024
             levels are refused by the parser itself)
    type     the top level is an object
    depth    objects and arrays nest ≤ the contract's ``max_argument_depth`` levels
    items    ≤ :data:`MAX_ITEMS` values in all (what validating them costs is bounded)

Every failure is :class:`ArgumentsRefused` with a message that says what to send instead; the
executor answers the call with it (error class ``invalid``) and runs nothing.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["parse_arguments", "ArgumentsRefused", "MAX_BYTES", "MAX_DEPTH", "MAX_ITEMS"]

MAX_BYTES = 1_048_576
MAX_DEPTH = 32
MAX_ITEMS = 100_000


class ArgumentsRefused(ValueError):
    """Arguments outside the limits: the call is refused, nothing runs."""


def parse_arguments(text: str, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH
                    ) -> dict[str, Any]:
    """The arguments as a JSON object, or :class:`ArgumentsRefused` (module docstring)."""
    data = text.encode("utf-8", errors="surrogatepass") if text else b"{}"
    if len(data) > max_bytes:
        raise ArgumentsRefused(f"are {len(data)} bytes, over the limit of {max_bytes}; send "
                               "smaller arguments (a reference to the data, not the data)")
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise ArgumentsRefused(f"are not JSON ({exc}); send a JSON object that fits the "
                               "tool's parameters") from None
    if not isinstance(value, dict):
        raise ArgumentsRefused(f"are a JSON {_json_type(value)}, not an object; send a JSON "
                               "object that fits the tool's parameters")
    _check_shape(value, max_depth)
    return value


def _check_shape(value: dict[str, Any], max_depth: int) -> None:
    """Depth and item count, without recursion (a deep value cannot exhaust the stack)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    items = 0
    while stack:
        node, depth = stack.pop()
        if depth > max_depth:
            raise ArgumentsRefused(f"nest deeper than {max_depth} levels; send flatter "
                                   "arguments")
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            items += 1
            if items > MAX_ITEMS:
                raise ArgumentsRefused(f"hold more than {MAX_ITEMS} values; send fewer")
            if isinstance(child, dict | list):
                stack.append((child, depth + 1))


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "null" if value is None else "number"
