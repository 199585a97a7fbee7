"""The audit archive's anchors tried as an attacker would who can rewrite the archive and write
to the ``audit-heads`` topic but does not hold the operator's signing key: a head for the
rewritten archive published beside the genuine one — signed with another key, or unsigned —
fails `audit verify --heads` even without ``--public-key``; with the operator's key given, the
genuine head is the one compared. A head the operator's key signed for another archive, published
under this one's id, fails too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from modelevents.consumers.audit import export
from modelevents.consumers.audit.heads import HEADS_TOPIC, DigestWriter
from modelevents.consumers.audit.signing import canonical, load_signing_key
from modelevents.consumers.audit.writer import read_checkpoints
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from tests.integration.audit.test_anchor import findings, keygen, verify, write_copy
from tests.integration.audit.test_archive import audit_run, frames_of
from tests.integration.pipeline import ONE_PER_API, collect, feed, run

pytestmark = pytest.mark.kafka


def _publish_forged_head(settings: PipelineSettings, archive: Path, archive_id: str,
                         key: Ed25519PrivateKey | None, named: str | None = None) -> None:
    """The head of ``archive`` as the project's writer makes one — naming archive ``named``
    (default ``archive_id``), signed with ``key`` — on the topic under ``archive_id``."""
    checkpoints, _ = read_checkpoints(archive)
    signed = DigestWriter(archive / "forged-digests", named or archive_id,
                          key).write(checkpoints[-1])

    async def publish() -> None:
        producer = await clients.start_producer(settings)
        try:
            await producer.send_and_wait(clients.topic_name(settings, HEADS_TOPIC),
                                         key=clients.run_key_bytes(archive_id),
                                         value=canonical(signed))
        finally:
            await producer.stop()
    run(publish())


@pytest.mark.parametrize("forger", ["another key", "no key", "another archive"])
def test_a_head_published_for_a_rewritten_archive_by_someone_else_fails_verify(
        forger, settings, start_worker, tmp_path: Path) -> None:
    start_worker()
    key, attacker = tmp_path / "audit.key", tmp_path / "attacker.key"
    keygen(key)
    keygen(attacker)
    frames, counts = frames_of(ONE_PER_API[:3], first_copy=0)
    run(feed(settings, frames))
    run(collect(settings, lambda p: all(p.complete(r, n) for r, n in counts.items())))
    out = tmp_path / "archive"
    audit_run(settings, out, "--signing-key", str(key), frames=False)
    code, report = verify(settings, out, "--heads")
    assert code == 0, report["problems"]

    # The rewrite: one run deleted, offsets renumbered so that no hole shows.
    deleted = sorted(counts)[0].encode()
    next_offset: dict[tuple[str, int], int] = {}
    kept = []
    for r in export.archived_records(out):
        if r.key == deleted:
            continue
        offset = next_offset.setdefault((r.topic, r.partition), r.offset)
        next_offset[(r.topic, r.partition)] = offset + 1
        kept.append((r.topic, r.partition, offset, r.timestamp, r.key, r.value))
    doctored = tmp_path / "doctored"
    write_copy(out, doctored, kept)
    archive_id = json.loads((out / "archive.json").read_text())["archive_id"]
    if forger == "another archive":
        # A head signed by the operator's own key, but made for another archive's id (one the
        # key signs too), published under this one's.
        _publish_forged_head(settings, doctored, archive_id, load_signing_key(key),
                             named="f" * 32)
        expected = "another archive's head"
    else:
        _publish_forged_head(settings, doctored, archive_id,
                             load_signing_key(attacker) if forger == "another key" else None)
        expected = "different keys"

    code, report = verify(settings, doctored, "--heads")
    assert code == 1, report["problems"]
    assert any(expected in f for f in findings(report, "anchor")), report["problems"]
    code, report = verify(settings, doctored, "--heads", "--public-key", f"{key}.pub")
    assert code == 1
    assert any(word in f for f in findings(report, "anchor")
               for word in ("rewritten", "cut short", "another archive's head"))
