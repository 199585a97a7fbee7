"""Export a run or a time range of the log to an archive file, and import an archive again.

    sel = Selection(run_id="run-1")                       # or from_ms= / to_ms= (epoch ms)
    result = await export_archive(settings, "out.avro", sel, with_frames=True)
    result = await import_archive(settings, "out.avro", topic="events")

Selection: a run (its events, keyed by run id, and with frames those keyed by the same run key)
and/or a time range ``[from, to)`` on the records' log timestamps — the time a record was
written to Kafka, which is what a replay "from a time" starts at. Both topics are read as a
bounded snapshot: records written after the export began are not in it.

Import produces every record with the same key and the same value bytes it had (``archive``
keeps them byte-identical), events keyed by run id on ``topic`` and frames keyed by run key on
``frames``, in file order, through the idempotent producer. Importing twice therefore only
repeats records that every consumer dedupes by ``(run_id, seq)`` (events) or ``frame_id``
(frames). The records get the import time as their log timestamp: archived times may lie past
the topic's retention, which would delete them at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka.errors import KafkaConnectionError, UnknownTopicOrPartitionError

from modelevents.consumers.errors import ArchiveError, EmptyRange, NoSuchRun
from modelevents.consumers.replay.archive import (
    EVENT,
    FRAME,
    ArchiveWriter,
    key_of,
    read_archive,
    read_header,
    record_of,
    value_of,
)
from modelevents.consumers.replay.checks import Unreadable
from modelevents.consumers.replay.topic_snapshot import Start, format_ms, read_snapshot
from modelevents.schemas.errors import ConfigError, SchemaError
from modelevents.services.errors import KafkaUnavailable
from modelevents.services.kafka.clients import await_acks, run_key_bytes, start_producer, topic_name
from modelevents.services.kafka.settings import PipelineSettings

# Delivery futures awaited in chunks: bounded memory on big archives, batching kept.
_ACK_CHUNK = 2000
# Values kept from the checking pass of an import (bytes); above it the file is read twice.
IMPORT_MEMORY_BUDGET = 256 * 1024 * 1024

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclass(frozen=True, slots=True)
class Selection:
    run_id: str | None = None
    from_ms: int | None = None  # inclusive
    to_ms: int | None = None  # exclusive

    def __post_init__(self) -> None:
        if self.run_id is None and self.from_ms is None and self.to_ms is None:
            raise ConfigError("say what to export: --run-id ID, or a time range "
                              "--from-time ISO and/or --to-time ISO")
        if self.from_ms is not None and self.to_ms is not None and self.from_ms >= self.to_ms:
            raise ConfigError(f"empty time range: --from-time {format_ms(self.from_ms)} is not "
                              f"before --to-time {format_ms(self.to_ms)}")

    def describe(self) -> str:
        parts = []
        if self.run_id is not None:
            parts.append(f"run {self.run_id}")
        if self.from_ms is not None:
            parts.append(f"from {format_ms(self.from_ms)}")
        if self.to_ms is not None:
            parts.append(f"before {format_ms(self.to_ms)}")
        return ", ".join(parts)

    def as_metadata(self) -> dict[str, Any]:
        return {"run_id": self.run_id,
                "from_time": None if self.from_ms is None else format_ms(self.from_ms),
                "to_time": None if self.to_ms is None else format_ms(self.to_ms)}

    def start(self) -> Start:
        return Start.at_time(self.from_ms) if self.from_ms is not None else Start.beginning()

    def takes(self, timestamp: int) -> bool:
        # Log timestamps are not monotonic (producers stamp them): filter every record.
        return ((self.from_ms is None or timestamp >= self.from_ms)
                and (self.to_ms is None or timestamp < self.to_ms))


@dataclass
class ExportResult:
    path: Path
    events: int = 0
    frames: int = 0
    runs: set[str] = field(default_factory=set)
    skipped: list[Unreadable] = field(default_factory=list)


@dataclass
class ImportResult:
    path: Path
    events: int = 0
    frames: int = 0
    events_topic: str = ""
    frames_topic: str = ""


async def _copy(settings: PipelineSettings, topic: str, sel: Selection, out: ArchiveWriter,
                result: ExportResult, progress: Progress) -> int:
    key = None if sel.run_id is None else run_key_bytes(sel.run_id)
    full = topic_name(settings, topic)
    expected = EVENT if topic == "events" else FRAME
    written = 0
    async for rec in read_snapshot(settings, topic, start=sel.start(), key=key):
        if rec.value is None or not sel.takes(rec.timestamp):
            continue
        try:
            name, record = record_of(rec.value)
        except SchemaError as exc:
            result.skipped.append(Unreadable(full, rec.partition, rec.offset, str(exc)))
            continue
        if name != expected:
            result.skipped.append(Unreadable(full, rec.partition, rec.offset,
                                             f"a {name}, not a {expected}"))
            continue
        if name == EVENT:
            result.runs.add(record["run_id"])
        out.write(name, record)
        written += 1
        if written % 10_000 == 0:
            progress(f"{full}: {written:,} records")
    return written


async def export_archive(settings: PipelineSettings, path: str | Path, sel: Selection, *,
                         with_frames: bool = False, progress: Progress = _quiet) -> ExportResult:
    """Write the selected events (and frames) to ``path``. Nothing is written when the selection
    is empty (NoSuchRun, EmptyRange)."""
    path = Path(path)
    result = ExportResult(path)
    metadata = {**sel.as_metadata(), "events_topic": settings.topic("events"),
                "frames_topic": settings.topic("frames") if with_frames else None}
    with ArchiveWriter(path, with_frames=with_frames, selection=metadata) as out:
        result.events = await _copy(settings, "events", sel, out, result, progress)
        if with_frames:
            result.frames = await _copy(settings, "frames", sel, out, result, progress)
        if result.events == 0 and result.frames == 0:
            # Raising inside the writer's block discards the temporary file.
            if sel.run_id is not None and sel.from_ms is None and sel.to_ms is None:
                raise NoSuchRun(f"no run {sel.run_id}: no events on {settings.topic('events')}"
                                + (f" and no frames on {settings.topic('frames')}"
                                   if with_frames else "")
                                + f"; check the run id and the topic prefix "
                                  f"({settings.topic_prefix!r})")
            raise EmptyRange(f"nothing to export: no records on {settings.topic('events')}"
                             + (f" or {settings.topic('frames')}" if with_frames else "")
                             + f" for {sel.describe()}")
    progress(f"wrote {result.events:,} events"
             + (f" and {result.frames:,} frames" if with_frames else "")
             + f" of {len(result.runs):,} run{'' if len(result.runs) == 1 else 's'} to {path}")
    return result


def _checked(path: Path, budget: int) -> tuple[int, int, list[tuple[str, str, bytes]] | None]:
    """Read the whole archive once before anything is produced: a damaged file or an invalid
    record fails here, not halfway through an import. Returns (events, frames, the records as
    (name, key, value) when their values fit in ``budget`` bytes, else None: read again)."""
    counts = {EVENT: 0, FRAME: 0}
    kept: list[tuple[str, str, bytes]] | None = []
    size = 0
    for position, (name, record) in enumerate(read_archive(path), 1):
        try:
            value = value_of(name, record)
        except SchemaError as exc:
            raise ArchiveError(f"{path}: record {position} is not a valid "
                               f"{name.rsplit('.', 1)[-1]}: {exc}") from exc
        counts[name] += 1
        if kept is not None:
            size += len(value)
            kept = kept if size <= budget else None
            if kept is not None:
                kept.append((name, key_of(name, record), value))
    return counts[EVENT], counts[FRAME], kept


def _records(path: Path, kept: list[tuple[str, str, bytes]] | None):
    if kept is not None:
        yield from kept
        return
    for name, record in read_archive(path):
        yield name, key_of(name, record), value_of(name, record)


async def _require_topics(producer: Any, settings: PipelineSettings, names: list[str]) -> None:
    # A send to a missing topic would wait out the request timeout (40 s) before failing.
    cluster = await producer.client.fetch_all_metadata()
    missing = [name for name in names if name not in cluster.topics()]
    if missing:
        raise ConfigError(f"topic {', '.join(missing)} does not exist on "
                          f"{settings.bootstrap_servers} (broker auto-create is off); create the "
                          f"topics with `modelevents topics create --prefix "
                          f"{settings.topic_prefix}`")


async def import_archive(settings: PipelineSettings, path: str | Path, *, topic: str = "events",
                         frames_topic: str = "frames", with_frames: bool = True,
                         progress: Progress = _quiet,
                         memory_budget: int = IMPORT_MEMORY_BUDGET) -> ImportResult:
    """Produce the records of an archive: events on ``topic``, frames on ``frames_topic``
    (unless ``with_frames`` is False). Same keys, same value bytes, file order.

    The file is checked whole first; its values are kept from that pass up to
    ``memory_budget`` bytes, a bigger archive is read a second time to produce it."""
    path = Path(path)
    read_header(path)  # not an archive: ArchiveError before any broker is contacted
    events, frames, kept = _checked(path, memory_budget)
    if events == 0 and frames == 0:
        raise EmptyRange(f"{path} holds no records: nothing to import")
    result = ImportResult(path, events_topic=topic_name(settings, topic),
                          frames_topic=topic_name(settings, frames_topic))
    total = events + (frames if with_frames else 0)
    producer = await start_producer(settings)
    try:
        await _require_topics(producer, settings, [result.events_topic]
                              + ([result.frames_topic] if with_frames and frames else []))
        pending: list[asyncio.Future] = []
        for name, key, value in _records(path, kept):
            if name == FRAME and not with_frames:
                continue
            target = result.events_topic if name == EVENT else result.frames_topic
            try:
                pending.append(await producer.send(target, key=run_key_bytes(key), value=value))
            except UnknownTopicOrPartitionError as exc:
                raise ConfigError(f"topic {target} does not exist on {settings.bootstrap_servers}; "
                                  f"create it with `modelevents topics create --prefix "
                                  f"{settings.topic_prefix}`") from exc
            except KafkaConnectionError as exc:
                raise KafkaUnavailable(settings.bootstrap_servers, str(exc)) from exc
            if name == EVENT:
                result.events += 1
            else:
                result.frames += 1
            if len(pending) >= _ACK_CHUNK:
                await await_acks(settings, pending)
                pending = []
                progress(f"imported {result.events + result.frames:,} of {total:,} records")
        await await_acks(settings, pending)
    finally:
        await producer.stop()
    progress(f"imported {result.events:,} events to {result.events_topic}"
             + (f" and {result.frames:,} frames to {result.frames_topic}" if result.frames else ""))
    return result
