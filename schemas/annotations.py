"""The plain runtime type of each field of a contract record, for code that checks or cuts
values by type (adapters/base.py's payload check, schemas/pieces.py's content fields).

The records annotate their closed fields with the vocabulary's ``Literal`` types
(schemas/vocabulary.py) so that a type checker catches a wrong value where an event is built.
At run time such a field holds a ``str`` like any other: here a ``Literal`` of strings reads as
``str``, so ``RunFinished.reason: FinishReason`` is ``"str"`` and ``Hosted.status:
HostedStatus | None`` is ``"str | None"``. Other annotations read as they are written
(``"int | None"``, ``"dict[str, int]"``; a map of Literals ``"dict[str, str]"``).
"""

from __future__ import annotations

import types
from dataclasses import fields
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

__all__ = ["plain_annotations"]


def plain_annotations(cls: type) -> dict[str, str]:
    """Field name → its annotation with every ``Literal`` replaced by its values' type, written
    as the source writes annotations (``"str | None"``), in declaration order."""
    hints = get_type_hints(cls)
    return {f.name: _plain(hints[f.name], f"{cls.__name__}.{f.name}") for f in fields(cls)}


def _plain(hint: Any, where: str) -> str:
    origin = get_origin(hint)
    if origin is Literal:
        value_types = {type(value) for value in get_args(hint)}
        if len(value_types) != 1:
            raise TypeError(f"{where}: a Literal must hold values of one type, not {value_types}")
        return value_types.pop().__name__
    if origin is Union or origin is types.UnionType:
        members: list[str] = []
        for arg in get_args(hint):
            name = _plain(arg, where)
            if name not in members:
                members.append(name)
        return " | ".join(members)
    if hint is type(None):
        return "None"
    if isinstance(hint, type) and origin is None:
        return hint.__name__
    if origin in (dict, list):  # a parameterized builtin: dict[str, int], dict[str, SourceTrust]
        return f"{origin.__name__}[{', '.join(_plain(a, where) for a in get_args(hint))}]"
    return str(hint)
