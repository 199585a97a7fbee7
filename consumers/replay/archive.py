"""Archives: ModelEvents (and optionally ProviderFrames) in a standard Avro object container file.

The file is what any Avro reader reads (Java avro-tools, fastavro, Spark …): the header carries
the writer schema as JSON — the ModelEvent schema of ``schemas/avro/model_event.avsc`` verbatim,
or the union ``[ModelEvent, ProviderFrame]`` when frames are included — blocks are deflate-
compressed, and each record is the dict the codec's schema describes (payload as the named union
branch). Header metadata says what the file holds::

    modelevents.contents    "events" | "events+frames"
    modelevents.selection   JSON: how the records were chosen (run id, time range, topics)
    modelevents.created_at  ISO time of the export

Kafka values are Avro single-object encoded (``schemas.codec``). An archive record is the same
data without the 10-byte header, so ``value_of(record_of(value)) == value`` for every record
written with the current schema: importing an export writes byte-identical values, and a second
import only repeats records that consumers dedupe by ``(run_id, seq)``.

    with ArchiveWriter(path, with_frames=True, selection={...}) as out:
        out.write_value(kafka_value_bytes)           # or out.write(name, record_dict)
    info = read_header(path)                         # ArchiveInfo: contents, count is unknown
    for name, record in read_archive(path): ...      # name: EVENT or FRAME
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import to_parsing_canonical_form
from fastavro.write import Writer

from modelevents.consumers.errors import ArchiveError
from modelevents.schemas import codec
from modelevents.schemas.errors import SchemaError
from modelevents.schemas.events import KIND_PAYLOAD

EVENT = "modelevents.ModelEvent"
FRAME = "modelevents.ProviderFrame"
ARCHIVE_CODEC = "deflate"
_KEEP_NAMES = {EVENT: "event", FRAME: "frame"}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MILLISECOND = dt.timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class ArchiveInfo:
    path: Path
    contents: str  # events | events+frames
    selection: dict[str, Any]
    created_at: str | None
    codec: str
    current_schema: bool  # written with this version's schemas (no resolution needed to read)


@cache
def _raw_schema(file_name: str) -> dict:
    return json.loads((codec.AVRO_DIR / file_name).read_text())


def container_schema(with_frames: bool) -> dict | list:
    """The writer schema of an archive: ModelEvent, or the union [ModelEvent, ProviderFrame]."""
    event = _raw_schema("model_event.avsc")
    return [event, _raw_schema("provider_frame.avsc")] if with_frames else event


@cache
def _parsed(with_frames: bool) -> Any:
    return fastavro.parse_schema(container_schema(with_frames), {})


# --- Kafka value <-> archive record ------------------------------------------------------------


def record_of(value: bytes) -> tuple[str, dict[str, Any]]:
    """A Kafka value (single-object encoding, any released schema version) → (record name, the
    record as a dict of the current schema)."""
    if len(value) < 10 or value[:2] != codec.MAGIC:
        raise SchemaError(f"not an Avro single-object record ({len(value)} bytes, starts "
                          f"{value[:2].hex(' ') or 'with nothing'})")
    schema_set = codec.schemas()
    known = schema_set.writers.get(bytes(value[2:10]))
    if known is None:
        raise SchemaError(f"writer schema {bytes(value[2:10]).hex()} is unknown to this version; "
                          "upgrade modelevents")
    name, writer = known
    if name not in _KEEP_NAMES:
        raise SchemaError(f"a {name} record cannot go into an archive (events and frames only)")
    # Resolution against the current schema only for records of another version: it halves
    # fastavro's read speed.
    current = schema_set.current_fingerprint[name] == bytes(value[2:10])
    try:
        record = fastavro.schemaless_reader(
            # Both schemas without logical types: timestamps stay epoch-millisecond ints.
            io.BytesIO(value[10:]), writer, None if current else schema_set.plain[name],
            return_record_name=True, return_record_name_override=True)
    except Exception as exc:  # fastavro raises bare exceptions of many types on corrupt bodies
        raise SchemaError(f"corrupt {name} record: {exc}") from exc
    if not isinstance(record, dict):
        raise SchemaError(f"corrupt {name} record: not a record")
    return name, record


def value_of(name: str, record: dict[str, Any]) -> bytes:
    """(record name, record dict) → the Kafka value in single-object encoding, checked by
    decoding it as the pipeline would (kind and payload must agree)."""
    schema_set = codec.schemas()
    buf = io.BytesIO()
    buf.write(codec.MAGIC)
    buf.write(schema_set.current_fingerprint[name])
    try:
        fastavro.schemaless_writer(buf, schema_set.current[name], record)
    except Exception as exc:  # fastavro: ValueError, TypeError, KeyError … for a misfit record
        raise SchemaError(f"record does not fit the {name} schema: {exc}") from exc
    value = buf.getvalue()
    payload = record.get("payload") if name == EVENT else None
    if isinstance(payload, tuple):
        # What decoding checks beyond the schema, without paying for a decode (import's cost).
        expected = KIND_PAYLOAD.get(record["kind"])
        if expected is not None and payload[0].rsplit(".", 1)[-1] != expected.__name__:
            raise SchemaError(f"event {record['event_id']}: kind {record['kind']} carries a "
                              f"{payload[0].rsplit('.', 1)[-1]} payload, expected "
                              f"{expected.__name__}")
    elif name == EVENT:
        codec.decode(value)  # payload given without its branch name: let decoding judge it
    return value


def key_of(name: str, record: dict[str, Any]) -> str:
    """The Kafka key of an archived record: run_id for events, run_key for frames."""
    return record["run_id"] if name == EVENT else record["run_key"]


# --- writing -----------------------------------------------------------------------------------


class ArchiveWriter:
    """Writes an archive to ``path`` atomically: records go to a temporary file beside it, which
    replaces ``path`` only when the writer is closed without an error — a failed or interrupted
    export never leaves a truncated file that looks complete."""

    def __init__(self, path: str | Path, *, with_frames: bool = False,
                 selection: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.with_frames = with_frames
        self.counts = {"event": 0, "frame": 0}
        self._tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.part")
        metadata = {
            "modelevents.contents": "events+frames" if with_frames else "events",
            "modelevents.selection": json.dumps(selection or {}, sort_keys=True),
            "modelevents.created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        try:
            self._file = open(self._tmp, "wb")
        except OSError as exc:
            raise ArchiveError(f"cannot write {self.path}: {exc.strerror or exc}") from exc
        self._writer = Writer(self._file, container_schema(with_frames), codec=ARCHIVE_CODEC,
                              metadata=metadata)

    def write(self, name: str, record: dict[str, Any]) -> None:
        if name == FRAME and not self.with_frames:
            raise ArchiveError("this archive holds events only; open it with with_frames=True")
        # A union file names the branch of every record; an events-only file is plain records.
        # (name, record) is how fastavro takes a union branch; its annotations do not say so.
        item: Any = (name, record) if self.with_frames else record
        self._writer.write(item)
        self.counts[_KEEP_NAMES[name]] += 1

    def write_value(self, value: bytes) -> str:
        """Archive one Kafka value; returns its record name."""
        name, record = record_of(value)
        self.write(name, record)
        return name

    def close(self) -> None:
        self._writer.flush()
        self._file.flush()
        os.fsync(self._file.fileno())
        self._file.close()
        os.replace(self._tmp, self.path)

    def abort(self) -> None:
        self._file.close()
        self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> ArchiveWriter:
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


# --- reading -----------------------------------------------------------------------------------


def _open(path: Path):
    try:
        return open(path, "rb")
    except OSError as exc:
        raise ArchiveError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _container_reader(path: Path, fo: Any, reader_schema: Any = None) -> Any:
    try:
        return fastavro.reader(fo, reader_schema=reader_schema, return_record_name=True,
                               return_record_name_override=True)
    except Exception as exc:  # fastavro: ValueError("cannot read header"), EOFError, …
        raise ArchiveError(f"{path} is not an Avro object container file ({exc}); "
                           "`modelevents replay export` writes those") from exc


def _canonical(schema: Any) -> str | None:
    try:
        return to_parsing_canonical_form(fastavro.parse_schema(schema, {}))
    except Exception:
        return None


def _names_in(writer_schema: Any) -> list[str]:
    branches = writer_schema if isinstance(writer_schema, list) else [writer_schema]
    return [b.get("name", "?") if isinstance(b, dict) else str(b) for b in branches]


def read_header(path: str | Path) -> ArchiveInfo:
    """What an archive holds, from its header; raises ArchiveError for anything else."""
    path = Path(path)
    with _open(path) as fo:
        reader = _container_reader(path, fo)
        names = _names_in(reader.writer_schema)
        meta = reader.metadata
    current = _canonical(reader.writer_schema) == _canonical(
        container_schema(names != [EVENT]))
    if names == [EVENT]:
        contents = "events"
    elif sorted(names) == sorted([EVENT, FRAME]):
        contents = "events+frames"
    else:
        raise ArchiveError(f"{path} holds {', '.join(names)} records, not modelevents events "
                           f"({EVENT}) and frames ({FRAME})")
    try:
        selection = json.loads(meta.get("modelevents.selection", "{}"))
    except ValueError:
        selection = {}
    return ArchiveInfo(path, contents, selection, meta.get("modelevents.created_at"),
                       meta.get("avro.codec", "null"), current)


def read_archive(path: str | Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (record name, record dict of the current schema) in file order. Files written with
    an earlier schema version are read through Avro schema resolution."""
    path = Path(path)
    info = read_header(path)
    with_frames = info.contents == "events+frames"
    # Schema resolution halves fastavro's read speed: only ask for it when the file was written
    # with another version of the schemas.
    reader_schema = None if info.current_schema else _parsed(with_frames)
    # fastavro turns the header schema's timestamp-millis longs into datetimes (by the writer
    # schema, whatever the reader's): back to the epoch-millisecond ints record_of gives.
    timestamps = codec.schemas().timestamp_fields
    with _open(path) as fo:
        reader = _container_reader(path, fo, reader_schema)
        position = 0
        try:
            for item in reader:
                position += 1
                if with_frames:
                    name, record = item
                else:
                    name, record = EVENT, item
                for field in timestamps[name]:
                    moment = record.get(field)
                    if isinstance(moment, dt.datetime):
                        record[field] = (moment - _EPOCH) // _MILLISECOND
                yield name, record
        except ArchiveError:
            raise
        except Exception as exc:  # a corrupt block: fastavro raises what the codec raised
            raise ArchiveError(f"{path}: record {position + 1} cannot be read ({exc}); the file "
                               "is damaged or truncated") from exc
