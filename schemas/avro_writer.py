"""A compiled Avro binary writer for the contract's dataclasses.

fastavro's writer interprets the schema for every record and costs about half a microsecond per
field; a ModelEvent has some thirty, and the adapters' hot path encodes one per event. This
module compiles each record schema once into straight-line Python that writes the dataclass's
attributes directly (no intermediate dict), so the encoder costs a fraction of that.

What the generated code does to stay cheap (it runs once per event):
- nested records that are not union branches (a ModelEvent's ``source`` and ``envelope``) are
  written inline, not through a call of their own;
- string fields named in ``cached`` (the run's id, provider, api, kind, role... — a small
  vocabulary repeated on every event) come whole, length prefix included, from a memo keyed by
  the string: one dict lookup instead of encode, len and two appends. The memo is bounded: it
  is emptied when it reaches ``CACHE_LIMIT`` entries, so a long-lived process with many run ids
  holds at most that many; consecutive memoized fields share one lookup keyed by the tuple of
  their values;
- pieces are appended to a list and joined once at the end (cheaper than growing a bytearray
  piece by piece); ``compile_encoder`` returns a function that builds the whole single-object
  record (header + body) and returns its bytes, one call per record.

It covers exactly the Avro subset the shipped schemas use (records, unions of null and one type,
unions of records, string, bytes, int, long, boolean, double, maps and arrays of those) and
refuses anything else at compile time. The test suite checks its output byte for byte against
fastavro's writer on property-generated records; decoding stays with fastavro.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Collection

from modelevents.schemas.errors import SchemaError

_PACK_DOUBLE = struct.Struct("<d").pack


def _zigzag_varint(n: int) -> bytes:
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
_SMALL = [_zigzag_varint(n) for n in range(16384)]
# Small negatives (a ModelEvent's ``seq`` is -1 until the sequencer assigns it): -n → _NEGATIVE[n].
_NEGATIVE = [_zigzag_varint(-n) for n in range(64)]


def _encode_long(n: int) -> bytes:
    """Any Avro int or long; the generated code takes non-negative small ones from _SMALL."""
    if -64 < n < 0:
        return _NEGATIVE[-n]
    return _zigzag_varint(n)


def _long(n: int) -> bytes:
    if 0 <= n < 16384:
        return _SMALL[n]
    return _encode_long(n)


def _short_name(name: str) -> str:
    return name.rsplit(".", 1)[-1]


CACHE_LIMIT = 4096

# Memos of whole encodings (length prefix and UTF-8 bytes; for optional strings the union branch
# index too), keyed by the string. Shared by every compiled writer: equal strings encode equally.
_STRINGS: dict[str, bytes] = {}
_OPTIONAL_STRINGS: dict[str | None, bytes] = {None: b"\x00"}
_GROUPS: dict[tuple, bytes] = {}


def _cache_string(value: str) -> bytes:
    raw = value.encode()
    n = len(raw)
    encoded = (_SMALL[n] if n < 16384 else _encode_long(n)) + raw
    if len(_STRINGS) >= CACHE_LIMIT:
        _STRINGS.clear()
    _STRINGS[value] = encoded
    return encoded


def _cache_group(values: tuple, optional: tuple[bool, ...]) -> bytes:
    """Consecutive memoized fields encoded together, memoized by the tuple of their values."""
    encoded = b"".join(
        (_OPTIONAL_STRINGS.get(v) or _cache_optional_string(v)) if opt
        else (_STRINGS.get(v) or _cache_string(v)) for v, opt in zip(values, optional))
    if len(_GROUPS) >= CACHE_LIMIT:
        _GROUPS.clear()
    _GROUPS[values] = encoded
    return encoded


def _cache_optional_string(value: str) -> bytes:
    # None is always in the memo (re-added on clearing): here value is not None.
    raw = value.encode()
    n = len(raw)
    encoded = b"\x02" + (_SMALL[n] if n < 16384 else _encode_long(n)) + raw
    if len(_OPTIONAL_STRINGS) >= CACHE_LIMIT:
        _OPTIONAL_STRINGS.clear()
        _OPTIONAL_STRINGS[None] = b"\x00"
    _OPTIONAL_STRINGS[value] = encoded
    return encoded


class _Compiler:
    def __init__(self, named: dict[str, dict], cached: Collection[tuple[str, str]]) -> None:
        self.named = named  # short record name → schema, for references by name
        self.cached = frozenset(cached)  # (record short name, field name) of memoized strings
        self.functions: dict[str, list[str]] = {}
        self.tables: list[str] = []  # module-level dispatch tables, defined after the functions
        self.inlining: list[str] = []  # records being written inline (recursion guard)
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
        self.inlining.append(_short_name(schema["name"]))
        self.record_fields(schema, "obj", body, 0)
        self.inlining.pop()
        self.functions[fname] = [f"def {fname}(obj, ap):"] + ["    " + line for line in body or ["pass"]]
        return fname

    def record_fields(self, schema: dict, obj: str, out: list[str], depth: int) -> None:
        pad = "    " * depth
        record = _short_name(schema["name"])
        fields = schema["fields"]
        i = 0
        while i < len(fields):
            # Consecutive memoized strings (a ModelEvent's run_id .. kind) share one lookup.
            group = []
            while (i + len(group) < len(fields)
                   and self.string_kind(record, fields[i + len(group)]) is not None):
                group.append(fields[i + len(group)])
            if len(group) >= 2:
                values = [self.var() for _ in group]
                out += [f"{pad}{v} = {obj}.{f['name']}" for v, f in zip(values, group)]
                key, optional = self.var(), tuple(
                    self.string_kind(record, f) == "optional" for f in group)
                out += [f"{pad}{key} = ({', '.join(values)},)", f"{pad}try:",
                        f"{pad}    ap(_GROUPS[{key}])", f"{pad}except KeyError:",
                        f"{pad}    ap(_cache_group({key}, {optional!r}))"]
                i += len(group)
                continue
            field = fields[i]
            i += 1
            value = self.var()
            out.append(f"{pad}{value} = {obj}.{field['name']}")
            kind = self.string_kind(record, field)
            if kind is None:
                self.value(field["type"], value, out, depth)
                continue
            memo, miss = (("_OPTIONAL_STRINGS", "_cache_optional_string") if kind == "optional"
                          else ("_STRINGS", "_cache_string"))
            # A miss (or a value of the wrong type) takes the slow path, which raises for non-str.
            out += [f"{pad}try:", f"{pad}    ap({memo}[{value}])",
                    f"{pad}except KeyError:", f"{pad}    ap({miss}({value}))"]

    def string_kind(self, record: str, field: dict) -> str | None:
        """"plain" or "optional" for a memoized string field, None for any other field."""
        if (record, field["name"]) not in self.cached:
            return None
        schema = field["type"]
        if schema == "string" or schema == {"type": "string"}:
            return "plain"
        if isinstance(schema, list) and len(schema) == 2 and schema[0] == "null" and (
                schema[1] == "string" or schema[1] == {"type": "string"}):
            return "optional"
        return None

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
                    f"{pad}ap(_SMALL[{n}] if {n} < 16384 else _encode_long({n}))",
                    f"{pad}ap({b})"]
        elif kind == "bytes":
            n = self.var()
            out += [f"{pad}{n} = len({expr})",
                    f"{pad}ap(_SMALL[{n}] if {n} < 16384 else _encode_long({n}))",
                    f"{pad}ap({expr})"]
        elif kind in ("int", "long"):
            out.append(f"{pad}ap(_SMALL[{expr}] if 0 <= {expr} < 16384 else _encode_long({expr}))")
        elif kind == "boolean":
            out.append(f"{pad}ap(b'\\x01' if {expr} else b'\\x00')")
        elif kind == "double":
            out.append(f"{pad}ap(_PACK_DOUBLE({expr}))")
        elif kind == "null":
            pass
        elif kind == "record":
            name = _short_name(schema["name"])
            if name in self.inlining or "w_" + name in self.functions:
                out.append(f"{pad}{self.record_function(schema)}({expr}, ap)")
            else:
                # A nested record: its fields inline, saving a call per record written.
                self.named[name] = schema
                self.inlining.append(name)
                self.record_fields(schema, expr, out, depth)
                self.inlining.pop()
        elif kind in ("map", "array"):
            item = self.var()
            key = self.var()
            out.append(f"{pad}if {expr}:")
            out.append(f"{pad}    ap(_long(len({expr})))")
            if kind == "map":
                out.append(f"{pad}    for {key}, {item} in {expr}.items():")
                self.value("string", key, out, depth + 2)
                self.value(schema["values"], item, out, depth + 2)
            else:
                out.append(f"{pad}    for {item} in {expr}:")
                self.value(schema["items"], item, out, depth + 2)
            out.append(f"{pad}ap(b'\\x00')")
        else:
            raise SchemaError(f"the compiled writer does not support Avro type {kind!r}")

    def union(self, branches: list, expr: str, out: list[str], depth: int) -> None:
        pad = "    " * depth
        branches = [self.named.get(_short_name(b), b) if isinstance(b, str) else b
                    for b in branches]
        kinds = [b["type"] if isinstance(b, dict) else b for b in branches]
        if len(branches) == 2 and kinds[0] == "null":
            out.append(f"{pad}if {expr} is None:")
            out.append(f"{pad}    ap(b'\\x00')")
            out.append(f"{pad}else:")
            out.append(f"{pad}    ap(b'\\x02')")
            self.value(branches[1], expr, out, depth + 1)
        elif all(k == "record" for k in kinds):
            # A union of records is chosen by the dataclass's name, which equals the record's.
            table = {_short_name(b["name"]): (i, self.record_function(b)) for i, b in enumerate(branches)}
            entries = ", ".join(f"{name!r}: ({_long(i)!r}, {fn})" for name, (i, fn) in table.items())
            table_name = f"_UNION{len(self.tables)}"
            self.tables.append(f"{table_name} = {{{entries}}}")
            index, fn = self.var(), self.var()
            out.append(f"{pad}{index}, {fn} = {table_name}[type({expr}).__name__]")
            out.append(f"{pad}ap({index})")
            out.append(f"{pad}{fn}({expr}, ap)")
        else:
            raise SchemaError(f"the compiled writer does not support the union {kinds}")


def _build(schema: dict, named: dict[str, dict] | None, cached: Collection[tuple[str, str]],
           header: bytes | None) -> Callable:
    compiler = _Compiler({} if named is None else named, cached)
    entry = compiler.record_function(schema)
    source = "\n\n".join("\n".join(lines) for lines in compiler.functions.values())
    source += "\n\n" + "\n".join(compiler.tables)
    if header is not None:
        # The whole single-object record in one call: header, the body written inline, bytes.
        lines = compiler.functions[entry][1:]
        source += ("\n\ndef encode(obj):\n    parts = [_HEADER]\n    ap = parts.append\n"
                   + "\n".join(lines) + "\n    return b''.join(parts)\n")
        entry = "encode"
    else:
        source += (f"\n\ndef write(obj, buf):\n    parts = []\n    {entry}(obj, parts.append)\n"
                   "    buf += b''.join(parts)\n")
        entry = "write"
    namespace: dict[str, Any] = {"_long": _long, "_SMALL": _SMALL, "_encode_long": _encode_long,
                                 "_PACK_DOUBLE": _PACK_DOUBLE, "_HEADER": header,
                                 "_STRINGS": _STRINGS, "_OPTIONAL_STRINGS": _OPTIONAL_STRINGS,
                                 "_cache_string": _cache_string,
                                 "_cache_optional_string": _cache_optional_string,
                                 "_GROUPS": _GROUPS, "_cache_group": _cache_group}
    exec(compile(source, f"<avro writer {schema['name']}>", "exec"), namespace)
    return namespace[entry]


def compile_writer(schema: dict, named: dict[str, dict] | None = None,
                   cached: Collection[tuple[str, str]] = ()
                   ) -> Callable[[Any, bytearray], None]:
    """Record schema (as JSON) → ``write(obj, buf)`` appending obj's Avro binary form.

    ``named`` collects the records defined so far (short name → schema): pass the same dict
    when a later schema refers to records of an earlier one (RunState uses Usage). ``cached``
    names the string fields, as (record short name, field name), whose values are memoized."""
    return _build(schema, named, cached, None)


def compile_encoder(schema: dict, header: bytes, named: dict[str, dict] | None = None,
                    cached: Collection[tuple[str, str]] = ()) -> Callable[[Any], bytes]:
    """Like ``compile_writer``, but ``encode(obj)`` returns ``header`` + obj's Avro binary form
    as bytes (the single-object encoding when header is magic + fingerprint)."""
    return _build(schema, named, cached, header)
