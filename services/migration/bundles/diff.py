"""Field-level differences between two bundles: what ``modelevents bundle diff A B`` prints.

Both bundles are flattened to dotted paths (``target.snapshot``, ``sampling.temperature``,
``tools.get_order.schema_version``, ``capabilities.citations``); tools are keyed by their name,
not their position, so reordering a bundle's tools is no difference of its content. Each path
present in either bundle with another value (or in one only) is one :class:`Change`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from modelevents.schemas.bundles import Bundle

__all__ = ["Change", "diff", "flatten"]

_ABSENT = object()


@dataclass(frozen=True, slots=True)
class Change:
    path: str
    before: Any  # the first bundle's value; None when the path is not in it (``only_in``)
    after: Any
    only_in: str | None = None  # "a" or "b" when the path is in one bundle only

    def as_dict(self) -> dict[str, Any]:
        out = {"path": self.path, "a": self.before, "b": self.after}
        if self.only_in is not None:
            out["only_in"] = self.only_in
        return out


def _walk(value: Any, path: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key in sorted(value):
            _walk(value[key], f"{path}.{key}" if path else str(key), out)
    else:
        out[path] = value


def flatten(bundle: Bundle) -> dict[str, Any]:
    """Dotted path → leaf value (lists kept whole, but tools keyed by name)."""
    doc = bundle.model_dump(mode="json", by_alias=True)
    doc["tools"] = {t["declaration"]["name"]: t for t in doc["tools"]}
    out: dict[str, Any] = {}
    _walk(doc, "", out)
    return out


def diff(a: Bundle, b: Bundle) -> list[Change]:
    left, right = flatten(a), flatten(b)
    changes = []
    for path in sorted(left.keys() | right.keys()):
        before, after = left.get(path, _ABSENT), right.get(path, _ABSENT)
        if before == after:
            continue
        only = "b" if before is _ABSENT else "a" if after is _ABSENT else None
        changes.append(Change(path, None if before is _ABSENT else before,
                              None if after is _ABSENT else after, only))
    return changes
