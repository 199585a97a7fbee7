"""The archive's head, signed at every checkpoint and kept outside the archive (``docs/audit.md``,
"Anchoring"): a digest file per checkpoint under ``DIR/digests/`` (chained: each names the
previous one's SHA-256, as AWS CloudTrail's digest files do) and a record on the compacted
``audit-heads`` topic keyed by the archive's id.

    digests = DigestWriter(root, archive_id, key)     # key None: heads are written unsigned
    signed = digests.write(checkpoint_line)           # the signed head, its digest file fsynced
    await publish_head(producer, settings, signed)    # on audit-heads, acknowledged (acks=all)
    heads = await published_heads(settings, archive_id)   # what the topic holds, in log order
    chain = read_digests(folder)                      # [Digest], in checkpoint order

A head names the archive (``archive_id``), the checkpoint, the chain's last block (``chain_index``,
``hash``), per topic-partition the first offset archived (``started``), the next one
(``offsets``) and the records archived (``records``), the time, and the previous digest's
SHA-256 (``previous_digest``).
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaProducer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from modelevents.consumers.audit.format import fsync_dir, write_bytes_atomic
from modelevents.consumers.audit.signing import canonical, sign
from modelevents.services.kafka.clients import read_records, run_key_bytes
from modelevents.services.kafka.settings import PipelineSettings

HEAD_FORMAT = "modelevents-audit-head/1"
HEADS_TOPIC = "audit-heads"
DIGESTS = "digests"
# What of a checkpoint line a head carries.
HEAD_FIELDS = ("checkpoint", "chain_index", "hash", "offsets", "started", "records", "at")


@dataclass(frozen=True, slots=True)
class Digest:
    path: Path
    sha256: str  # of the file's bytes: what the next digest names as its previous
    signed: dict[str, Any]

    @property
    def head(self) -> dict[str, Any]:
        head = self.signed.get("head")
        return head if isinstance(head, dict) else {}


def digest_files(folder: Path) -> list[Path]:
    """The digest files under ``folder`` (``<hour>/<checkpoint>.json``), in checkpoint order."""
    return sorted(folder.glob("*/*.json"), key=lambda p: (p.name, p.parent.name))


def read_digests(folder: Path) -> tuple[list[Digest], list[str]]:
    """The digests under ``folder`` in checkpoint order, and the files that are not one."""
    out, bad = [], []
    for path in digest_files(folder):
        data = path.read_bytes()
        try:
            signed = orjson.loads(data)
        except orjson.JSONDecodeError:
            bad.append(str(path))
            continue
        if not isinstance(signed, dict) or not isinstance(signed.get("head"), dict):
            bad.append(str(path))
            continue
        out.append(Digest(path, hashlib.sha256(data).hexdigest(), signed))
    out.sort(key=lambda d: (d.head.get("checkpoint", -1), d.path.name))
    return out, bad


class DigestWriter:
    """Signs each checkpoint's head and writes it as the next digest file of ``root``."""

    def __init__(self, root: Path, archive_id: str, key: Ed25519PrivateKey | None) -> None:
        self.folder = Path(root) / DIGESTS
        self.archive_id = archive_id
        self.key = key
        existing = digest_files(self.folder)
        latest = existing[-1].read_bytes() if existing else None
        self.previous = hashlib.sha256(latest).hexdigest() if latest is not None else None
        # The checkpoint the latest digest signed (-1: none), so that one a crash left
        # unsigned is signed when the writer starts again.
        self.signed_to = int(existing[-1].stem) if existing else -1

    def behind(self, checkpoint: dict[str, Any] | None) -> bool:
        """Whether ``checkpoint`` (the archive's last) has no digest yet."""
        return checkpoint is not None and checkpoint["checkpoint"] > self.signed_to

    def write(self, checkpoint: dict[str, Any]) -> dict[str, Any]:
        head = {"format": HEAD_FORMAT, "archive_id": self.archive_id,
                "previous_digest": self.previous,
                **{name: checkpoint.get(name) for name in HEAD_FIELDS}}
        signed = sign(head, self.key)
        data = canonical(signed) + b"\n"
        hour = self.folder / time.strftime("%Y-%m-%dT%H", time.gmtime())
        if not hour.exists():
            hour.mkdir(parents=True)
            fsync_dir(hour.parent)
        write_bytes_atomic(hour / f"{checkpoint['checkpoint']:012d}.json", data)
        self.previous = hashlib.sha256(data).hexdigest()
        self.signed_to = checkpoint["checkpoint"]
        return signed


async def publish_head(producer: AIOKafkaProducer, settings: PipelineSettings,
                       signed: dict[str, Any]) -> None:
    """The signed head on ``audit-heads`` keyed by its archive id; returns once acknowledged."""
    await producer.send_and_wait(settings.topic(HEADS_TOPIC),
                                 key=run_key_bytes(signed["head"]["archive_id"]),
                                 value=canonical(signed))


async def published_heads(settings: PipelineSettings, archive_id: str,
                          timeout: float = 10.0) -> list[dict[str, Any] | None]:
    """Every head of ``archive_id`` the topic still holds, in log order (compaction keeps the
    latest); None for a record that is not a signed head."""
    out: list[dict[str, Any] | None] = []
    async for record in read_records(settings, HEADS_TOPIC, run_id=archive_id, to_end=True,
                                     timeout=timeout):
        if record is None or record.key != run_key_bytes(archive_id):
            continue
        try:
            signed = orjson.loads(record.raw or b"")
        except orjson.JSONDecodeError:
            signed = None
        out.append(signed if isinstance(signed, dict) and isinstance(signed.get("head"), dict)
                   else None)
    return out


def new_archive_id() -> str:
    return os.urandom(16).hex()
