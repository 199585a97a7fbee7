"""Streamed function-call arguments (Vertex AI ``partialArgs``) → the argument object and its
JSON text, fragment by fragment.

Vertex streams a call's arguments as a list of partial arguments, each a JSONPath (``$.a.b[0]``)
and a value fragment (``stringValue`` — a string may arrive in several pieces, ``willContinue``
between them — ``numberValue``, ``boolValue``, ``nullValue``); Gemini Function calling guide. This
module rebuilds the argument object (``StreamedArguments.tree``) and, as long as the paths arrive in
document order, the JSON text of that object as fragments, so an adapter can stream
``tool.call.delta`` events whose concatenation is exactly ``json_text(tree)``.

Self-contained: no adapter state, no events; tests in tests/adapters/test_streamed_arguments.py.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import orjson

__all__ = ["StreamedArguments", "parse_json_path", "partial_value"]


def _json_text(value: Any) -> str:
    return orjson.dumps(value).decode()


@lru_cache(maxsize=4096)
def parse_json_path(path: str) -> tuple[str | int, ...] | None:
    """``$.a.b[0]['c d']`` → ``("a", "b", 0, "c d")``; None for what is not a plain member path
    (wildcards, slices, filters never name one value to set)."""
    if not path.startswith("$"):
        return None
    segments: list[str | int] = []
    i, n = 1, len(path)
    while i < n:
        c = path[i]
        if c == ".":
            j = i + 1
            while j < n and path[j] not in ".[":
                j += 1
            if j == i + 1 or path[i + 1:j] == "*":
                return None
            segments.append(path[i + 1:j])
            i = j
        elif c == "[" and i + 1 < n and path[i + 1] in "'\"":
            quote, j, chars = path[i + 1], i + 2, []
            while j < n and path[j] != quote:
                if path[j] == "\\" and j + 1 < n:
                    j += 1
                chars.append(path[j])
                j += 1
            if j + 1 >= n or path[j + 1] != "]":
                return None
            segments.append("".join(chars))
            i = j + 2
        elif c == "[":
            j = path.find("]", i)
            if j < 0 or not (path[i + 1:j].isascii() and path[i + 1:j].isdigit()):
                return None
            segments.append(int(path[i + 1:j]))
            i = j + 1
        else:
            return None
    return tuple(segments) if segments else None


def _escaped(text: str) -> str:
    # Most values need no escape (no quote, backslash or control character; isprintable is
    # also False for lone surrogates, which orjson refuses): the text is its own JSON.
    if text.isprintable() and '"' not in text and "\\" not in text:
        return text
    return orjson.dumps(text).decode()[1:-1]


@lru_cache(maxsize=1024)
def _member_name(name: str) -> str:
    """``"name":`` — a call's argument names are few and come again in every element."""
    return _json_text(name) + ":"


class StreamedArguments:
    """Reassembles ``partialArgs`` into the argument object and, as long as the paths arrive in
    document order (they do in every recording), streams its JSON text: the concatenation of the
    fragments ``put`` and ``close`` return equals the compact JSON text of ``self.tree``. Out-of-order paths
    still land in the tree; only the text stream stops (``in_order`` turns False)."""

    __slots__ = ("tree", "in_order", "_stack", "_open_string")

    def __init__(self, initial: dict[str, Any] | None = None) -> None:
        self.tree: dict[str, Any] = dict(initial) if initial else {}
        self.in_order = not initial  # a starting object was not streamed as text
        # Open containers: [segment in its parent, is_array, members written, keys written].
        self._stack: list[list[Any]] = []
        self._open_string: tuple[Any, ...] | None = None  # path of a string value still growing

    def put(self, segments: tuple[Any, ...], value: Any, more: bool) -> str | None:
        """Apply one partial argument. Returns the JSON text fragment ("" once the text stream
        stopped), or None when the value cannot be placed (the path contradicts the tree)."""
        was_open = self._open_string
        growing = was_open == segments and type(value) is str
        if growing and not value:
            pass  # Vertex ends every string with an empty fragment: the tree stays as it is
        elif len(segments) == 1 and type(segments[0]) is str:
            # A top-level member (most streamed arguments): what _place does, without the walk.
            tree, key = self.tree, segments[0]
            tree[key] = tree.get(key) + value if growing else value
        elif not _place(self.tree, segments, value, growing):
            self.in_order = False
            return None
        self._open_string = segments if (more and type(value) is str) else None
        if not self.in_order:
            return ""
        if growing:
            text = _escaped(value) if value else ""
            return text if more else text + '"'
        out = self._write(segments, value, more, was_open is not None)
        if out is None:
            self.in_order = False
            return ""
        return out

    def close(self) -> str:
        """The closing text: an open string's quote, then every open container's bracket."""
        if not self.in_order:
            return ""
        if not self._stack:
            return "{}"  # nothing was streamed: no arguments
        out = ['"'] if self._open_string is not None else []
        self._open_string = None
        while self._stack:
            out.append("]" if self._stack.pop()[1] else "}")
        return "".join(out)

    def _write(self, segments: tuple[Any, ...], value: Any, more: bool, string_open: bool) -> str | None:
        out: list[str] = []
        stack = self._stack
        if not stack:
            out.append("{")
            stack.append([None, False, 0, set()])
        elif string_open:
            out.append('"')
        # Keep the open containers on this path's way; close the others.
        depth = 1
        while (depth < len(stack) and depth < len(segments)
               and stack[depth][0] == segments[depth - 1]):
            depth += 1
        while len(stack) > depth:
            out.append("]" if stack.pop()[1] else "}")
        for position in range(depth - 1, len(segments)):
            segment = segments[position]
            container = stack[-1]
            if container[1]:
                if type(segment) is not int or segment < container[2]:
                    return None  # an element already written: not document order
                while container[2] < segment:  # a gap: JSON null, as in the tree
                    out.append(",null" if container[2] else "null")
                    container[2] += 1
                if container[2]:
                    out.append(",")
            else:
                if type(segment) is not str or segment in container[3]:
                    return None  # a member already written: not document order
                container[3].add(segment)
                if container[2]:
                    out.append(",")
                out.append(_member_name(segment))
            container[2] += 1
            if position < len(segments) - 1:
                is_array = type(segments[position + 1]) is int
                out.append("[" if is_array else "{")
                stack.append([segment, is_array, 0, None if is_array else set()])
            elif type(value) is str:
                out.append('"' + _escaped(value) + ("" if more else '"'))
            else:
                out.append(_json_text(value))
        return "".join(out)


def _place(tree: dict[str, Any], segments: tuple[Any, ...], value: Any, growing: bool) -> bool:
    # The walk down the path, once per argument fragment: an object's member is read and set in
    # place (the common case: calls take objects); array elements go through _get and _set.
    node: Any = tree
    last = len(segments) - 1
    for position, segment in enumerate(segments):
        if type(node) is dict:
            if type(segment) is int:
                return False
            if position == last:
                node[segment] = node.get(segment) + value if growing else value
                return True
            child = node.get(segment)
        else:
            if type(segment) is not int:
                return False
            if position == last:
                if growing:
                    value = _get(node, segment) + value
                _set(node, segment, value)
                return True
            child = _get(node, segment)
        if child is None:
            child = [] if type(segments[position + 1]) is int else {}
            _set(node, segment, child)
        elif type(child) not in (list, dict):
            return False
        node = child
    return True


def _get(node: Any, segment: Any) -> Any:
    if type(node) is list:
        return node[segment] if segment < len(node) else None
    return node.get(segment)


def _set(node: Any, segment: Any, value: Any) -> None:
    if type(node) is list:
        while len(node) < segment:
            node.append(None)
        if segment < len(node):
            node[segment] = value
        else:
            node.append(value)
    else:
        node[segment] = value


def partial_value(arg: dict[str, Any]) -> tuple[Any, bool]:
    """A PartialArg's value: stringValue | numberValue | boolValue | nullValue (SDK PartialArg)."""
    for key in ("stringValue", "numberValue", "boolValue"):
        if key in arg:
            return arg[key], True
    if "nullValue" in arg:
        return None, True
    return None, False
