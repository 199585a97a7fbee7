"""A compiled Avro binary writer for the contract's dataclasses.

fastavro's writer interprets the schema for every record and costs about half a microsecond per
field; a ModelEvent has some thirty, and the adapters' hot path encodes one per event. This
module compiles each record schema once into straight-line Python that writes the dataclass's
attributes directly (no intermediate dict), so the encoder costs a fraction of that.

It covers exactly the Avro subset the shipped schemas use (records, unions of null and one type,
unions of records, string, bytes, int, long, boolean, double, maps and arrays of those) and
refuses anything else at compile time. The test suite checks its output byte for byte against
fastavro's writer on property-generated records; decoding stays with fastavro.
"""

from __future__ import annotations

import struct
from typing import Any, Callable

from modelevents.schemas.errors import SchemaError

_PACK_DOUBLE = struct.Struct("<d").pack


def _encode_long(n: int) -> bytes:
    """Zig-zag varint (Avro int and long)."""
    n = (n << 1) ^ (n >> 63)
    if n < 0 or n >= 1 << 64:
        raise ValueError("value out of the Avro long range")
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


# Lengths, indexes and small numbers: a table lookup instead of the loop.
_SMALL = [_encode_long(n) for n in range(16384)]


def _long(n: int) -> bytes:
    if 0 <= n < 16384:
        return _SMALL[n]
    return _encode_long(n)


def _short_name(name: str) -> str:
    return name.rsplit(".", 1)[-1]


class _Compiler:
    def __init__(self, named: dict[str, dict]) -> None:
        self.named = named  # short record name → schema, for references by name
        self.functions: dict[str, list[str]] = {}
        self.tables: list[str] = []  # module-level dispatch tables, defined after the functions
        self.counter = 0

    def var(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def record_function(self, schema: dict) -> str:
        fname = "w_" + _short_name(schema["name"])
        if fname in self.functions:
            return fname
        self.named[_short_name(schema["name"])] = schema
        self.functions[fname] = []  # reserve the name: recursive schemas would loop otherwise
        body: list[str] = []
        for field in schema["fields"]:
            value = self.var()
            body.append(f"{value} = obj.{field['name']}")
            self.value(field["type"], value, body, 0)
        self.functions[fname] = [f"def {fname}(obj, buf):"] + ["    " + line for line in body or ["pass"]]
        return fname

    def value(self, schema: Any, expr: str, out: list[str], depth: int) -> None:
        pad = "    " * depth
        if isinstance(schema, list):
            self.union(schema, expr, out, depth)
            return
        kind = schema["type"] if isinstance(schema, dict) else schema
        if isinstance(kind, str) and _short_name(kind) in self.named:
            schema, kind = self.named[_short_name(kind)], "record"
        # Lengths and small numbers come from the table inline: a call per field costs more
        # than the rest of the field's encoding.
        if kind == "string":
            b, n = self.var(), self.var()
            out += [f"{pad}{b} = {expr}.encode()", f"{pad}{n} = len({b})",
                    f"{pad}buf += _SMALL[{n}] if {n} < 16384 else _encode_long({n})",
                    f"{pad}buf += {b}"]
        elif kind == "bytes":
            n = self.var()
            out += [f"{pad}{n} = len({expr})",
                    f"{pad}buf += _SMALL[{n}] if {n} < 16384 else _encode_long({n})",
                    f"{pad}buf += {expr}"]
        elif kind in ("int", "long"):
            out.append(f"{pad}buf += _SMALL[{expr}] if 0 <= {expr} < 16384 else _encode_long({expr})")
        elif kind == "boolean":
            out.append(f"{pad}buf += b'\\x01' if {expr} else b'\\x00'")
        elif kind == "double":
            out.append(f"{pad}buf += _PACK_DOUBLE({expr})")
        elif kind == "null":
            pass
        elif kind == "record":
            out.append(f"{pad}{self.record_function(schema)}({expr}, buf)")
        elif kind in ("map", "array"):
            item = self.var()
            key = self.var()
            out.append(f"{pad}if {expr}:")
            out.append(f"{pad}    buf += _long(len({expr}))")
            if kind == "map":
                out.append(f"{pad}    for {key}, {item} in {expr}.items():")
                self.value("string", key, out, depth + 2)
                self.value(schema["values"], item, out, depth + 2)
            else:
                out.append(f"{pad}    for {item} in {expr}:")
                self.value(schema["items"], item, out, depth + 2)
            out.append(f"{pad}buf += b'\\x00'")
        else:
            raise SchemaError(f"the compiled writer does not support Avro type {kind!r}")

    def union(self, branches: list, expr: str, out: list[str], depth: int) -> None:
        pad = "    " * depth
        branches = [self.named.get(_short_name(b), b) if isinstance(b, str) else b
                    for b in branches]
        kinds = [b["type"] if isinstance(b, dict) else b for b in branches]
        if len(branches) == 2 and kinds[0] == "null":
            out.append(f"{pad}if {expr} is None:")
            out.append(f"{pad}    buf += b'\\x00'")
            out.append(f"{pad}else:")
            out.append(f"{pad}    buf += b'\\x02'")
            self.value(branches[1], expr, out, depth + 1)
        elif all(k == "record" for k in kinds):
            # A union of records is chosen by the dataclass's name, which equals the record's.
            table = {_short_name(b["name"]): (i, self.record_function(b)) for i, b in enumerate(branches)}
            entries = ", ".join(f"{name!r}: ({_long(i)!r}, {fn})" for name, (i, fn) in table.items())
            table_name = f"_UNION{len(self.tables)}"
            self.tables.append(f"{table_name} = {{{entries}}}")
            index, fn = self.var(), self.var()
            out.append(f"{pad}{index}, {fn} = {table_name}[type({expr}).__name__]")
            out.append(f"{pad}buf += {index}")
            out.append(f"{pad}{fn}({expr}, buf)")
        else:
            raise SchemaError(f"the compiled writer does not support the union {kinds}")


def compile_writer(schema: dict, named: dict[str, dict] | None = None
                   ) -> Callable[[Any, bytearray], None]:
    """Record schema (as JSON) → ``write(obj, buf)`` appending obj's Avro binary form.

    ``named`` collects the records defined so far (short name → schema): pass the same dict
    when a later schema refers to records of an earlier one (RunState uses Usage)."""
    compiler = _Compiler({} if named is None else named)
    entry = compiler.record_function(schema)
    source = "\n\n".join("\n".join(lines) for lines in compiler.functions.values())
    source += "\n\n" + "\n".join(compiler.tables)
    namespace: dict[str, Any] = {"_long": _long, "_SMALL": _SMALL, "_encode_long": _encode_long,
                                 "_PACK_DOUBLE": _PACK_DOUBLE}
    exec(compile(source, f"<avro writer {schema['name']}>", "exec"), namespace)
    return namespace[entry]
