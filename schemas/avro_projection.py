"""A compiled Avro reader of *some* fields of a record: the others are skipped, not built.

``avro_reader.compile_reader`` builds the whole record as dicts; a reader that needs four fields
of a ModelEvent (``audit verify``: run id, tenant, kind, seq, frame id, body length, piece)
spent most of its time building the payload it then dropped. This compiles, from the same schema
and with the same compiler, a function that walks the whole record in wire order — so a record
whose lengths, counts, union branches or end do not hold is still refused (:class:`CorruptRecord`)
— but reads only the fields named in a *projection* and skips the rest (a string by its length,
undecoded; a map or array block by its byte size when the writer gave it).

A projection maps a field name to:

* ``True`` — the field's value, as ``compile_reader`` gives it;
* ``"length"`` — a string or bytes field's length in bytes (the bytes are skipped);
* ``"memo"`` — the field's value as ``True`` gives it, for fields whose few values repeat from
  record to record (a tenant, a kind): consecutive ``"memo"`` fields are walked as one run of
  bytes, and their values looked up by those bytes (decoded once per distinct run, up to
  :data:`MEMO_SIZE` of them — then the memo starts again);
* ``"last"`` — the field's value as ``True`` gives it, for fields that are most often the same
  as in the record read just before (a run id, in a stream where a run's events come together):
  consecutive ``"last"`` fields are one run of bytes; when the record's bytes there begin with
  the run the previous record had, its values are taken without reading (one comparison),
  else they are read and kept for the next;
* a dict — a record field's own projection (its wanted fields are listed in place);
* ``{"$branch": {full name: True, ...}}`` — a union of records: ``(branch full name, record)``
  with the record read for the names listed, ``(branch full name, None)`` for the others.

Fields not named are skipped. The reader returns the wanted values as one flat tuple, in the
record's wire order (a nested record's wanted fields where that record stands).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from typing import Any

from modelevents.schemas.avro_reader import _ONE_BYTE, _UNPACK_DOUBLE, _Compiler, _long
from modelevents.schemas.errors import CorruptRecord, SchemaError

Projection = dict[str, Any]
# A varint of two to ten bytes, the tenth holding bit 63 alone (what avro_reader._long refuses).
_VARINT = re.compile(rb"[\x80-\xff]{1,8}[\x00-\x7f]|[\x80-\xff]{9}[\x00\x01]").match
BRANCH = "$branch"
MEMO_SIZE = 4096
_SCALARS = frozenset({"null", "string", "int", "long", "boolean", "double"})


class _Projector(_Compiler):
    """The reader compiler, plus statements that skip a value and a record read by projection."""

    def resolve(self, schema: Any) -> tuple[Any, Any]:
        """(schema, kind) with a reference by name replaced by the record it names."""
        if isinstance(schema, list):
            return schema, "union"
        kind = schema["type"] if isinstance(schema, dict) else schema
        if isinstance(kind, str) and kind in self.named:
            return self.named[kind], "record"
        if kind == "record":
            self.named.setdefault(schema["name"], schema)
        return schema, kind

    def long(self, out: list[str], pad: str) -> str:
        # Two-byte varints inline too: string lengths of 64 to 8191 bytes (run ids, bodies).
        n = self.var()
        out += [f"{pad}{n} = d[p]", f"{pad}p += 1",
                f"{pad}if {n} < 128:", f"{pad}    {n} = _ONE_BYTE[{n}]",
                f"{pad}elif d[p] < 128:", f"{pad}    {n} = ({n} & 127) | (d[p] << 7)",
                f"{pad}    p += 1", f"{pad}    {n} = ({n} >> 1) ^ -({n} & 1)",
                f"{pad}else:", f"{pad}    {n}, p = _long(d, p, {n})"]
        return n

    def skip_long(self, out: list[str], pad: str) -> None:
        # A varint of more bytes (a timestamp has six) is skipped by a regular expression: a
        # Python loop over its bytes cost more than all the rest of a skipped field.
        m = self.var()
        out += [f"{pad}if d[p] < 128:", f"{pad}    p += 1", f"{pad}else:",
                f"{pad}    {m} = _VARINT(d, p)", f"{pad}    if {m} is None:",
                f"{pad}        raise _CorruptRecord('a varint cut off or beyond 64 bits')",
                f"{pad}    p = {m}.end()"]

    def skip_sized(self, out: list[str], pad: str) -> str:
        """Skip a string or bytes value; the local holding its length."""
        n = self.long(out, pad)
        out += [f"{pad}if not 0 <= {n} <= end - p:",
                f"{pad}    raise _CorruptRecord('a length beyond the record')",
                f"{pad}p += {n}"]
        return n

    def skip(self, schema: Any, out: list[str], depth: int) -> None:
        pad = "    " * depth
        schema, kind = self.resolve(schema)
        if kind == "union":
            self.skip_union(schema, out, depth)
        elif kind in ("int", "long"):
            self.skip_long(out, pad)
        elif kind in ("string", "bytes"):
            self.skip_sized(out, pad)
        elif kind == "boolean":
            out += [f"{pad}if d[p] > 1:",
                    f"{pad}    raise _CorruptRecord('a boolean byte that is neither 0 nor 1')",
                    f"{pad}p += 1"]
        elif kind == "double":
            out += [f"{pad}if p + 8 > end:", f"{pad}    raise _CorruptRecord('a double cut off')",
                    f"{pad}p += 8"]
        elif kind == "null":
            pass
        elif kind == "record":
            for f in schema["fields"]:
                self.skip(f["type"], out, depth)
        elif kind in ("map", "array"):
            # A negative block count is followed by the block's size in bytes: jump over it.
            out.append(f"{pad}while True:")
            inner = pad + "    "
            n = self.long(out, inner)
            out += [f"{inner}if not {n}:", f"{inner}    break", f"{inner}if {n} < 0:"]
            size = self.long(out, inner + "    ")
            out += [f"{inner}    if not 0 <= {size} <= end - p:",
                    f"{inner}        raise _CorruptRecord('a block size beyond the record')",
                    f"{inner}    p += {size}", f"{inner}    continue",
                    f"{inner}for _ in range({n}):"]
            if kind == "map":
                self.skip("string", out, depth + 2)
            self.skip(schema["values"] if kind == "map" else schema["items"], out, depth + 2)
        else:
            raise SchemaError(f"the projected reader does not support Avro type {kind!r}")

    def skip_union(self, branches: list[Any], out: list[str], depth: int) -> None:
        pad = "    " * depth
        resolved = [self.resolve(b)[0] for b in branches]
        kinds = [self.resolve(b)[1] for b in branches]
        if len(branches) == 2 and kinds[0] == "null":
            index = self.var()
            out += [f"{pad}{index} = d[p]", f"{pad}p += 1", f"{pad}if {index} == 2:"]
            body: list[str] = []
            self.skip(resolved[1], body, depth + 1)
            out += body or [f"{pad}    pass"]
            out += [f"{pad}elif {index}:",
                    f"{pad}    raise _CorruptRecord('a union branch that is not in the schema')"]
            return
        if all(k == "record" for k in kinds):
            table = self.skip_table(resolved)
            index = self.long(out, pad)
            out += [f"{pad}if not 0 <= {index} < {len(resolved)}:",
                    f"{pad}    raise _CorruptRecord('a union branch that is not in the schema')",
                    f"{pad}p = {table}[{index}](d, p, end)"]
            return
        raise SchemaError(f"the projected reader does not support the union {kinds}")

    def skip_table(self, records: list[dict[str, Any]]) -> str:
        """A tuple of ``s_<name>(d, p, end) -> p`` functions, one per record, in branch order."""
        names = []
        for record in records:
            fname = "s_" + record["name"].replace(".", "_")
            if fname not in self.functions:
                self.functions[fname] = []
                body: list[str] = []
                self.skip(record, body, 1)
                self.functions[fname] = [f"def {fname}(d, p, end):", *body, "    return p"]
            names.append(fname)
        table = f"_SKIP{len(self.functions)}_{self.counter}"
        self.functions[table] = [f"{table} = ({', '.join(names)},)"]
        return table

    def project(self, schema: dict[str, Any], wanted: Projection, out: list[str],
                depth: int) -> list[str]:
        """Statements reading ``schema``'s fields in wire order; the locals of the wanted ones."""
        unknown = set(wanted) - {f["name"] for f in schema["fields"]}
        if unknown:
            raise SchemaError(f"{schema['name']} has no field {sorted(unknown)}")
        pad = "    " * depth
        values: list[str] = []
        group: list[dict[str, Any]] = []  # consecutive "memo" (or "last") fields not read yet
        grouped = None  # which of the two
        for f in schema["fields"]:
            spec = wanted.get(f["name"])
            if group and spec != grouped:
                values += self.grouped(grouped, group, out, depth)
                group = []
            if spec in ("memo", "last"):
                group.append(f)
                grouped = spec
                continue
            if spec is None or spec is False:
                self.skip(f["type"], out, depth)
            elif spec is True:
                values.append(self.value(f["type"], out, depth))
            elif spec == "length":
                if self.resolve(f["type"])[1] not in ("string", "bytes"):
                    raise SchemaError(f"{f['name']}: a length is of a string or bytes field")
                values.append(self.skip_sized(out, pad))
            elif isinstance(spec, dict) and BRANCH in spec:
                values.append(self.branch(f["type"], spec[BRANCH], out, depth))
            elif isinstance(spec, dict):
                record, kind = self.resolve(f["type"])
                if kind != "record":
                    raise SchemaError(f"{f['name']}: a nested projection is of a record field")
                values += self.project(record, spec, out, depth)
            else:
                raise SchemaError(f"{f['name']}: {spec!r} is not a projection")
        if group:
            values += self.grouped(grouped, group, out, depth)
        return values

    def grouped(self, spec: str | None, group: list[dict[str, Any]], out: list[str],
                depth: int) -> list[str]:
        return (self.memoized if spec == "memo" else self.as_last)(group, out, depth)

    def immutable(self, group: list[dict[str, Any]]) -> None:
        for f in group:  # values shared by the records that hold them: immutable ones only
            branches = f["type"] if isinstance(f["type"], list) else [f["type"]]
            if not all(self.resolve(b)[1] in _SCALARS for b in branches):
                raise SchemaError(f"{f['name']}: a memo is of a string, number or boolean field")

    def as_last(self, group: list[dict[str, Any]], out: list[str], depth: int) -> list[str]:
        """``group``'s values taken from the record read before when its bytes begin with the
        run of bytes those fields spanned there (Avro's encoding is self-delimiting: the same
        bytes read as the same values, and end at the same place); else read, and kept."""
        self.immutable(group)
        pad, inner = "    " * depth, "    " * (depth + 1)
        start, key, found = self.var(), self.var(), self.var()
        last = f"_LAST{len(self.functions)}_{self.counter}"
        self.functions[last] = [f"{last} = [b'', None]"]
        out += [f"{pad}{key}, {found} = {last}",
                f"{pad}if {found} is not None and d.startswith({key}, p):",
                f"{inner}p += len({key})", f"{pad}else:", f"{inner}{start} = p"]
        names = [self.value(f["type"], out, depth + 1) for f in group]
        listed = "".join(n + ", " for n in names)
        out += [f"{inner}{found} = ({listed})", f"{inner}{last}[:] = d[{start}:p], {found}",
                f"{pad}{listed}= {found}"]
        return names

    def memoized(self, group: list[dict[str, Any]], out: list[str], depth: int) -> list[str]:
        """Walk ``group``'s fields (every length and branch checked), then take their values
        from the memo by the bytes they span, reading them only for bytes not seen before."""
        pad = "    " * depth
        self.immutable(group)
        start, key, found = self.var(), self.var(), self.var()
        memo = f"_MEMO{len(self.functions)}_{self.counter}"
        self.functions[memo] = [f"{memo} = {{}}"]
        out.append(f"{pad}{start} = p")
        for f in group:
            self.skip(f["type"], out, depth)
        out += [f"{pad}{key} = d[{start}:p]", f"{pad}{found} = {memo}.get({key})",
                f"{pad}if {found} is None:", f"{pad}    p, {start} = {start}, p"]
        names = [self.value(f["type"], out, depth + 1) for f in group]
        out += [f"{pad}    p = {start}", f"{pad}    {found} = ({''.join(n + ', ' for n in names)})",
                f"{pad}    if len({memo}) >= {MEMO_SIZE}:", f"{pad}        {memo}.clear()",
                f"{pad}    {memo}[{key}] = {found}",
                f"{pad}{''.join(n + ', ' for n in names)}= {found}"]
        return names

    def branch(self, branches: Any, read: dict[str, bool], out: list[str], depth: int) -> str:
        pad = "    " * depth
        if not isinstance(branches, list):
            raise SchemaError("a $branch projection is of a union of records")
        resolved = [self.resolve(b) for b in branches]
        if not all(kind == "record" for _, kind in resolved):
            raise SchemaError("a $branch projection is of a union of records")
        records = [r for r, _ in resolved]
        table = f"_BRANCH{len(self.functions)}_{self.counter}"
        entries = []
        for record in records:
            if read.get(record["name"]):
                fn = self.record_function(record)
                entries.append(f"({record['name']!r}, {fn}, True)")
            else:
                entries.append(f"({record['name']!r}, {self.skip_table([record])}[0], False)")
        self.functions[table] = [f"{table} = ({', '.join(entries)},)"]
        index = self.long(out, pad)
        name, fn, built, v = (self.var() for _ in range(4))
        out += [f"{pad}if not 0 <= {index} < {len(records)}:",
                f"{pad}    raise _CorruptRecord('a union branch that is not in the schema')",
                f"{pad}{name}, {fn}, {built} = {table}[{index}]",
                f"{pad}if {built}:", f"{pad}    {v}, p = {fn}(d, p, end)",
                f"{pad}    {v} = ({name}, {v})", f"{pad}else:",
                f"{pad}    p = {fn}(d, p, end)", f"{pad}    {v} = ({name}, None)"]
        return v


def named_records(schema: Any, found: dict[str, dict[str, Any]] | None = None
                  ) -> dict[str, dict[str, Any]]:
    """Full name → record of every record a parsed schema defines (where a later use names it)."""
    found = {} if found is None else found
    if isinstance(schema, list):
        for branch in schema:
            named_records(branch, found)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind == "record" and schema["name"] not in found:
            found[schema["name"]] = schema
            for f in schema["fields"]:
                named_records(f["type"], found)
        elif kind == "map":
            named_records(schema["values"], found)
        elif kind == "array":
            named_records(schema["items"], found)
    return found


def compile_projection(schema: dict[str, Any], named: dict[str, dict[str, Any]],
                       wanted: Projection, *, to_end: bool = True,
                       types: dict[str, type] | None = None, prefix: bool = False,
                       pad: int = 0) -> Callable[[bytes, int], tuple[Any, ...]]:
    """Parsed record schema → ``read(data, start)``: the tuple of ``wanted``'s values of the
    record whose body starts at ``start`` and runs exactly to the end of ``data`` (bytes left
    over are a CorruptRecord, as a record that ends early is).

    With ``to_end=False`` the record may be followed by others (the records of a container
    block): the tuple ends with the position after the record, and nothing checks the end.

    ``types`` is ``compile_reader``'s: a wanted record of such a short name is built as that
    dataclass, a wanted union of them gives the object itself.

    With ``prefix=True`` only the fields up to the last wanted one are read: what follows is
    neither walked nor checked (no end check; with ``to_end=False`` the tuple ends with the
    position after that field, where a reader of the rest can go on). ``pad`` Nones follow the
    values (a reader that gives the shape of a fuller one)."""
    compiler = _Projector(dict(named), dict(types or {}))
    body: list[str] = []
    if prefix:
        last = max(i for i, f in enumerate(schema["fields"]) if wanted.get(f["name"]))
        schema = {**schema, "fields": schema["fields"][:last + 1]}
    values = compiler.project(schema, wanted, body, 2)
    values += ["None"] * pad
    functions = sorted(compiler.functions.items(), key=lambda item: item[0].startswith("_"))
    source = "\n\n".join("\n".join(lines) for _, lines in functions)
    result = "(" + "".join(f"{v}, " for v in values) + ("" if to_end else "p, ") + ")"
    end_check = ("    if p != end:\n"
                 "        raise _CorruptRecord(f'{end - p} bytes after the record')\n")
    source += ("\n\ndef read(d, start):\n    p = start\n    end = len(d)\n    try:\n"
               + "\n".join(body) + "\n"
               "    except (IndexError, struct.error, UnicodeDecodeError) as exc:\n"
               "        raise _CorruptRecord(f'{type(exc).__name__}: {exc}') from None\n"
               + (end_check if to_end and not prefix else "") + f"    return {result}\n")
    namespace: dict[str, Any] = {"_long": _long, "_ONE_BYTE": _ONE_BYTE,
                                 "_CorruptRecord": CorruptRecord,
                                 "_UNPACK_DOUBLE": _UNPACK_DOUBLE, "struct": struct,
                                 "_VARINT": _VARINT}
    namespace.update({f"_T_{name}": cls for name, cls in (types or {}).items()})
    exec(compile(source, f"<avro projection {schema['name']}>", "exec"), namespace)
    read: Callable[[bytes, int], tuple[Any, ...]] = namespace["read"]
    return read
