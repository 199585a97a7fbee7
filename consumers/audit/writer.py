"""``modelevents audit run``: consume ``events``, the runs' input packets (``run-inputs``), the
tool executor's ``receipts`` (unless left out) and optionally ``frames`` into the audit archive.

    writer = AuditWriter(Path("archive"), codec="deflate")   # locks DIR, recovers a crash
    writer.add(topic, partition, offset, timestamp, key, value)
    writer.checkpoint()            # blocks fsynced, manifests fsynced, checkpoint line fsynced
    writer.close()                 # checkpoint, seal every file, release the lock
    await archive_topics(settings, root, group=..., with_frames=True, until_end=True)

Durability, in this order at every checkpoint: each file's new blocks are written and fsynced,
then their manifest lines, then one line in ``checkpoints.jsonl`` naming the chain's last block
and the next offset of every topic-partition; only then are the offsets committed to the
consumer group. On start, anything past the last checkpoint — a block torn by a crash, a block or
a manifest line written after it — is cut off its file and kept under ``quarantine/``, never
kept in the archive; consuming resumes at the checkpoint's offsets (the committed ones, or the
earliest, for partitions it does not name), so no record is lost or archived twice.
"""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import os
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.structs import OffsetAndMetadata
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from modelevents.consumers.audit.format import (
    CODECS,
    CONTAINER_FINGERPRINT,
    DEFAULT_REDACTION,
    FORMAT,
    GENESIS,
    append_line,
    archive_files,
    avro_path,
    block_bytes,
    chain,
    compress,
    container_header,
    encode_record,
    fsync_dir,
    manifest_path,
    partition_dir,
    read_manifest,
    tenant_of_value,
    topic_prefix_bytes,
    write_json_atomic,
)
from modelevents.consumers.audit.heads import (
    HEADS_TOPIC,
    DigestWriter,
    new_archive_id,
    publish_head,
)
from modelevents.consumers.errors import AuditError
from modelevents.schemas.errors import ConfigError, SchemaError
from modelevents.schemas.run_input import decode as decode_run_input
from modelevents.schemas.run_input import is_run_input
from modelevents.schemas.run_input_pieces import decode_piece, is_piece
from modelevents.services.errors import KafkaUnavailable
from modelevents.services.kafka.clients import make_consumer, make_producer, start_client
from modelevents.services.kafka.settings import PipelineSettings

CHECKPOINTS = "checkpoints.jsonl"
BLOCK_RECORDS = 2000
BLOCK_BYTES = 1 << 20
FILE_BYTES = 256 << 20
UNREADABLE_TENANT = "_unreadable"

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def hour_of(timestamp_ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H", time.gmtime(max(timestamp_ms, 0) / 1000))


def read_checkpoints(root: Path) -> tuple[list[dict[str, Any]], bool]:
    """The checkpoint lines of an archive, and whether a torn last line was left out."""
    path = root / CHECKPOINTS
    if not path.exists():
        return [], False
    lines = path.read_bytes().split(b"\n")
    torn = bool(lines[-1])
    out = []
    for line in lines[:-1]:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out, torn


@dataclass
class _OpenFile:
    path: Path
    tenant: str
    hour: str
    fd: int
    manifest_fd: int
    sync: bytes
    size: int
    blocks: int = 0
    records: list[bytes] = field(default_factory=list)
    pending_bytes: int = 0
    spans: dict[str, list[int]] = field(default_factory=dict)  # "topic:p" -> [first, last, count]
    schemas: set[bytes] = field(default_factory=set)
    events: int = 0
    frames: int = 0
    inputs: int = 0
    receipts: int = 0
    # The redaction policies (fingerprint → name) the block's input packets were written under.
    input_policies: dict[str, str] = field(default_factory=dict)


@dataclass
class Recovery:
    rolled_back_blocks: int = 0
    quarantined_bytes: int = 0
    quarantined_files: list[str] = field(default_factory=list)
    sealed: list[str] = field(default_factory=list)


class AuditWriter:
    """Appends records to the archive at ``root``; one writer per directory (a lock says so)."""

    def __init__(self, root: Path, *, codec: str = "deflate", redaction: dict | None = None,
                 source: dict[str, Any] | None = None, block_records: int = BLOCK_RECORDS,
                 block_bytes: int = BLOCK_BYTES, file_bytes: int = FILE_BYTES,
                 progress: Progress = _quiet) -> None:
        if codec not in CODECS:
            raise AuditError(f"codec {codec!r}: choose one of {', '.join(CODECS)}")
        self.root = Path(root)
        self.codec = codec
        self.redaction = redaction or dict(DEFAULT_REDACTION)
        self.block_records = block_records
        self.block_bytes = block_bytes
        self.file_bytes = file_bytes
        self.progress = progress
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock_fd = os.open(self.root / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise AuditError(f"another `modelevents audit run` is writing {self.root} "
                             "(one writer per archive directory)") from None
        try:
            self._describe(source or {})
        except AuditError:
            os.close(self._lock_fd)  # refused: the directory is left as it was, unlocked
            raise
        self.recovery = self._recover()
        checkpoints, _ = read_checkpoints(self.root)
        last = checkpoints[-1] if checkpoints else None
        self.chain_index = last["chain_index"] if last else -1
        self.head = bytes.fromhex(last["hash"]) if last else GENESIS
        self.head_file = last.get("file") if last else None
        self.checkpoint_number = last["checkpoint"] if last else -1
        # topic:partition -> the next offset to archive (what the archive holds, not Kafka).
        self.positions: dict[str, int] = dict(last["offsets"]) if last else {}
        # topic:partition -> the first offset archived and the records archived (what a head
        # names, and where verify looks for offset holes from).
        if last is not None and "records" in last and "started" in last:
            self.started: dict[str, int] = dict(last["started"])
            self.records: dict[str, int] = dict(last["records"])
        else:
            self.started, self.records = tally(self.root, self.chain_index)
        self.last_checkpoint: dict[str, Any] | None = None if last is None else {
            **last, "started": dict(sorted(self.started.items())),
            "records": dict(sorted(self.records.items()))}
        self._pending_positions: dict[str, int] = {}
        self._files: dict[tuple[str, str], _OpenFile] = {}
        self._prefixes: dict[tuple[str, int], bytes] = {}
        self._hours: dict[int, str] = {}
        self._frame_topics = {(source or {}).get("frames_topic")}
        self._input_topics = {(source or {}).get("inputs_topic")}
        self._receipt_topics = {(source or {}).get("receipts_topic")} - {None}
        self.buffered = 0
        self.buffered_bytes = 0
        self.archived = 0
        self._checkpoints_fd = os.open(self.root / CHECKPOINTS,
                                       os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    # --- archive description and recovery ------------------------------------------------------

    def _describe(self, source: dict[str, Any]) -> None:
        path = self.root / "archive.json"
        if path.exists():
            try:
                existing = json.loads(path.read_text())
            except ValueError as exc:
                raise AuditError(f"{path} is not JSON ({exc}); is {self.root} an audit "
                                 "archive?") from exc
            if existing.get("format") != FORMAT:
                raise AuditError(f"{self.root} holds format {existing.get('format')!r}, "
                                 f"not {FORMAT}")
            if existing.get("redaction") != self.redaction:
                raise AuditError(f"{self.root} was written under redaction policy "
                                 f"{existing.get('redaction')}, not {self.redaction}; a policy "
                                 "change starts a new archive directory")
            for key in ("events_topic", "frames_topic", "receipts_topic", "group"):
                if key in source and existing.get(key) != source[key]:
                    raise AuditError(f"{self.root} archives {key} {existing.get(key)!r}, not "
                                     f"{source[key]!r}; use another --out directory"
                                     + (" (or the options it was made with: --with-frames, "
                                        "--no-receipts)" if key != "group" else ""))
            if not existing.get("archive_id"):  # an archive made before heads were anchored
                existing["archive_id"] = new_archive_id()
                write_json_atomic(path, existing)
            self.archive_id: str = existing["archive_id"]
            return
        if any(self.root.glob("tenant=*")):
            raise AuditError(f"{self.root} has archive files but no archive.json")
        self.archive_id = new_archive_id()
        write_json_atomic(path, {"format": FORMAT, "archive_id": self.archive_id,
                                 "created_at": _now(), "codec": self.codec,
                                 "container_schema_fingerprint": CONTAINER_FINGERPRINT,
                                 "redaction": self.redaction, **source})

    def _quarantine(self, path: Path, data: bytes, what: str) -> None:
        qdir = self.root / "quarantine"
        qdir.mkdir(exist_ok=True)
        rel = str(path.relative_to(self.root)).replace("/", "__")
        target = qdir / f"{int(time.time() * 1000)}-{rel}.{what}"
        target.write_bytes(data)
        self.recovery.quarantined_bytes += len(data)

    def _recover(self) -> Recovery:
        self.recovery = Recovery()
        checkpoints, torn = read_checkpoints(self.root)
        if torn:
            raw = (self.root / CHECKPOINTS).read_bytes()
            cut = raw.rfind(b"\n") + 1
            self._quarantine(self.root / CHECKPOINTS, raw[cut:], "torn-line")
            self._truncate(self.root / CHECKPOINTS, cut)
        last_index = checkpoints[-1]["chain_index"] if checkpoints else -1
        avros, manifests = archive_files(self.root)
        with_manifest = {avro_path(m) for m in manifests}
        for avro in avros:
            if avro not in with_manifest:
                # Created, its manifest never written: nothing of it was ever checkpointed.
                self._quarantine(avro, avro.read_bytes(), "unrecorded-file")
                avro.unlink()
                self.recovery.quarantined_files.append(str(avro.relative_to(self.root)))
        for mpath in manifests:
            manifest = read_manifest(mpath)
            avro = avro_path(mpath)
            if not avro.exists() or manifest.header is None:
                continue  # verify reports it; recovery does not invent what is missing
            kept = [b for b in manifest.blocks if b["chain_index"] <= last_index]
            end = (kept[-1]["start"] + kept[-1]["length"]) if kept else manifest.header["data_start"]
            data = avro.read_bytes()
            if (manifest.seal is not None and not manifest.torn_line
                    and len(kept) == len(manifest.blocks) and len(data) == end):
                continue  # closed cleanly and wholly checkpointed
            self.recovery.rolled_back_blocks += len(manifest.blocks) - len(kept)
            if len(data) > end:
                self._quarantine(avro, data[end:], "torn-tail")
                self._truncate(avro, end)
            raw = mpath.read_bytes()
            keep_lines = [line for line in raw.split(b"\n")[:-1]
                          if not _is_block_line_after(line, last_index)
                          and b'"type":"seal"' not in line]
            text = b"".join(line + b"\n" for line in keep_lines)
            if text != raw:
                self._quarantine(mpath, raw, "manifest-before-recovery")
            seal = {"type": "seal", "reason": "recovered", "at": _now(), "blocks": len(kept),
                    "last_hash": kept[-1]["hash"] if kept else None}
            if not kept:
                self._quarantine(avro, data[:end], "empty-file")
                avro.unlink()
                mpath.unlink()
                self.recovery.quarantined_files.append(str(avro.relative_to(self.root)))
                continue
            tmp = mpath.with_name(f".{mpath.name}.tmp")
            tmp.write_bytes(text + json.dumps(seal, sort_keys=True,
                                              separators=(",", ":")).encode() + b"\n")
            fd = os.open(tmp, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
            os.replace(tmp, mpath)
            fsync_dir(mpath.parent)
            self.recovery.sealed.append(str(avro.relative_to(self.root)))
        if self.recovery.sealed or self.recovery.quarantined_bytes:
            self.progress(f"recovered {self.root}: {len(self.recovery.sealed)} file(s) sealed, "
                          f"{self.recovery.rolled_back_blocks} block(s) after the last "
                          f"checkpoint rolled back, {self.recovery.quarantined_bytes:,} bytes "
                          "quarantined")
        return self.recovery

    @staticmethod
    def _truncate(path: Path, size: int) -> None:
        fd = os.open(path, os.O_RDWR)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)

    # --- writing ---------------------------------------------------------------------------------

    def next_offset(self, topic: str, partition: int) -> int | None:
        return self.positions.get(f"{topic}:{partition}")

    def add(self, topic: str, partition: int, offset: int, timestamp: int, key: bytes | None,
            value: bytes | None) -> bool:
        """Buffer one record; False (ignored) when the archive already holds its offset."""
        name = f"{topic}:{partition}"
        done = self._pending_positions.get(name, self.positions.get(name, 0))
        if offset < done:
            return False
        tenant = tenant_of_value(value) or UNREADABLE_TENANT
        hour = self._hours.get(timestamp // 3_600_000)
        if hour is None:
            hour = self._hours[timestamp // 3_600_000] = hour_of(timestamp)
        out = self._files.get((tenant, hour))
        if out is None or out.size + out.pending_bytes > self.file_bytes:
            if out is not None:
                self._write_block(out)
                self._seal(out, "full")
            out = self._files[(tenant, hour)] = self._open(tenant, hour)
        prefix = self._prefixes.get((topic, partition))
        if prefix is None:
            prefix = self._prefixes[(topic, partition)] = topic_prefix_bytes(topic, partition)
        record = encode_record(prefix, offset, timestamp, key, value)
        out.records.append(record)
        out.pending_bytes += len(record)
        span = out.spans.get(name)
        if span is None:
            out.spans[name] = [offset, offset, 1]
        else:
            span[1] = offset
            span[2] += 1
        if value is not None and len(value) >= 10:
            out.schemas.add(value[2:10])
        if topic in self._frame_topics:
            out.frames += 1
        elif topic in self._input_topics:
            out.inputs += 1
            _note_policy(out, value)
        elif topic in self._receipt_topics:
            out.receipts += 1
        else:
            out.events += 1
        self._pending_positions[name] = offset + 1
        self.buffered += 1
        self.buffered_bytes += len(record)
        if len(out.records) >= self.block_records or out.pending_bytes >= self.block_bytes:
            self._write_block(out)
        return True

    def _open(self, tenant: str, hour: str) -> _OpenFile:
        directory = partition_dir(self.root, tenant, hour)
        directory.mkdir(parents=True, exist_ok=True)
        name = f"seg-{self.chain_index + 1:012d}-{secrets.token_hex(3)}.avro"
        path = directory / name
        sync = secrets.token_bytes(16)
        meta = {"format": FORMAT, "tenant": tenant, "hour": hour}
        header = container_header(self.codec, sync, meta)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        os.write(fd, header)
        os.fsync(fd)
        mfd = os.open(manifest_path(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND,
                      0o644)
        append_line(mfd, {
            "type": "header", "format": FORMAT, "file": name, "tenant": tenant, "hour": hour,
            "created_at": _now(), "codec": self.codec, "sync": sync.hex(),
            "data_start": len(header), "header_sha256": hashlib.sha256(header).hexdigest(),
            "container_schema_fingerprint": CONTAINER_FINGERPRINT,
            "redaction": self.redaction})
        fsync_dir(directory)
        fsync_dir(directory.parent)
        return _OpenFile(path, tenant, hour, fd, mfd, sync, len(header))

    def _write_block(self, out: _OpenFile) -> None:
        """Cut the buffered records of ``out`` into one block: written and fsynced, then its
        manifest line (both durable before the checkpoint that names it)."""
        if not out.records:
            return
        data = compress(self.codec, b"".join(out.records))
        block = block_bytes(len(out.records), data, out.sync)
        os.write(out.fd, block)
        os.fsync(out.fd)
        digest = hashlib.sha256(block).hexdigest()
        new_head = chain(self.head, block)
        self.chain_index += 1
        append_line(out.manifest_fd, {
            "type": "block", "block": out.blocks, "chain_index": self.chain_index,
            "start": out.size, "length": len(block), "records": len(out.records),
            "events": out.events, "frames": out.frames, "inputs": out.inputs,
            "receipts": out.receipts,
            "input_redaction": dict(sorted(out.input_policies.items())), "sha256": digest,
            "prev": self.head.hex(), "hash": new_head.hex(),
            "offsets": {k: {"first": v[0], "last": v[1], "count": v[2]}
                        for k, v in sorted(out.spans.items())},
            "value_schemas": sorted(fp.hex() for fp in out.schemas)})
        self.head = new_head
        self.head_file = str(out.path.relative_to(self.root))
        for name, (first, _last, count) in out.spans.items():
            self.records[name] = self.records.get(name, 0) + count
            self.started[name] = min(first, self.started.get(name, first))
        out.size += len(block)
        out.blocks += 1
        self.archived += len(out.records)
        out.records = []
        out.pending_bytes = 0
        out.spans = {}
        out.schemas = set()
        out.events = out.frames = out.inputs = out.receipts = 0
        out.input_policies = {}

    def checkpoint(self) -> dict[str, int] | None:
        """Make everything added durable; returns the offsets now archived (topic:partition →
        next offset) when anything was added since the last checkpoint, else None."""
        if not self._pending_positions:
            return None
        for out in list(self._files.values()):
            self._write_block(out)
        self.positions.update(self._pending_positions)
        self._pending_positions = {}
        self.checkpoint_number += 1
        self.last_checkpoint = {
            "type": "checkpoint", "checkpoint": self.checkpoint_number, "at": _now(),
            "chain_index": self.chain_index, "hash": self.head.hex(), "file": self.head_file,
            "offsets": dict(sorted(self.positions.items())),
            "started": dict(sorted(self.started.items())),
            "records": dict(sorted(self.records.items()))}
        append_line(self._checkpoints_fd, self.last_checkpoint)
        self.buffered = 0
        self.buffered_bytes = 0
        return dict(self.positions)

    def _seal(self, out: _OpenFile, reason: str) -> None:
        append_line(out.manifest_fd, {"type": "seal", "reason": reason, "at": _now(),
                                      "blocks": out.blocks})
        os.close(out.fd)
        os.close(out.manifest_fd)
        self._files = {k: v for k, v in self._files.items() if v is not out}

    def close(self) -> None:
        self.checkpoint()
        for out in list(self._files.values()):
            self._seal(out, "closed")
        os.close(self._checkpoints_fd)
        fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        os.close(self._lock_fd)


def _note_policy(out: _OpenFile, value: bytes | None) -> None:
    """Record the redaction policy of an input packet (or of a piece's) in its block's manifest
    line."""
    if is_piece(value):
        try:
            piece = decode_piece(value)  # type: ignore[arg-type]
        except SchemaError:
            return  # audit verify reports the record
        out.input_policies[piece.redaction_fingerprint] = piece.redaction_name
        return
    if value is None or not is_run_input(value):
        return
    try:
        policy = decode_run_input(value).redaction
    except SchemaError:
        return  # audit verify reports the record
    out.input_policies[policy.fingerprint] = policy.name


def tally(root: Path, last_index: int) -> tuple[dict[str, int], dict[str, int]]:
    """Per topic-partition, the first offset and the records of the blocks up to chain block
    ``last_index``, from the manifests (an archive whose checkpoints do not name them)."""
    started: dict[str, int] = {}
    records: dict[str, int] = {}
    for mpath in archive_files(root)[1]:
        for entry in read_manifest(mpath).blocks:
            if entry.get("chain_index", last_index + 1) > last_index:
                continue
            for name, span in entry.get("offsets", {}).items():
                records[name] = records.get(name, 0) + span["count"]
                started[name] = min(span["first"], started.get(name, span["first"]))
    return started, records


def _is_block_line_after(line: bytes, last_index: int) -> bool:
    if not line.startswith(b'{') or b'"type":"block"' not in line:
        return False
    try:
        return json.loads(line)["chain_index"] > last_index
    except (ValueError, KeyError):
        return True


# --- consuming ---------------------------------------------------------------------------------


@dataclass
class RunResult:
    records: int = 0
    checkpoints: int = 0
    skipped: int = 0  # records the archive already held (a restart re-read them)
    recovery: Recovery | None = None


class _Listener(ConsumerRebalanceListener):
    def __init__(self, run: _ArchiveRun) -> None:
        self.run = run

    async def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        await self.run.checkpoint()

    async def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        for tp in assigned:
            position = self.run.writer.next_offset(tp.topic, tp.partition)
            if position is not None:
                # The archive, not the group, says what is archived (a crash may have come
                # between the checkpoint and the commit).
                self.run.consumer.seek(tp, position)
        self.run.assigned = set(assigned)


class _ArchiveRun:
    def __init__(self, writer: AuditWriter, consumer: Any, progress: Progress,
                 digests: DigestWriter, producer: Any, settings: PipelineSettings) -> None:
        self.writer = writer
        self.consumer = consumer
        self.progress = progress
        self.digests = digests
        self.producer = producer
        self.settings = settings
        self.assigned: set[TopicPartition] = set()
        self.result = RunResult(recovery=writer.recovery)

    async def publish(self) -> None:
        """The last checkpoint's head out of the archive: its digest file, then the heads topic
        (acknowledged by every in-sync replica)."""
        signed = self.digests.write(self.writer.last_checkpoint or {})
        try:
            await publish_head(self.producer, self.settings, signed)
        except KafkaError as exc:
            raise KafkaUnavailable(self.settings.bootstrap_servers,
                                   f"publishing the archive's head on "
                                   f"{self.settings.topic(HEADS_TOPIC)}: {exc}") from exc

    async def checkpoint(self) -> None:
        positions = self.writer.checkpoint()
        if positions is None:
            return
        self.result.checkpoints += 1
        await self.publish()  # before the group moves on
        meta = f"audit {self.writer.chain_index} {self.writer.head.hex()}"
        offsets = {}
        for name, offset in positions.items():
            topic, _, partition = name.rpartition(":")
            tp = TopicPartition(topic, int(partition))
            if tp in self.assigned:
                offsets[tp] = OffsetAndMetadata(offset, meta)
        if offsets:
            await self.consumer.commit(offsets)


async def archive_topics(settings: PipelineSettings, root: Path, *, group: str,
                         with_frames: bool = False, with_receipts: bool = True,
                         codec: str = "deflate",
                         until_end: bool = False, idle_exit: float | None = None,
                         checkpoint_records: int = 20000, checkpoint_seconds: float = 1.0,
                         block_records: int = BLOCK_RECORDS, redaction: dict | None = None,
                         signing_key: Ed25519PrivateKey | None = None,
                         stop: asyncio.Event | None = None,
                         progress: Progress = _quiet) -> RunResult:
    """Consume ``events``, ``run-inputs`` and ``receipts`` (unless ``with_receipts`` is false;
    and ``frames`` with ``with_frames``) with consumer group ``group`` into the archive at
    ``root`` until ``stop`` is set (SIGTERM/SIGINT in the CLI), the topics' ends as of the start
    are archived (``until_end``), or nothing arrived for ``idle_exit`` seconds. Each
    checkpoint's head is signed with ``signing_key`` (unsigned without one), written as a
    digest file under ``root/digests/`` and published on the ``audit-heads`` topic."""
    frames_topic = settings.topic("frames") if with_frames else None
    receipts_topic = settings.topic("receipts") if with_receipts else None
    source = {"events_topic": settings.topic("events"), "frames_topic": frames_topic,
              "inputs_topic": settings.topic("run-inputs"), "receipts_topic": receipts_topic,
              "group": group}
    topics = [t for t in (source["events_topic"], source["inputs_topic"], receipts_topic,
                          frames_topic) if t is not None]
    writer = AuditWriter(root, codec=codec, redaction=redaction, source=source,
                         block_records=block_records, progress=progress)
    if signing_key is None:
        progress("heads are NOT signed (no --signing-key): the digest files and the "
                 f"{settings.topic(HEADS_TOPIC)} topic anchor the archive's head, but nothing "
                 "proves who wrote them")
    consumer = make_consumer(settings, group_id=group, from_beginning=True,
                             max_partition_fetch_bytes=4 << 20, fetch_max_bytes=16 << 20)
    producer = make_producer(settings, linger_ms=0)
    run = _ArchiveRun(writer, consumer, progress,
                      DigestWriter(root, writer.archive_id, signing_key), producer, settings)
    stop = stop or asyncio.Event()
    try:
        await start_client(consumer, settings)
        await start_client(producer, settings)
        if settings.topic(HEADS_TOPIC) not in await consumer.topics():
            raise ConfigError(f"topic {settings.topic(HEADS_TOPIC)} does not exist on "
                              f"{settings.bootstrap_servers}: the archive's heads are published "
                              "there; create it with `modelevents topics create --prefix "
                              f"{settings.topic_prefix}`")
        if run.digests.behind(writer.last_checkpoint):
            await run.publish()  # a crash came between a checkpoint and its head's publication
        consumer.subscribe(topics, listener=_Listener(run))
        ends: dict[TopicPartition, int] | None = None
        last_record = time.monotonic()
        last_checkpoint = time.monotonic()
        while not stop.is_set():
            try:
                batches = await consumer.getmany(timeout_ms=200, max_records=10000)
            except KafkaError as exc:
                raise KafkaUnavailable(settings.bootstrap_servers, str(exc)) from exc
            now = time.monotonic()
            add = writer.add
            for tp, messages in batches.items():
                topic, partition = tp.topic, tp.partition
                for msg in messages:
                    if add(topic, partition, msg.offset, msg.timestamp, msg.key, msg.value):
                        run.result.records += 1
                    else:
                        run.result.skipped += 1
                last_record = now
            if (writer.buffered >= checkpoint_records
                    or (writer.buffered and now - last_checkpoint >= checkpoint_seconds)):
                await run.checkpoint()
                last_checkpoint = now
                progress(f"checkpoint {writer.checkpoint_number}: {writer.archived:,} records "
                         f"archived, chain block {writer.chain_index}")
            if until_end and run.assigned:
                if ends is None:
                    ends = await consumer.end_offsets(list(run.assigned))
                if not writer.buffered and all(
                        (writer.next_offset(tp.topic, tp.partition) or 0) >= end
                        for tp, end in ends.items() if end > 0):
                    break
            if idle_exit is not None and now - last_record >= idle_exit and not writer.buffered:
                break
        await run.checkpoint()
    finally:
        try:
            writer.close()
        finally:
            await consumer.stop()
            await producer.stop()
    return run.result


def install_stop_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
