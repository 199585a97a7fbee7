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
- no call per piece: each field's pieces (length prefix, bytes, branch index...) are bound to
  locals and the record's function ends in one ``b"".join`` of them all, a tuple display
  (cheaper than a call to append each piece to a list). Both branches of an optional value bind
  the same locals (``b""`` for what null leaves out); a record chosen from a union is a function
  returning its bytes; map and array items are collected in a list of their own.
  ``compile_encoder`` returns a function that builds the whole single-object record (header +
  body) and returns its bytes, one call per record.

It covers exactly the Avro subset the shipped schemas use (records, unions of null and one type,
unions of records, string, bytes, int, long, boolean, double, maps and arrays of those) and
refuses anything else at compile time. The test suite checks its output byte for byte against
fastavro's writer on property-generated records; decoding stays with fastavro.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Collection
from typing import Any

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
# Int and long fields: -64 … 16383 from one table, n → _INTS[n + 64], so the seq of every event an
# adapter emits (-1) costs no call of _encode_long.
_INTS = [_zigzag_varint(n) for n in range(-64, 0)] + _SMALL


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
# Keyed by (pattern, *values): the pattern numbers which of the group's fields are optional, so
# groups of different records never share an entry (("", "", "") is b"\x00\x00\x02\x00" for
# RunFinished's status, reason, raw_reason and b"\x02\x00\x00\x02\x00" for Message's item_id,
# role, phase; keyed by values alone, whichever came first was written for both).
_GROUPS: dict[tuple[Any, ...], bytes] = {}
_PATTERNS: dict[tuple[bool, ...], int] = {}


def _cache_string(value: str) -> bytes:
    raw = value.encode()
    n = len(raw)
    encoded = (_SMALL[n] if n < 16384 else _encode_long(n)) + raw
    if len(_STRINGS) >= CACHE_LIMIT:
        _STRINGS.clear()
    _STRINGS[value] = encoded
    return encoded


def _cache_group(key: tuple[Any, ...], optional: tuple[bool, ...]) -> bytes:
    """Consecutive memoized fields encoded together, memoized by their pattern and values."""
    encoded = b"".join(
        (_OPTIONAL_STRINGS.get(v) or _cache_optional_string(v)) if opt
        else (_STRINGS.get(v) or _cache_string(v)) for v, opt in zip(key[1:], optional))
    if len(_GROUPS) >= CACHE_LIMIT:
        _GROUPS.clear()
    _GROUPS[key] = encoded
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
    """Schema → Python source. Every ``value`` call appends the statements that compute a
    field's encoding to ``out`` and returns the expressions of its pieces, in wire order: the
    record's function joins them all in one ``b"".join((...))`` at its end."""

    def __init__(self, named: dict[str, dict[str, Any]], cached: Collection[tuple[str, str]]) -> None:
        self.named = named  # short record name → schema, for references by name
        self.cached = frozenset(cached)  # (record short name, field name) of memoized strings
        self.functions: dict[str, list[str]] = {}
        # Function name → its statements and the expressions of its pieces (the join's).
        self.bodies: dict[str, tuple[list[str], list[str]]] = {}
        self.tables: list[str] = []  # module-level dispatch tables, defined after the functions
        self.inlining: list[str] = []  # records being written inline (recursion guard)
        self.counter = 0

    def var(self) -> str:
        self.counter += 1
        return f"v{self.counter}"

    def record_function(self, schema: dict[str, Any]) -> str:
        """Define ``w_<Name>(obj) -> bytes`` for a record (once) and return its name."""
        fname = "w_" + _short_name(schema["name"])
        if fname in self.functions:
            return fname
        self.named[_short_name(schema["name"])] = schema
        self.functions[fname] = []  # reserve the name: recursive schemas would loop otherwise
        body: list[str] = []
        self.inlining.append(_short_name(schema["name"]))
        pieces = self.record_fields(schema, "obj", body, 0)
        self.inlining.pop()
        self.bodies[fname] = (body, pieces)
        self.functions[fname] = ([f"def {fname}(obj):"] + ["    " + line for line in body]
                                 + [f"    return {_joined(pieces)}"])
        return fname

    def record_fields(self, schema: dict[str, Any], obj: str, out: list[str], depth: int) -> list[str]:
        pad = "    " * depth
        record = _short_name(schema["name"])
        fields = schema["fields"]
        pieces: list[str] = []
        i = 0
        while i < len(fields):
            # Consecutive memoized strings (a ModelEvent's run_id .. kind) share one lookup.
            group: list[dict[str, Any]] = []
            while (i + len(group) < len(fields)
                   and self.string_kind(record, fields[i + len(group)]) is not None):
                group.append(fields[i + len(group)])
            if len(group) >= 2:
                values = [self.var() for _ in group]
                out += [f"{pad}{v} = {obj}.{f['name']}" for v, f in zip(values, group)]
                key, piece = self.var(), self.var()
                optional = tuple(self.string_kind(record, f) == "optional" for f in group)
                pattern = _PATTERNS.setdefault(optional, len(_PATTERNS))
                out += [f"{pad}{key} = ({pattern}, {', '.join(values)})", f"{pad}try:",
                        f"{pad}    {piece} = _GROUPS[{key}]", f"{pad}except KeyError:",
                        f"{pad}    {piece} = _cache_group({key}, {optional!r})"]
                pieces.append(piece)
                i += len(group)
                continue
            field = fields[i]
            i += 1
            value = self.var()
            out.append(f"{pad}{value} = {obj}.{field['name']}")
            kind = self.string_kind(record, field)
            if kind is None:
                pieces += self.value(field["type"], value, out, depth)
                continue
            memo, miss = (("_OPTIONAL_STRINGS", "_cache_optional_string") if kind == "optional"
                          else ("_STRINGS", "_cache_string"))
            # A miss (or a value of the wrong type) takes the slow path, which raises for non-str.
            piece = self.var()
            out += [f"{pad}try:", f"{pad}    {piece} = {memo}[{value}]",
                    f"{pad}except KeyError:", f"{pad}    {piece} = {miss}({value})"]
            pieces.append(piece)
        return pieces

    def string_kind(self, record: str, field: dict[str, Any]) -> str | None:
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

    def value(self, schema: Any, expr: str, out: list[str], depth: int) -> list[str]:
        """Statements for one value (``expr`` is a local name) → the expressions of its pieces."""
        pad = "    " * depth
        if isinstance(schema, list):
            return self.union(schema, expr, out, depth)
        kind = schema["type"] if isinstance(schema, dict) else schema
        if isinstance(kind, str) and _short_name(kind) in self.named:
            schema, kind = self.named[_short_name(kind)], "record"
        # Lengths and small numbers come from the table inline: a call per field costs more
        # than the rest of the field's encoding.
        if kind == "string":
            b, n = self.var(), self.var()
            out += [f"{pad}{b} = {expr}.encode()", f"{pad}{n} = len({b})"]
            return [f"_SMALL[{n}] if {n} < 16384 else _encode_long({n})", b]
        if kind == "bytes":
            n = self.var()
            out.append(f"{pad}{n} = len({expr})")
            return [f"_SMALL[{n}] if {n} < 16384 else _encode_long({n})", expr]
        if kind in ("int", "long"):
            return [f"_INTS[{expr} + 64] if -64 <= {expr} < 16384 else _encode_long({expr})"]
        if kind == "boolean":
            return [f"b'\\x01' if {expr} else b'\\x00'"]
        if kind == "double":
            return [f"_PACK_DOUBLE({expr})"]
        if kind == "null":
            return []
        if kind == "record":
            name = _short_name(schema["name"])
            if name in self.inlining or "w_" + name in self.functions:
                return [f"{self.record_function(schema)}({expr})"]
            # A nested record: its fields inline, saving a call per record written.
            self.named[name] = schema
            self.inlining.append(name)
            pieces = self.record_fields(schema, expr, out, depth)
            self.inlining.pop()
            return pieces
        if kind in ("map", "array"):
            # One block of all items, then the empty block; the items go to a list of their own.
            items, item, key, piece = self.var(), self.var(), self.var(), self.var()
            body: list[str] = []
            if kind == "map":
                loop = f"for {key}, {item} in {expr}.items():"
                item_pieces = self.value("string", key, body, depth + 2)
                item_pieces += self.value(schema["values"], item, body, depth + 2)
            else:
                loop = f"for {item} in {expr}:"
                item_pieces = self.value(schema["items"], item, body, depth + 2)
            out += [f"{pad}if {expr}:", f"{pad}    {items} = [_long(len({expr}))]",
                    f"{pad}    {loop}"] + body + [
                    f"{pad}        {items} += {_tuple(item_pieces)}",
                    f"{pad}    {items}.append(b'\\x00')",
                    f"{pad}    {piece} = b''.join({items})",
                    f"{pad}else:", f"{pad}    {piece} = b'\\x00'"]
            return [piece]
        raise SchemaError(f"the compiled writer does not support Avro type {kind!r}")

    def union(self, branches: list[Any], expr: str, out: list[str], depth: int) -> list[str]:
        pad = "    " * depth
        branches = [self.named.get(_short_name(b), b) if isinstance(b, str) else b
                    for b in branches]
        kinds = [b["type"] if isinstance(b, dict) else b for b in branches]
        if len(branches) == 2 and kinds[0] == "null":
            # Both branches bind the same pieces (b'' for what null leaves out), so that the
            # record's join can name them whichever branch ran.
            body: list[str] = []
            inner = self.value(branches[1], expr, body, depth + 1)
            index, names = self.var(), [self.var() for _ in inner]
            out.append(f"{pad}if {expr} is None:")
            out.append(f"{pad}    {index} = b'\\x00'")
            if names:
                out.append(f"{pad}    {' = '.join(names)} = b''")
            out.append(f"{pad}else:")
            out.append(f"{pad}    {index} = b'\\x02'")
            out += body + [f"{pad}    {name} = {piece}" for name, piece in zip(names, inner)]
            return [index] + names
        if all(k == "record" for k in kinds):
            # A union of records is chosen by the dataclass's name, which equals the record's.
            table = {_short_name(b["name"]): (i, self.record_function(b)) for i, b in enumerate(branches)}
            entries = ", ".join(f"{name!r}: ({_long(i)!r}, {fn})" for name, (i, fn) in table.items())
            table_name = f"_UNION{len(self.tables)}"
            self.tables.append(f"{table_name} = {{{entries}}}")
            index, fn = self.var(), self.var()
            out.append(f"{pad}{index}, {fn} = {table_name}[type({expr}).__name__]")
            return [index, f"{fn}({expr})"]
        raise SchemaError(f"the compiled writer does not support the union {kinds}")


def _tuple(pieces: list[str]) -> str:
    return "(" + "".join(f"{p}, " for p in pieces) + ")"


def _joined(pieces: list[str]) -> str:
    return f"b''.join({_tuple(pieces)})" if pieces else "b''"


def _build(schema: dict[str, Any], named: dict[str, dict[str, Any]] | None, cached: Collection[tuple[str, str]],
           header: bytes | None) -> Callable[..., Any]:
    compiler = _Compiler({} if named is None else named, cached)
    entry = compiler.record_function(schema)
    source = "\n\n".join("\n".join(lines) for lines in compiler.functions.values())
    source += "\n\n" + "\n".join(compiler.tables)
    if header is not None:
        # The whole single-object record in one call: header and the body in one join.
        body, pieces = compiler.bodies[entry]
        source += ("\n\ndef encode(obj):\n" + "".join(f"    {line}\n" for line in body)
                   + f"    return {_joined(['_HEADER'] + pieces)}\n")
        entry = "encode"
    else:
        source += f"\n\ndef write(obj, buf):\n    buf += {entry}(obj)\n"
        entry = "write"
    namespace: dict[str, Any] = {"_long": _long, "_SMALL": _SMALL, "_INTS": _INTS,
                                 "_encode_long": _encode_long,
                                 "_PACK_DOUBLE": _PACK_DOUBLE, "_HEADER": header,
                                 "_STRINGS": _STRINGS, "_OPTIONAL_STRINGS": _OPTIONAL_STRINGS,
                                 "_cache_string": _cache_string,
                                 "_cache_optional_string": _cache_optional_string,
                                 "_GROUPS": _GROUPS, "_cache_group": _cache_group}
    exec(compile(source, f"<avro writer {schema['name']}>", "exec"), namespace)
    encoder: Callable[..., Any] = namespace[entry]
    return encoder


def compile_writer(schema: dict[str, Any], named: dict[str, dict[str, Any]] | None = None,
                   cached: Collection[tuple[str, str]] = ()
                   ) -> Callable[[Any, bytearray], None]:
    """Record schema (as JSON) → ``write(obj, buf)`` appending obj's Avro binary form.

    ``named`` collects the records defined so far (short name → schema): pass the same dict
    when a later schema refers to records of an earlier one (RunState uses Usage). ``cached``
    names the string fields, as (record short name, field name), whose values are memoized."""
    return _build(schema, named, cached, None)


def compile_encoder(schema: dict[str, Any], header: bytes, named: dict[str, dict[str, Any]] | None = None,
                    cached: Collection[tuple[str, str]] = ()) -> Callable[[Any], bytes]:
    """Like ``compile_writer``, but ``encode(obj)`` returns ``header`` + obj's Avro binary form
    as bytes (the single-object encoding when header is magic + fingerprint)."""
    return _build(schema, named, cached, header)
