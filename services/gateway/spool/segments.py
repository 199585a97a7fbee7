"""The journal's files: an append-only log of records in numbered segment files, each record
checked by its own CRC-32, read and dropped from the front (a FIFO on disk).

    journal = SegmentLog.open(directory, max_bytes)   # locks the directory; repairs a torn tail
    taken = journal.append([payload, ...])             # how many fit (a prefix), on disk (fsync)
    batch = journal.peek(max_records, max_bytes)       # the oldest records, not removed yet
    journal.ack(batch.end)                              # removed: whole segments deleted
    journal.close()

A segment ``<number>.seg`` is ``MAGIC`` then records ``length (u32 LE) | crc32 (u32 LE) |
payload``. ``cursor`` holds where the records not yet acknowledged begin (segment, offset),
replaced atomically at each ack; losing it only means records are sent again (at-least-once).

Why this shape and not SQLite: the journal is written and read strictly in order and never
updated in place, which is what an append-only log is (Kafka's own log, Prometheus' WAL); a
drained segment is one unlink and its space is back at once (SQLite keeps freed pages until a
VACUUM); a record torn by a crash or a power loss is found by its length and checksum and cut
off, the records before it kept, where a damaged SQLite file can fail as a whole; and it needs
no dependency. Appends are fsynced: a record appended is on disk when ``append`` returns, so a
killed process or host loses none. The directory is locked (``flock``) while open: two gateways
sharing one would send each other's frames.

Not thread-safe: one caller at a time (the journal's writer, through a thread of its own).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

from modelevents.schemas.errors import ConfigError

__all__ = ["MAGIC", "Batch", "Position", "SegmentLog", "segment_bytes_for"]

log = logging.getLogger("modelevents.gateway.journal")

MAGIC = b"MEJ1"
_HEADER = struct.Struct("<II")
# A length above this is not a record (a torn or damaged header): nothing after it in the
# segment can be found again.
_MAX_RECORD = 256 * 1024 * 1024
_SUFFIX = ".seg"


def segment_bytes_for(max_bytes: int) -> int:
    """The size at which a segment is closed and a new one begun: an eighth of the journal (a
    drained segment frees its space at once), between 4 KiB and 64 MiB."""
    return max(4096, min(64 * 1024 * 1024, max_bytes // 8))


@dataclass(frozen=True, slots=True)
class Position:
    """Where the records not yet acknowledged begin: a segment, an offset in it, and how many
    records of that segment lie before the offset."""

    segment: int
    offset: int
    records_before: int


@dataclass(frozen=True, slots=True)
class Batch:
    payloads: list[bytes]
    end: Position  # ack(end) removes them


@dataclass(slots=True)
class _Segment:
    number: int
    path: Path
    size: int  # the end of its last whole record
    records: int
    rewritten: bool = False  # a damaged record was taken out when it was opened


class SegmentLog:
    """The journal of one directory (see the module docstring)."""

    def __init__(self, directory: Path, max_bytes: int, lock_fd: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        self.segment_bytes = segment_bytes_for(max_bytes)
        self._lock_fd = lock_fd
        self._segments: list[_Segment] = []
        self._cursor = Position(0, len(MAGIC), 0)
        self._append_fd: int | None = None
        self._next_number = 0  # never reused while the process runs

    # --- opening --------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path, max_bytes: int) -> SegmentLog:
        """The journal in ``directory`` (created if missing), locked for this process, its
        segments checked: a torn last record is cut off, a damaged one skipped, each logged."""
        directory.mkdir(parents=True, exist_ok=True)
        lock_fd = os.open(directory / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_fd)
            raise ConfigError(
                f"the frame journal {directory} is in use by another process; give each "
                "gateway its own instance_id (or gateway.journal.directory)") from None
        journal = cls(directory, max_bytes, lock_fd)
        try:
            journal._load()
        except BaseException:
            journal.close()
            raise
        return journal

    def _load(self) -> None:
        numbers = sorted(int(path.stem) for path in self.directory.glob(f"*{_SUFFIX}")
                         if path.stem.isdigit())
        cursor = self._read_cursor()
        self._next_number = max([*numbers, cursor.segment if cursor else -1], default=-1) + 1
        for number in numbers:
            path = self._path(number)
            if cursor is not None and number < cursor.segment:
                path.unlink()  # acknowledged; the crash came before its deletion
                continue
            segment = _repair(path, number)
            if segment is not None:
                self._segments.append(segment)
        if self._segments:
            first = self._segments[0]
            self._cursor = Position(first.number, len(MAGIC), 0)
            if cursor is not None and cursor.segment == first.number and \
                    cursor.offset <= first.size and not first.rewritten:
                # Counted again, not trusted: a cut-off tail may have moved its end.
                before = _records_before(first.path, cursor.offset)
                if before is not None:
                    self._cursor = Position(first.number, cursor.offset, before)

    def _read_cursor(self) -> Position | None:
        try:
            segment, offset, before = (self.directory / "cursor").read_text().split()
            return Position(int(segment), int(offset), int(before))
        except (OSError, ValueError):
            return None  # none yet, or unreadable: every record held is sent (again)

    # --- what the writer uses -------------------------------------------------------------------

    @property
    def cursor(self) -> Position:
        """Where the records not yet acknowledged begin."""
        return self._cursor

    @property
    def records(self) -> int:
        """Records held: appended, not yet acknowledged."""
        return sum(s.records for s in self._segments) - (
            self._cursor.records_before if self._segments else 0)

    @property
    def size(self) -> int:
        """Their bytes on disk (headers included): what ``max_bytes`` bounds."""
        return sum(s.size - len(MAGIC) for s in self._segments) - (
            self._cursor.offset - len(MAGIC) if self._segments else 0)

    def append(self, payloads: list[bytes]) -> int:
        """Append the first of ``payloads`` that fit within ``max_bytes``, in order, and fsync
        them; how many were appended (the rest did not fit: the caller's policy)."""
        room = self.max_bytes - self.size
        taken = 0
        segment: _Segment | None = None
        chunk = bytearray()
        count = 0
        for payload in payloads:
            size = _HEADER.size + len(payload)
            if size > room:
                break
            room -= size
            segment = segment or self._head()
            chunk += _HEADER.pack(len(payload), zlib.crc32(payload))
            chunk += payload
            count += 1
            if segment.size + len(chunk) >= self.segment_bytes:
                self._write(segment, chunk, count)  # full: the next record begins a new one
                segment, chunk, count = None, bytearray(), 0
            taken += 1
        if segment is not None and chunk:
            self._write(segment, chunk, count)
        return taken

    def _write(self, segment: _Segment, chunk: bytearray, count: int) -> None:
        fd = self._append_fd
        assert fd is not None
        written = 0
        while written < len(chunk):
            written += os.write(fd, memoryview(chunk)[written:])
        os.fsync(fd)
        segment.size += len(chunk)
        segment.records += count

    def peek(self, max_records: int, max_bytes: int) -> Batch:
        """The oldest records not yet acknowledged, at most ``max_records`` and about
        ``max_bytes`` (at least one), from the first segment that holds any."""
        while len(self._segments) > 1 and self._cursor.offset >= self._segments[0].size:
            self._drop_first()  # acknowledged to its end; the crash came before its deletion
        if not self._segments:
            return Batch([], self._cursor)
        segment = self._segments[0]
        start = self._cursor.offset
        payloads: list[bytes] = []
        consumed = 0
        with segment.path.open("rb") as file:
            file.seek(start)
            data = file.read(min(segment.size - start, max(max_bytes, _HEADER.size)))
            offset = 0
            while consumed < max_records and offset + _HEADER.size <= len(data):
                length, crc = _HEADER.unpack_from(data, offset)
                end = offset + _HEADER.size + length
                if end <= len(data):
                    payload = data[offset + _HEADER.size:end]
                elif consumed == 0:  # one record larger than max_bytes: read it whole
                    file.seek(start + offset + _HEADER.size)
                    payload = file.read(length)
                else:
                    break
                consumed += 1
                if zlib.crc32(payload) != crc:
                    # Checked when the journal was opened: only the disk can have changed it.
                    log.error("frame journal %s: the record at offset %d fails its checksum "
                              "(the disk changed it); skipped", segment.path, start + offset)
                else:
                    payloads.append(payload)
                offset = end
        return Batch(payloads, Position(segment.number, start + offset,
                                        self._cursor.records_before + consumed))

    def ack(self, end: Position) -> None:
        """The records before ``end`` (a batch's) were written to Kafka: forget them. A segment
        wholly acknowledged is deleted; all of them once the journal is empty."""
        self._cursor = end
        while self._segments and (
                self._segments[0].number < end.segment
                or (self._segments[0].number == end.segment
                    and end.offset >= self._segments[0].size
                    and self._segments[0] is not self._segments[-1])):
            self._drop_first()
        if self.records == 0:
            self._clear()
            return
        cursor = self.directory / "cursor"
        temporary = cursor.with_suffix(".tmp")
        at = self._cursor
        temporary.write_text(f"{at.segment} {at.offset} {at.records_before}\n")
        os.replace(temporary, cursor)

    def close(self) -> None:
        if self._append_fd is not None:
            os.close(self._append_fd)
            self._append_fd = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # the lock goes with it
            self._lock_fd = -1

    # --- segments -------------------------------------------------------------------------------

    def _path(self, number: int) -> Path:
        return self.directory / f"{number:012d}{_SUFFIX}"

    def _head(self) -> _Segment:
        """The segment appends go to, a new one when there is none yet or it is full."""
        head = self._segments[-1] if self._segments else None
        if head is not None and self._append_fd is not None and head.size < self.segment_bytes:
            return head
        if self._append_fd is not None:
            os.close(self._append_fd)
            self._append_fd = None
        number = self._next_number
        self._next_number += 1
        path = self._path(number)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
        os.write(fd, MAGIC)
        os.fsync(fd)
        _fsync_directory(self.directory)
        self._append_fd = fd
        segment = _Segment(number, path, len(MAGIC), 0)
        self._segments.append(segment)
        if head is None:
            self._cursor = Position(number, len(MAGIC), 0)
        return segment

    def _drop_first(self) -> None:
        first = self._segments.pop(0)
        if not self._segments and self._append_fd is not None:
            os.close(self._append_fd)
            self._append_fd = None
        first.path.unlink(missing_ok=True)
        if self._segments:
            self._cursor = Position(self._segments[0].number, len(MAGIC), 0)

    def _clear(self) -> None:
        # The cursor first: a cursor left beside later segments would have them skipped.
        (self.directory / "cursor").unlink(missing_ok=True)
        while self._segments:
            self._drop_first()


def _records_before(path: Path, offset: int) -> int | None:
    """How many whole records of the segment at ``path`` lie before ``offset``; None when
    ``offset`` is not where a record begins."""
    count = 0
    position = len(MAGIC)
    with path.open("rb") as file:
        while position < offset:
            file.seek(position)
            header = file.read(_HEADER.size)
            if len(header) < _HEADER.size:
                return None
            position += _HEADER.size + _HEADER.unpack(header)[0]
            count += 1
    return count if position == offset else None


def _repair(path: Path, number: int) -> _Segment | None:
    """The segment at ``path`` after a crash: its whole records kept, a torn last record cut
    off, a record failing its checksum in the middle dropped (the file rewritten without it),
    each logged; None when the file is not a segment at all (kept aside, renamed ``.bad``)."""
    data = path.read_bytes()
    if data[:len(MAGIC)] != MAGIC:
        if MAGIC.startswith(data):
            path.unlink()  # created, its header not (all) written: nothing was in it
            return None
        log.error("frame journal: %s is not a journal segment; kept aside as %s.bad",
                  path, path.name)
        path.rename(path.with_suffix(".bad"))
        return None
    kept: list[tuple[int, int]] = []  # (start, end) of each whole record
    offset = len(MAGIC)
    damaged = 0
    while offset + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, offset)
        end = offset + _HEADER.size + length
        if length > _MAX_RECORD or end > len(data):
            break
        if zlib.crc32(data[offset + _HEADER.size:end]) == crc:
            kept.append((offset, end))
        elif end == len(data):
            break  # the last record, torn
        else:
            damaged += 1
            log.error("frame journal %s: the record at offset %d fails its checksum; skipped "
                      "(%d bytes), the records around it kept", path, offset, length)
        offset = end
    torn = len(data) - offset
    if torn:
        log.warning("frame journal %s: a torn record at offset %d (%d bytes, cut short when "
                    "the gateway stopped) skipped; the %d records before it are kept",
                    path, offset, torn, len(kept))
    if damaged:
        body = b"".join(data[start:end] for start, end in kept)
        temporary = path.with_suffix(".tmp")
        temporary.write_bytes(MAGIC + body)
        with temporary.open("rb+") as file:
            os.fsync(file.fileno())
        os.replace(temporary, path)
        return _Segment(number, path, len(MAGIC) + len(body), len(kept), rewritten=True)
    if torn:
        with path.open("rb+") as file:
            file.truncate(offset)
            os.fsync(file.fileno())
    return _Segment(number, path, offset, len(kept))


def _fsync_directory(directory: Path) -> None:
    # A new file's name is durable once its directory is synced.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
