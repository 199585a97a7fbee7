"""The audit archive's on-disk format: Avro object container files chained by SHA-256.

An archive is a directory (``docs/audit.md`` is the user's guide)::

    DIR/archive.json                                   what the archive holds (id, topics, group, policy)
    DIR/checkpoints.jsonl                              the chain's head at each checkpoint
    DIR/digests/<hour>/<checkpoint>.json               each checkpoint's signed head (heads.py)
    DIR/tenant=<t>/hour=<YYYY-MM-DDTHH>/<seg>.avro     Avro object container file
    DIR/tenant=<t>/hour=<YYYY-MM-DDTHH>/<seg>.manifest.jsonl
    DIR/quarantine/                                    torn bytes cut off a file at recovery

Each record of a container file is an :data:`AUDIT_RECORD` — where it was on Kafka (topic,
partition, offset, log timestamp, key) and the Kafka value verbatim (Avro single-object
encoding of a ModelEvent, a ProviderFrame, a run's input packet, RunInput, or a tool
executor's ToolReceipt). Block ``n`` of the archive (all files, in the order
they were written) has ``hash_n = sha256(hash_{n-1} || block bytes)`` where the block bytes are
the block exactly as it lies in the file (record count, size, data, sync marker) and
``hash_{-1}`` is 32 zero bytes. The manifest beside each file is JSON lines: a header, one line
per block (position, length, ``sha256`` of the block bytes, ``prev``, ``hash``, the first/last
offset and count per topic-partition, the value schemas seen), and a seal when the file is
closed.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, unquote

from fastavro import parse_schema
from fastavro.schema import to_parsing_canonical_form

from modelevents.consumers.tools.receipts import decode_receipt, is_receipt
from modelevents.schemas import codec
from modelevents.schemas.run_input import is_run_input
from modelevents.schemas.run_input_pieces import is_piece
from modelevents.schemas.run_input_pieces import tenant_of as tenant_of_input

FORMAT = "modelevents-audit/1"
MAGIC = b"Obj\x01"
GENESIS = bytes(32)
CODECS = ("deflate", "null")
MANIFEST_SUFFIX = ".manifest.jsonl"
DEFAULT_REDACTION = {"policy": "none"}

AUDIT_RECORD: dict[str, Any] = {
    "type": "record", "name": "AuditRecord", "namespace": "modelevents.audit",
    "doc": "One Kafka record as the audit archive keeps it: where it was, and its value verbatim "
           "(Avro single-object encoding: C3 01, the CRC-64-AVRO fingerprint of the writer "
           "schema, the body; schemas/avro/ has the schemas).",
    "fields": [
        {"name": "topic", "type": "string"},
        {"name": "partition", "type": "int"},
        {"name": "offset", "type": "long"},
        {"name": "timestamp", "type": "long", "doc": "Kafka log time, epoch milliseconds"},
        {"name": "key", "type": ["null", "bytes"]},
        {"name": "value", "type": ["null", "bytes"]},
    ],
}
SCHEMA_JSON = json.dumps(AUDIT_RECORD, separators=(",", ":"))


def _crc64_table() -> list[int]:
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    return table


def fingerprint(canonical: str) -> str:
    """CRC-64-AVRO of a Parsing Canonical Form, as 16 hex digits (little-endian bytes)."""
    table = _crc64_table()
    fp = 0xC15D213AA4D7A795
    for byte in canonical.encode():
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return struct.pack("<Q", fp).hex()


CONTAINER_FINGERPRINT = fingerprint(to_parsing_canonical_form(parse_schema(AUDIT_RECORD, {})))


# --- Avro binary primitives ----------------------------------------------------------------------


def zigzag(n: int) -> bytes:
    """An Avro long (zig-zag varint)."""
    n = (n << 1) ^ (n >> 63)
    if n < 0x80:
        return _ONE[n]
    if n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    if n < 0x200000:
        return bytes((n & 0x7F | 0x80, (n >> 7) & 0x7F | 0x80, n >> 14))
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_ONE = [bytes((i,)) for i in range(128)]


def read_long(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """(value, new position); IndexError when the bytes end inside it."""
    b = data[pos]
    pos += 1
    n = b & 0x7F
    shift = 7
    while b & 0x80:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
    return (n >> 1) ^ -(n & 1), pos


def topic_prefix_bytes(topic: str, partition: int) -> bytes:
    raw = topic.encode()
    return zigzag(len(raw)) + raw + zigzag(partition)


def encode_record(prefix: bytes, offset: int, timestamp: int, key: bytes | None,
                  value: bytes | None) -> bytes:
    """One AuditRecord in Avro binary (``prefix``: the topic and partition, encoded once)."""
    parts = [prefix, zigzag(offset), zigzag(timestamp)]
    if key is None:
        parts.append(b"\x00")
    else:
        parts += [b"\x02", zigzag(len(key)), key]
    if value is None:
        parts.append(b"\x00")
    else:
        parts += [b"\x02", zigzag(len(value)), value]
    return b"".join(parts)


@dataclass(slots=True)
class RawRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


def decode_records(data: bytes, count: int) -> Iterator[RawRecord]:
    """The ``count`` AuditRecords of a block's (decompressed) data."""
    pos = 0
    end = len(data)
    topics: dict[bytes, str] = {}
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            n, pos = b >> 1, pos + 1
        else:
            n, pos = read_long(data, pos)
        raw_topic = data[pos:pos + n]
        topic = topics.get(raw_topic)
        if topic is None:
            topic = topics[raw_topic] = raw_topic.decode()
        pos += n
        b = data[pos]
        if b < 0x80:
            partition, pos = b >> 1, pos + 1
        else:
            partition, pos = read_long(data, pos)
        offset, pos = read_long(data, pos)
        timestamp, pos = read_long(data, pos)
        fields: list[bytes | None] = []
        for _field in range(2):
            branch = data[pos]
            pos += 1
            if branch == 0:
                fields.append(None)
            elif branch == 2:
                n, pos = read_long(data, pos)
                if n < 0 or pos + n > end:
                    raise IndexError("bytes end inside a record")
                fields.append(data[pos:pos + n])
                pos += n
            else:
                raise ValueError(f"union branch byte {branch}")
        yield RawRecord(topic, partition, offset, timestamp, fields[0], fields[1])
    if pos != end:
        raise ValueError(f"{end - pos} bytes after the block's {count} records")


def compress(codec_name: str, data: bytes) -> bytes:
    if codec_name == "null":
        return data
    c = zlib.compressobj(1, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def decompress(codec_name: str, data: bytes) -> bytes:
    return data if codec_name == "null" else zlib.decompress(data, -15)


# --- container file ------------------------------------------------------------------------------


def container_header(codec_name: str, sync: bytes, meta: dict[str, Any]) -> bytes:
    entries = {"avro.schema": SCHEMA_JSON.encode(), "avro.codec": codec_name.encode(),
               "modelevents.audit": json.dumps(meta, sort_keys=True).encode()}
    out = [MAGIC, zigzag(len(entries))]
    for k, v in entries.items():
        out += [zigzag(len(k)), k.encode(), zigzag(len(v)), v]
    out += [b"\x00", sync]
    return b"".join(out)


def block_bytes(count: int, data: bytes, sync: bytes) -> bytes:
    return b"".join([zigzag(count), zigzag(len(data)), data, sync])


def chain(prev: bytes, block: bytes | memoryview) -> bytes:
    h = hashlib.sha256(prev)
    h.update(block)
    return h.digest()


@dataclass(slots=True)
class Header:
    length: int
    metadata: dict[str, bytes]
    sync: bytes
    codec: str


def parse_header(data: bytes | memoryview) -> Header:
    """The container header at the start of ``data``; ValueError/IndexError when it is not one."""
    if bytes(data[:4]) != MAGIC:
        raise ValueError("not an Avro object container file (no Obj\\x01 magic)")
    pos = 4
    meta: dict[str, bytes] = {}
    while True:
        count, pos = read_long(data, pos)
        if count == 0:
            break
        if count < 0:
            _, pos = read_long(data, pos)
            count = -count
        for _ in range(count):
            n, pos = read_long(data, pos)
            k = bytes(data[pos:pos + n]).decode()
            pos += n
            n, pos = read_long(data, pos)
            meta[k] = bytes(data[pos:pos + n])
            pos += n
    sync = bytes(data[pos:pos + 16])
    if len(sync) != 16:
        raise IndexError("the header ends before its sync marker")
    return Header(pos + 16, meta, sync, meta.get("avro.codec", b"null").decode())


@dataclass(slots=True)
class RawBlock:
    index: int  # position among the blocks of the file as found
    start: int
    length: int
    count: int
    data_start: int
    data_length: int
    sync_ok: bool


@dataclass(slots=True)
class Scan:
    header: Header | None
    blocks: list[RawBlock] = field(default_factory=list)
    torn_at: int | None = None  # the file ends inside the block starting here
    problem: str | None = None


def scan_blocks(data: bytes | memoryview, header: Header) -> Scan:
    """Every block after the header, as it lies in the bytes (no decompression)."""
    scan = Scan(header)
    pos = header.length
    end = len(data)
    while pos < end:
        start = pos
        try:
            count, pos = read_long(data, pos)
            size, pos = read_long(data, pos)
        except IndexError:
            scan.torn_at = start
            return scan
        if count < 0 or size < 0:
            scan.problem = f"byte {start}: not a block (count {count}, size {size})"
            scan.torn_at = start
            return scan
        data_start = pos
        pos += size + 16
        if pos > end:
            scan.torn_at = start
            return scan
        sync_ok = bytes(data[pos - 16:pos]) == header.sync
        scan.blocks.append(RawBlock(len(scan.blocks), start, pos - start, count, data_start,
                                    size, sync_ok))
        if not sync_ok:
            # Lengths are no longer trustworthy past a block whose sync marker is wrong.
            scan.problem = f"block at byte {start}: wrong sync marker"
            return scan
    return scan


class Findings(Protocol):
    """Where a check reports (verify.py's Report)."""

    def fail(self, check: str, where: str, message: str) -> None: ...

    def note(self, check: str, where: str, message: str) -> None: ...


MAX_LISTED = 20  # ranges a finding lists


def ranges(numbers: list[int]) -> str:
    """Sorted distinct numbers as ranges (``3, 5..9``), at most :data:`MAX_LISTED` of them."""
    out: list[str] = []
    start = prev = None
    for n in numbers:
        if start is None:
            start = prev = n
        elif n == prev + 1:  # type: ignore[operator]
            prev = n
        else:
            out.append(f"{start}" if start == prev else f"{start}..{prev}")
            start = prev = n
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}..{prev}")
    if len(out) > MAX_LISTED:
        out = out[:MAX_LISTED] + [f"… ({len(out) - MAX_LISTED} more ranges)"]
    return ", ".join(out)


# --- manifests -----------------------------------------------------------------------------------


def manifest_path(avro: Path) -> Path:
    return avro.with_name(avro.name.removesuffix(".avro") + MANIFEST_SUFFIX)


def avro_path(manifest: Path) -> Path:
    return manifest.with_name(manifest.name.removesuffix(MANIFEST_SUFFIX) + ".avro")


@dataclass
class Manifest:
    header: dict[str, Any] | None
    blocks: list[dict[str, Any]]
    seal: dict[str, Any] | None
    torn_line: bool  # the last line was cut (a crash while appending it)
    bad_lines: list[int]


def read_manifest(path: Path) -> Manifest:
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    torn = bool(lines and lines[-1])  # no newline after the last line
    header = seal = None
    blocks: list[dict[str, Any]] = []
    bad: list[int] = []
    for number, line in enumerate(lines[:-1] if not torn else lines[:-1], 1):
        try:
            item = json.loads(line)
        except ValueError:
            bad.append(number)
            continue
        kind = item.get("type")
        if kind == "header" and header is None and number == 1:
            header = item
        elif kind == "block":
            blocks.append(item)
        elif kind == "seal":
            seal = item
        else:
            bad.append(number)
    return Manifest(header, blocks, seal, torn, bad)


def append_line(fd: int, item: dict[str, Any]) -> None:
    line = json.dumps(item, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    os.write(fd, line)
    os.fsync(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """``data`` as ``path``, whole or not at all, durable when this returns."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fo:
        fo.write(data)
        fo.flush()
        os.fsync(fo.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_json_atomic(path: Path, obj: dict[str, Any]) -> None:
    write_bytes_atomic(path, json.dumps(obj, sort_keys=True, indent=1).encode() + b"\n")


def partition_dir(root: Path, tenant: str, hour: str) -> Path:
    return root / f"tenant={quote(tenant, safe='')}" / f"hour={hour}"


def tenant_of_dir(path: Path) -> str:
    return unquote(path.name.removeprefix("tenant="))


def archive_files(root: Path) -> tuple[list[Path], list[Path]]:
    """(container files, manifests) under ``root``'s tenant=/hour= directories."""
    avros = sorted(root.glob("tenant=*/hour=*/*.avro"))
    manifests = sorted(root.glob(f"tenant=*/hour=*/*{MANIFEST_SUFFIX}"))
    return avros, manifests


# --- reading the values --------------------------------------------------------------------------

_EVENT_FP: bytes | None = None
_FRAME_FP: bytes | None = None


def _current_fps() -> tuple[bytes, bytes]:
    global _EVENT_FP, _FRAME_FP
    if _EVENT_FP is None:
        fps = codec.schemas().current_fingerprint
        _EVENT_FP, _FRAME_FP = fps["modelevents.ModelEvent"], fps["modelevents.ProviderFrame"]
    return _EVENT_FP, _FRAME_FP  # type: ignore[return-value]


def _skip_string(data: bytes, pos: int) -> int:
    n, pos = read_long(data, pos)
    return pos + n


def _string(data: bytes, pos: int) -> tuple[str, int]:
    n, pos = read_long(data, pos)
    return data[pos:pos + n].decode(), pos + n


def tenant_of_value(value: bytes | None) -> str | None:
    """The tenant of a ModelEvent, ProviderFrame, RunInput or ToolReceipt value, read from its
    first fields without decoding the rest (records of the current schemas); None when it cannot
    be told so."""
    if value is None or len(value) < 10 or value[:2] != codec.MAGIC:
        return None
    if is_run_input(value) or is_piece(value):  # an input packet, or a piece of one
        return tenant_of_input(value)
    if is_receipt(value):  # the tool executor's (consumers/tools/receipts.py); few and small
        try:
            return decode_receipt(value).tenant
        except Exception:  # fastavro raises bare exceptions of many types on corrupt bodies
            return None
    event_fp, frame_fp = _current_fps()
    fp = value[2:10]
    try:
        if fp == event_fp or fp == frame_fp:  # (event_id | frame_id), (run_id | run_key), tenant
            b = value[10]
            pos = 11 + (b >> 1) if b < 0x80 else _skip_string(value, 10)
            b = value[pos]
            pos = pos + 1 + (b >> 1) if b < 0x80 else _skip_string(value, pos)
            b = value[pos]
            if b < 0x80:
                return value[pos + 1:pos + 1 + (b >> 1)].decode()
            return _string(value, pos)[0]
    except (IndexError, UnicodeDecodeError):
        return None
    try:
        record = codec.decode(value)
    except Exception:
        return None
    return getattr(record, "tenant", None)
