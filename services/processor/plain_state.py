"""A run's in-memory state as plain data: JSON trees that name only the project's own classes.

The worker keeps each run's adapters and numbering in a table whose changelog is a Kafka topic.
A pickle there would let whoever can write the topic run code in the worker, and a code upgrade
could make stored state unreadable (values pickled by earlier versions are still read:
``table_values.py``). This module turns such a state into a
tree of JSON values and back, with these rules:

- JSON's own values stand for themselves: ``str``, ``int`` (64-bit), ``bool``, ``None``, finite
  ``float``, ``list``, and ``dict`` with string keys that do not start with ``$``.
- Everything else is a one-key object whose key names the type: ``{"$t": [...]}`` tuple,
  ``{"$q": [...]}`` deque, ``{"$s": [...]}`` set, ``{"$d": [[k, v], ...]}`` any other dict
  (keys not strings, or starting with ``$`` — so provider data held in a state can never pass
  for a tag), ``{"$b": "hex"}`` bytes, ``{"$f": "inf"}`` a float JSON has no literal for,
  ``{"$i": "digits"}`` an int beyond 64 bits.
- An object is ``{"$": "<module below modelevents>.<class>", <field>: <tree>, ...}`` — by field
  name, never by position — or ``{"$": ..., "$state": <tree>}`` for a class with a state method
  of its own (``__getstate__``/``__setstate__``, e.g. a field derived from another is left out).
  An object met a second time in the same tree is ``{"$r": n}``: the n-th object written
  (counting from 0, in the order the tree is written and read), so that what was one object in
  two places — a block's parts, also in a message's list of blocks — is one object again.
  Only classes defined in ``modelevents.adapters``, ``modelevents.schemas`` and the worker's
  per-run modules (:data:`_STATE_MODULES`) can be named; decoding never imports or looks
  anything up by a name it read beyond that table, and the only code it runs is the project's
  own (a class's ``__setstate__``, an adapter's constructor for the defaults below).

More on this module: docs/worker.md, ``services/processor/plain_state.py``.
"""

from __future__ import annotations

import dataclasses
import sys
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson

from modelevents.adapters.base import Adapter
from modelevents.services.errors import UnreadableState

__all__ = ["UnreadableState", "dumps", "loads", "state_class", "state_classes", "to_tree",
           "from_tree"]

# Modules (below ``modelevents.``) whose classes a state may contain.
_STATE_PACKAGES = ("adapters.", "schemas.")
# The worker's per-run modules, and the name each has in a tree's tags. A tag is stored on the
# changelogs for as long as a run lives, so it must not follow the code when a module moves:
# these modules were ``services.normalizer`` and ``services.sequencer`` before services/ was cut
# into packages, and their classes keep those tags (a worker of either layout reads the other's
# states).
_STATE_MODULES = {"services.run_logic.normalizer": "services.normalizer",
                  "services.run_logic.sequencer": "services.sequencer"}
_I64_MIN, _U64_MAX = -(2 ** 63), 2 ** 64 - 1


# --- the class table ---------------------------------------------------------------------------

_by_tag: dict[str, type] = {}
_tag_of: dict[type, str] = {}
_modules_seen = 0


def _refresh() -> None:
    """(Re)build the table from the project's modules that are imported (all adapters are, by
    the registry); cheap, and done again only when more modules were imported since."""
    global _modules_seen
    if len(sys.modules) == _modules_seen:
        return
    _modules_seen = len(sys.modules)
    modules = [(name[len("modelevents."):], module) for name, module in list(sys.modules.items())
               if name.startswith("modelevents.") and module is not None]
    modules = [(short, module) for short, module in modules
               if short.startswith(_STATE_PACKAGES) or short in _STATE_MODULES]
    for short, module in modules:
        prefix = _STATE_MODULES.get(short, short)
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == f"modelevents.{short}":
                tag = f"{prefix}.{value.__qualname__}"
                _by_tag[tag] = value
                _tag_of[value] = tag
    # A class moved to a module of its own is still imported by the module it left: states
    # written before the move name it there, and find it (it is the same class of the table).
    for short, module in modules:
        prefix = _STATE_MODULES.get(short, short)
        for name, value in list(vars(module).items()):
            if isinstance(value, type) and value in _tag_of:
                _by_tag.setdefault(f"{prefix}.{name}", value)


def state_class(tag: str) -> type | None:
    """The class a tree's ``"$"`` names, or None when no state may hold such an object."""
    cls = _by_tag.get(tag)
    if cls is None:
        _refresh()
        cls = _by_tag.get(tag)
    return cls


def state_classes() -> dict[str, type]:
    """Every class a state may hold, by tag (for tests and documentation)."""
    _refresh()
    return dict(_by_tag)


# --- encoding ----------------------------------------------------------------------------------

_str, _int, _bool, _float, _list, _dict = str, int, bool, float, list, dict


# Objects met so far in the tree being written: id → (their number, the object, kept alive so
# that its id is not reused by a temporary one). A second meeting writes {"$r": number}.
_memo: dict[int, tuple[int, Any]] = {}


def to_tree(value: Any) -> Any:
    """``value`` as a tree of JSON values (see the module docstring). Raises TypeError for an
    object of a class no state may hold (a programming error, never input)."""
    _memo.clear()
    try:
        return _tree(value)
    finally:
        _memo.clear()


def _tree(value: Any) -> Any:
    kind = type(value)
    if kind is _str or kind is _bool or value is None or (
            kind is _int and _I64_MIN <= value <= _U64_MAX):
        return value
    encode = _ENCODERS.get(kind)
    if encode is None:
        encode = _encoder_for(kind)
    return encode(value)


def dumps(value: Any) -> bytes:
    """``value``'s tree as JSON bytes."""
    return orjson.dumps(to_tree(value))


def _list_tree(items: Any) -> list[Any]:
    # Strings and 64-bit ints (frame ids, event id hashes) are most of a state's values: no call.
    return [x if (t := type(x)) is _str or (t is _int and _I64_MIN <= x <= _U64_MAX) else _tree(x)
            for x in items]


def _dict_tree(mapping: dict[Any, Any]) -> Any:
    for key in mapping:
        if type(key) is not _str or key[:1] == "$":
            return {"$d": [[_tree(k), _tree(v)] for k, v in mapping.items()]}
    return {k: (v if type(v) is _str else _tree(v)) for k, v in mapping.items()}


def _int_tree(n: int) -> Any:
    return n if _I64_MIN <= n <= _U64_MAX else {"$i": str(n)}


def _float_tree(x: float) -> Any:
    return x if x - x == 0 else {"$f": repr(x)}  # inf - inf and nan - nan are nan


_ENCODERS: dict[type, Callable[[Any], Any]] = {
    int: _int_tree,
    float: _float_tree,
    list: _list_tree,
    dict: _dict_tree,
    tuple: lambda t: {"$t": _list_tree(t)},
    deque: lambda q: {"$q": _list_tree(q)},
    set: lambda s: {"$s": _list_tree(s)},
    frozenset: lambda s: {"$s": _list_tree(s)},
    bytes: lambda b: {"$b": b.hex()},
}


def _own_state_methods(cls: type) -> bool:
    """True when ``cls`` (or a base of the project's) defines its own ``__getstate__`` — not
    object's, nor the positional one ``dataclass(slots=True)`` generates."""
    method = getattr(cls, "__getstate__", None)
    return (method is not None and method is not getattr(object, "__getstate__", None)
            and getattr(method, "__name__", "") != "_dataclass_getstate")


def _encoder_for(cls: type) -> Callable[[Any], Any]:
    _refresh()
    tag = _tag_of.get(cls)
    if tag is None:
        raise TypeError(f"a run's state holds a {cls.__module__}.{cls.__qualname__}, which is "
                        "not plain data and not a class of modelevents' adapters or schemas")
    if _own_state_methods(cls):
        if getattr(cls, "__setstate__", None) is None:
            raise TypeError(f"{tag} has a __getstate__ of its own but no __setstate__ to read "
                            "it back: a state class needs both, or neither")

        def fields(obj: Any) -> dict[str, Any]:
            return {"$": tag, "$state": _tree(obj.__getstate__())}
    else:
        names = _field_names(cls)

        def fields(obj: Any) -> dict[str, Any]:
            tree: dict[str, Any] = {"$": tag}
            for name in names(obj):
                value = getattr(obj, name, _ABSENT)
                if value is not _ABSENT:
                    tree[name] = value if type(value) is _str else _tree(value)
            return tree

    def encode(obj: Any) -> Any:
        # An object held in two places (a block's parts, also in the list of a message's blocks)
        # must come back as one object: the second place refers to the first.
        seen = _memo.get(id(obj))
        if seen is not None:
            return {"$r": seen[0]}
        _memo[id(obj)] = (len(_memo), obj)
        return fields(obj)
    _ENCODERS[cls] = encode
    return encode


_ABSENT = object()


def _field_names(cls: type) -> Callable[[Any], Any]:
    if dataclasses.is_dataclass(cls):
        fixed = tuple(f.name for f in dataclasses.fields(cls))
        return lambda obj: fixed
    slots = tuple(_slots(cls))
    if slots and not cls.__dictoffset__:  # instances without a __dict__
        return lambda obj: slots
    return lambda obj: tuple(vars(obj))


def _slots(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        declared = klass.__dict__.get("__slots__", ())
        names += [declared] if isinstance(declared, str) else list(declared)
    return [n for n in names if n not in ("__dict__", "__weakref__")]


# --- decoding ----------------------------------------------------------------------------------


def loads(data: bytes | memoryview) -> Any:
    """The value ``dumps`` wrote. Raises UnreadableState."""
    try:
        tree = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise UnreadableState(f"not a JSON state: {exc}") from None
    return from_tree(tree)


# Objects rebuilt so far from the tree being read, in the order to_tree numbered them.
_objects: list[Any] = []


def from_tree(tree: Any) -> Any:
    """The value a tree stands for. Raises UnreadableState."""
    _objects.clear()
    try:
        return _value(tree)
    except RecursionError:
        raise UnreadableState("a state nested deeper than any this version writes") from None
    finally:
        _objects.clear()


def _value(tree: Any) -> Any:
    kind = type(tree)
    if kind is _list:
        return [x if (t := type(x)) is _str or t is _int else _value(x) for x in tree]
    if kind is not _dict:
        return tree
    if "$" in tree:
        return _object(tree)
    if len(tree) == 1:
        (key, inner), = tree.items()
        if key[:1] == "$":
            return _special(key, inner)
    return {k: (v if type(v) is _str else _value(v)) for k, v in tree.items()}


def _special(key: str, inner: Any) -> Any:
    try:
        if key == "$r":
            if type(inner) is not _int or not 0 <= inner < len(_objects):
                raise ValueError("not the number of an object met before")
            return _objects[inner]
        if key == "$t":
            return tuple(_value(inner))
        if key == "$q":
            return deque(_value(inner))
        if key == "$s":
            return set(_value(inner))
        if key == "$d":
            return {_value(k): _value(v) for k, v in inner}
        if key == "$b":
            return bytes.fromhex(inner)
        if key == "$f":
            return float(inner) if inner in ("inf", "-inf", "nan") else _bad(key, inner)
        if key == "$i":
            return int(inner)
    except UnreadableState:
        raise
    except (TypeError, ValueError, IndexError) as exc:
        raise UnreadableState(f"{key} value {str(inner)[:80]!r} is malformed: {exc}") from None
    raise UnreadableState(f"unknown tag {key!r} (written by a newer version?)")


def _bad(key: str, inner: Any) -> Any:
    raise UnreadableState(f"{key} value {str(inner)[:80]!r} is malformed")


class _Shape:
    """How objects of one class are rebuilt (worked out once per class)."""

    def __init__(self, cls: type, tag: str) -> None:
        self.cls, self.tag = cls, tag
        self.slots = frozenset(_slots(cls)) if not cls.__dictoffset__ else None
        self.fields = ({f.name: f for f in dataclasses.fields(cls)}
                       if dataclasses.is_dataclass(cls) else None)
        self.is_adapter = issubclass(cls, Adapter)
        self.names = (frozenset(self.fields) if self.fields is not None else self.slots)
        self.defaults: dict[str, Callable[[Any], Any]] = dict(getattr(cls, "state_defaults", {}))
        self.attributes: frozenset[str] | None = None  # an adapter's, once known

    def missing(self, obj: Any, present: Any) -> None:
        """Give attributes the stored state lacks (added since it was written) their defaults:
        a dataclass field's declared one, an adapter's as a new adapter starts it, a slot's from
        the class's ``state_defaults`` (name → function of the object). Raises UnreadableState
        for one without."""
        absent = [n for n in self.names or () if n not in present]
        if self.is_adapter and self.names is None:
            fresh = _fresh_adapter(self.cls, obj)
            absent = [n for n in vars(fresh) if n not in present]
            for name in absent:
                object.__setattr__(obj, name, getattr(fresh, name))
            return
        for name in absent:
            spec = self.fields.get(name) if self.fields is not None else None
            if spec is not None and spec.default is not dataclasses.MISSING:
                value = spec.default
            elif spec is not None and spec.default_factory is not dataclasses.MISSING:
                value = spec.default_factory()
            elif name in self.defaults:
                value = self.defaults[name](obj)
            else:
                raise UnreadableState(f"{self.tag} has no stored {name!r} and no default for it "
                                      "(written by an earlier version?)")
            object.__setattr__(obj, name, value)


_shapes: dict[type, _Shape] = {}


def _object(tree: dict[str, Any]) -> Any:
    tag = tree["$"]
    # Any, not type: mypy would check cls.__new__ below as type.__new__, the metaclass's; what
    # runs is the class's own, which makes the bare object whatever class the tag names.
    cls: Any = state_class(tag) if type(tag) is _str else None
    if cls is None:
        raise UnreadableState(f"a state names class {str(tag)[:120]!r}, which this version does "
                              "not have among its adapters' and schemas' classes")
    shape = _shapes.get(cls)
    if shape is None:
        shape = _shapes[cls] = _Shape(cls, tag)
    obj = cls.__new__(cls)
    _objects.append(obj)
    if "$state" in tree:
        setstate = getattr(obj, "__setstate__", None)
        if setstate is None:
            raise UnreadableState(f"{tag} carries a $state, but this version keeps its fields")
        try:
            setstate(_value(tree["$state"]))
        except UnreadableState:
            raise
        except Exception as exc:
            raise UnreadableState(f"{tag}: its stored state does not fit this version: "
                                  f"{exc!r}") from None
        if shape.names is not None:
            shape.missing(obj, [n for n in shape.names if hasattr(obj, n)])
        elif shape.is_adapter:
            _adapter_defaults(shape, obj, vars(obj))
        return obj
    names = shape.names
    setattr_ = object.__setattr__
    stored = 0
    for name, value in tree.items():
        if name == "$" or (names is not None and name not in names):
            continue  # a field an earlier version had: nowhere to put it now
        if name[:2] == "__":
            raise UnreadableState(f"{tag} carries a field {name[:40]!r}, which no state has")
        setattr_(obj, name, value if type(value) is _str else _value(value))
        stored += 1
    if names is not None:
        if stored < len(names):
            shape.missing(obj, tree)
    elif shape.is_adapter:
        _adapter_defaults(shape, obj, tree)
    return obj


def _adapter_defaults(shape: _Shape, obj: Any, present: Any) -> None:
    if shape.attributes is None:  # what a new adapter of this class has, found once
        shape.attributes = frozenset(vars(_fresh_adapter(shape.cls, obj)))
    if not shape.attributes <= present.keys():
        shape.missing(obj, present)


def _fresh_adapter(cls: type, stored: Any) -> Any:
    """A new adapter of the stored one's run, whose attributes are the defaults of those the
    stored state lacks (it was written before they existed)."""
    try:
        return cls(str(getattr(stored, "run_id", "")), tenant=str(getattr(stored, "tenant", "default")),
                   provider=getattr(stored, "provider", None))
    except Exception as exc:
        raise UnreadableState(f"cannot start a {cls.__qualname__} for the stored state: "
                              f"{exc!r}") from None
