"""A compiled Avro binary reader for records written with the current schemas.

fastavro's ``schemaless_reader`` interprets the schema for every record (a ProviderFrame
decoded at ~66k/s through it, ~150k/s through this), and the stream processor decodes one frame
per record it consumes. This module compiles a record schema once into straight-line Python
that reads the fields in wire order from the bytes and builds the same value fastavro would,
with ``return_record_name=True, return_record_name_override=True``: records as dicts, a union
of records as ``(full name, dict)``, a union of null and one type as that type's value or None.

It reads records whose writer schema *is* the reader schema (no resolution: the codec uses it
only when the fingerprint is the current one, and fastavro for every older writer). It covers
the Avro subset the shipped schemas use (records, unions of null and one type, unions of
records, string, bytes, int, long, boolean, double, maps and arrays) and refuses anything else
at compile time. Truncated input, and a length, count or branch beyond what the bytes hold,
raise :class:`CorruptRecord` (bytes altered into another valid record cannot be told, by any
reader); the test suite checks its output against fastavro's on property-generated records.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from typing import Any

from modelevents.schemas.errors import CorruptRecord, SchemaError

_UNPACK_DOUBLE = struct.Struct("<d").unpack_from


def _long(data: bytes, pos: int, first: int) -> tuple[int, int]:
    """The long whose varint began with ``first`` (≥ 0x80) and goes on at ``pos``: (n, pos)."""
    value, shift = first & 0x7F, 7
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            # The tenth byte holds bit 63 alone: more is beyond a long (fastavro wraps it).
            if shift == 63 and byte > 1:
                raise CorruptRecord("a varint beyond 64 bits")
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecord("a varint longer than 10 bytes")


# A one-byte varint's long (lengths, counts, branches and small numbers are nearly all one byte).
_ONE_BYTE = tuple((b >> 1) ^ -(b & 1) for b in range(128))


class _Compiler:
    """Schema → Python source. ``value`` appends the statements that read one value at ``p``
    (advancing it) into a local, and returns that local's name."""

    def __init__(self, named: dict[str, dict[str, Any]],
                 types: dict[str, type] | None = None) -> None:
        self.named = named  # full name → parsed record schema
        self.types = types or {}  # short record name → the class a record of it is built as
        self.functions: dict[str, list[str]] = {}
        self.counter = 0

    def var(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def record_function(self, schema: dict[str, Any]) -> str:
        """Define ``r_<n>(d, p, end) -> (dict, p)`` for a record (once), return its name."""
        fname: str = "r_" + schema["name"].replace(".", "_")
        if fname not in self.functions:
            self.functions[fname] = []  # reserved: a recursive schema would loop otherwise
            body: list[str] = []
            result = self.record(schema, body, 1)
            self.functions[fname] = [f"def {fname}(d, p, end):", *body, f"    return {result}, p"]
        return fname

    def record(self, schema: dict[str, Any], out: list[str], depth: int) -> str:
        values = [(f["name"], self.value(f["type"], out, depth)) for f in schema["fields"]]
        short = schema["name"].rsplit(".", 1)[-1]
        if short in self.types:
            # The object itself (one call, no dict in between): by position, in the class's
            # order, when the record holds the class's first fields (a call by keyword cost
            # twice as much), else by keyword.
            cls = self.types[short]
            _check_fields(cls, [name for name, _ in values])
            local = dict(values)
            order = [f.name for f in dataclasses.fields(cls) if f.init][:len(values)]
            if set(order) == set(local):
                return f"_T_{short}(" + ", ".join(local[name] for name in order) + ")"
            return f"_T_{short}(" + ", ".join(f"{name}={v}" for name, v in values) + ")"
        return "{" + ", ".join(f"{name!r}: {v}" for name, v in values) + "}"

    def long(self, out: list[str], pad: str) -> str:
        n = self.var()
        out += [f"{pad}{n} = d[p]", f"{pad}p += 1",
                f"{pad}if {n} > 127:", f"{pad}    {n}, p = _long(d, p, {n})",
                f"{pad}else:", f"{pad}    {n} = _ONE_BYTE[{n}]"]
        return n

    def value(self, schema: Any, out: list[str], depth: int) -> str:
        pad = "    " * depth
        if isinstance(schema, list):
            return self.union(schema, out, depth)
        kind = schema["type"] if isinstance(schema, dict) else schema
        if isinstance(kind, str) and kind in self.named:
            schema, kind = self.named[kind], "record"
        if kind in ("int", "long"):
            return self.long(out, pad)
        if kind in ("string", "bytes"):
            n, v = self.long(out, pad), self.var()
            out += [f"{pad}if not 0 <= {n} <= end - p:",
                    f"{pad}    raise _CorruptRecord('a length beyond the record')",
                    f"{pad}{v} = d[p:p + {n}]" + (".decode()" if kind == "string" else ""),
                    f"{pad}p += {n}"]
            return v
        if kind == "boolean":
            v = self.var()
            out += [f"{pad}{v} = d[p]", f"{pad}p += 1", f"{pad}if {v} > 1:",
                    f"{pad}    raise _CorruptRecord('a boolean byte that is neither 0 nor 1')",
                    f"{pad}{v} = {v} == 1"]
            return v
        if kind == "double":
            v = self.var()
            out += [f"{pad}{v}, = _UNPACK_DOUBLE(d, p)", f"{pad}p += 8"]
            return v
        if kind == "null":
            return "None"
        if kind == "record":
            # Not a union branch: read inline, a call saved per record.
            self.named.setdefault(schema["name"], schema)
            v = self.var()
            out.append(f"{pad}{v} = {self.record(schema, out, depth)}")
            return v
        if kind in ("map", "array"):
            # Blocks of items until an empty one; a negative count is followed by the block's
            # size in bytes (which a reader that reads every item does not need).
            items, count = self.var(), self.var()
            out += [f"{pad}{items} = {{}}" if kind == "map" else f"{pad}{items} = []",
                    f"{pad}while True:"]
            n = self.long(out, pad + "    ")
            out += [f"{pad}    if not {n}:", f"{pad}        break",
                    f"{pad}    if {n} < 0:", f"{pad}        {n} = -{n}"]
            self.long(out, pad + "        ")
            out.append(f"{pad}    for {count} in range({n}):")
            if kind == "map":
                key = self.value("string", out, depth + 2)
                item = self.value(schema["values"], out, depth + 2)
                out.append(f"{pad}        {items}[{key}] = {item}")
            else:
                item = self.value(schema["items"], out, depth + 2)
                out.append(f"{pad}        {items}.append({item})")
            return items
        raise SchemaError(f"the compiled reader does not support Avro type {kind!r}")

    def union(self, branches: list[Any], out: list[str], depth: int) -> str:
        pad = "    " * depth
        resolved: list[Any] = [self.named.get(b, b) if isinstance(b, str) else b
                               for b in branches]
        kinds = [b["type"] if isinstance(b, dict) else b for b in resolved]
        if len(branches) == 2 and kinds[0] == "null":
            # The branch index is one byte, 00 or 02 (zig-zag 0 or 1).
            index, v = self.var(), self.var()
            out += [f"{pad}{index} = d[p]", f"{pad}p += 1",
                    f"{pad}if {index} == 0:", f"{pad}    {v} = None",
                    f"{pad}elif {index} == 2:"]
            inner = self.value(resolved[1], out, depth + 1)
            out += [f"{pad}    {v} = {inner}", f"{pad}else:",
                    f"{pad}    raise _CorruptRecord('a union branch that is not in the schema')"]
            return v
        index, v = self.long(out, pad), self.var()
        if all(k == "record" for k in kinds):
            table = f"_UNION{len(self.functions)}_{self.counter}"
            entries = ", ".join(f"({b['name']!r}, {self.record_function(b)})" for b in resolved)
            self.functions[table] = [f"{table} = ({entries},)"]
            name, fn = self.var(), self.var()
            out += [f"{pad}if not 0 <= {index} < {len(resolved)}:",
                    f"{pad}    raise _CorruptRecord('a union branch that is not in the schema')",
                    f"{pad}{name}, {fn} = {table}[{index}]",
                    f"{pad}{v}, p = {fn}(d, p, end)"]
            if not all(b["name"].rsplit(".", 1)[-1] in self.types for b in resolved):
                out.append(f"{pad}{v} = ({name}, {v})")  # a typed branch names itself
            return v
        raise SchemaError(f"the compiled reader does not support the union {kinds}")


def _check_fields(cls: type, names: list[str]) -> None:
    """Refuse, at compile time, a class that a record of these fields cannot build."""
    declared = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [n for n in names if n not in declared]
    missing = [n for n, f in declared.items() if n not in names
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if unknown or missing:
        raise SchemaError(f"{cls.__name__} cannot be built from its record: fields {unknown} "
                          f"unknown to it, {missing} missing from the record")


def compile_reader(schema: dict[str, Any], named: dict[str, dict[str, Any]],
                   types: dict[str, type] | None = None) -> Callable[[bytes, int], Any]:
    """Parsed record schema → ``read(data, start)``: the record whose body starts at ``start``
    (after a single-object header, say) and runs to the end of ``data``.

    ``named`` maps full names to the parsed record schemas that references by name resolve to
    (what ``fastavro.parse_schema`` collected). ``types`` maps short record names to dataclasses:
    a record of such a name is built as that class (its fields must match), and a
    union of such records gives the object alone, its class naming the branch — the typed
    reader the codec decodes ModelEvents with, no dict built per record and unpacked again."""
    types = dict(types or {})
    compiler = _Compiler(dict(named), types)
    entry = compiler.record_function(schema)
    # Tables refer to the functions: define every function first.
    functions = sorted(compiler.functions.items(), key=lambda item: item[0].startswith("_"))
    source = "\n\n".join("\n".join(lines) for _, lines in functions)
    source += (f"\n\ndef read(d, start):\n    try:\n        return {entry}(d, start, len(d))[0]\n"
               "    except (IndexError, struct.error, UnicodeDecodeError) as exc:\n"
               "        raise _CorruptRecord(f'{type(exc).__name__}: {exc}') from None\n")
    namespace: dict[str, Any] = {"_long": _long, "_ONE_BYTE": _ONE_BYTE,
                                 "_CorruptRecord": CorruptRecord,
                                 "_UNPACK_DOUBLE": _UNPACK_DOUBLE, "struct": struct}
    namespace.update({f"_T_{name}": cls for name, cls in types.items()})
    exec(compile(source, f"<avro reader {schema['name']}>", "exec"), namespace)
    reader: Callable[[bytes, int], Any] = namespace["read"]
    return reader
