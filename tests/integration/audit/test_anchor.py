"""The audit archive's head anchored outside it, on the real broker with the real worker: runs
archived by `modelevents audit run --signing-key` (a subprocess, as users run it) verify
against the audit-heads topic, the head hash and a copy of the digests; the same archive
rewritten with the project's own AuditWriter (a run deleted, another cut short, offsets
renumbered so that no hole shows) passes verify alone and fails every anchor; a head checked
against another key fails; a record removed from the middle is an offset hole; a deleted digest
breaks the digest chain."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from modelevents.consumers.audit import export
from modelevents.consumers.audit.heads import DIGESTS, digest_files
from modelevents.consumers.audit.writer import AuditWriter
from modelevents.services.kafka.settings import PipelineSettings
from tests.integration.audit.test_archive import audit_run, cli, frames_of, topic_records
from tests.integration.pipeline import HANG_GUARD_S, ONE_PER_API, collect, feed, run

pytestmark = pytest.mark.kafka

ROUNDS = 3  # one `audit run` per round: a checkpoint and its digest each


def keygen(path: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "modelevents.services.cli", "audit", "keygen",
                           "--out", str(path)], capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr
    return done.stdout


def verify(settings: PipelineSettings, out: Path, *extra: str) -> tuple[int, dict]:
    done = subprocess.run(cli(settings, "audit", "verify", str(out), "--json", *extra),
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def findings(report: dict, check: str) -> list[str]:
    return [f"{p['where']}: {p['message']}" for p in report["problems"] if p["check"] == check]


def write_copy(original: Path, into: Path, records) -> None:
    """What an attacker with the archive's directory can do: the project's own writer writes
    ``records`` (topic, partition, offset, timestamp, key, value) under the original's
    archive.json."""
    info = json.loads((original / "archive.json").read_text())
    source = {k: info[k] for k in ("events_topic", "frames_topic", "inputs_topic",
                                   "receipts_topic", "group")}
    writer = AuditWriter(into, source=source)
    for record in records:
        writer.add(*record)
    writer.close()
    shutil.copy(original / "archive.json", into / "archive.json")


def test_a_rewritten_archive_fails_its_anchors(settings, start_worker, tmp_path: Path) -> None:
    start_worker()
    key, other = tmp_path / "audit.key", tmp_path / "other.key"
    assert "key id" in keygen(key) and "key id" in keygen(other)
    out = tmp_path / "archive"
    runs: dict[str, int] = {}
    for round_ in range(ROUNDS):
        frames, counts = frames_of(ONE_PER_API[:3], first_copy=round_)
        run(feed(settings, frames))
        run(collect(settings, lambda p, c=counts: all(p.complete(r, n) for r, n in c.items())))
        done = audit_run(settings, out, "--signing-key", str(key), frames=False)
        assert "NOT signed" not in done.stderr and "signing heads with key id" in done.stderr
        runs.update(counts)
    assert len(digest_files(out / DIGESTS)) >= ROUNDS
    public = f"{key}.pub"

    # Untouched: every anchor holds.
    code, report = verify(settings, out, "--heads", "--public-key", public)
    assert code == 0 and report["summary"]["anchored"] is True, report["problems"]
    head = report["summary"]["head"]
    kept = tmp_path / "digests-kept-elsewhere"
    shutil.copytree(out / DIGESTS, kept)
    code, report = verify(settings, out, "--expect-head", head, "--digests", str(kept),
                          "--public-key", public)
    assert code == 0, report["problems"]

    # A head checked against another key fails, and says so.
    code, report = verify(settings, out, "--heads", "--public-key", f"{other}.pub")
    assert code == 1 and findings(report, "anchor")
    assert all("signed by another key" in f for f in findings(report, "anchor"))

    # The rewrite: one run deleted, another cut short, offsets renumbered (no hole shows).
    records = list(export.archived_records(out))
    deleted, shortened = sorted(runs)[0].encode(), sorted(runs)[1].encode()
    events_topic = settings.topic("events")
    last_two = [r for r in records if r.topic == events_topic and r.key == shortened][-2:]
    next_offset: dict[tuple[str, int], int] = {}
    doctored_records = []
    for r in records:
        if r.key == deleted or any(r is gone for gone in last_two):
            continue
        offset = next_offset.setdefault((r.topic, r.partition), r.offset)
        next_offset[(r.topic, r.partition)] = offset + 1
        doctored_records.append((r.topic, r.partition, offset, r.timestamp, r.key, r.value))
    doctored = tmp_path / "doctored"
    write_copy(out, doctored, doctored_records)
    code, report = verify(settings, doctored)
    assert code == 0, report["problems"]  # alone, the rewritten archive is consistent
    assert report["summary"]["runs"] == len(runs) - 1

    code, report = verify(settings, doctored, "--heads", "--public-key", public)
    assert code == 1 and report["summary"]["anchored"] is False
    found = findings(report, "anchor")
    assert len(found) == 1 and ("rewritten" in found[0] or "cut short" in found[0]), found
    code, report = verify(settings, doctored, "--expect-head", head)
    assert code == 1
    assert "no chain block of this archive has this hash" in findings(report, "anchor")[0]
    code, report = verify(settings, doctored, "--digests", str(kept), "--public-key", public)
    assert code == 1 and findings(report, "digests")

    # A record removed from the middle, offsets left as they were: a hole, without an anchor.
    partition_records = [r for r in records if r.topic == events_topic and r.partition == 0]
    gone = partition_records[len(partition_records) // 2]
    holed = tmp_path / "holed"
    write_copy(out, holed, [(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value)
                            for r in records if r is not gone])
    code, report = verify(settings, holed)
    assert code == 1
    assert [f.split(":")[0:2] for f in findings(report, "offsets")] == [[events_topic, "0"]]
    assert f"offsets {gone.offset} missing" in findings(report, "offsets")[0]

    # A digest deleted from the copy kept elsewhere breaks the digest chain.
    files = digest_files(kept)
    files[1].unlink()
    code, report = verify(settings, out, "--digests", str(kept), "--public-key", public)
    assert code == 1
    assert any("was deleted" in f for f in findings(report, "digests")), report["problems"]


def test_without_a_key_the_run_says_once_that_heads_are_unsigned(settings, start_worker,
                                                                  tmp_path: Path) -> None:
    start_worker()
    frames, counts = frames_of(ONE_PER_API[:1])
    run(feed(settings, frames))
    run(collect(settings, lambda p: all(p.complete(r, n) for r, n in counts.items())))
    out = tmp_path / "archive"
    done = audit_run(settings, out, frames=False)
    assert done.stderr.count("heads are NOT signed") == 1, done.stderr
    # Published all the same: the topic anchors the hash; a key the operator trusts is refused.
    code, report = verify(settings, out, "--heads")
    assert code == 0, report["problems"]
    assert any(n["check"] == "anchor" and "--public-key" in n["message"]
               for n in report["notes"])
    keygen(tmp_path / "k")
    code, report = verify(settings, out, "--heads", "--public-key", str(tmp_path / "k.pub"))
    assert code == 1 and "not signed" in findings(report, "anchor")[0]


def test_a_checkpoint_left_unpublished_is_published_when_the_writer_starts(
        settings, start_worker, tmp_path: Path) -> None:
    start_worker()
    frames, counts = frames_of(ONE_PER_API[:1], first_copy=7)
    run(feed(settings, frames))
    run(collect(settings, lambda p: all(p.complete(r, n) for r, n in counts.items())))
    # Archived and checkpointed, then a crash before the head left the archive (or an archive
    # made before heads were anchored): no digest, nothing on the topic.
    out = tmp_path / "archive"
    source = {"events_topic": settings.topic("events"), "frames_topic": None,
              "inputs_topic": settings.topic("run-inputs"),
              "receipts_topic": settings.topic("receipts"), "group": f"{settings.app_id}-audit"}
    writer = AuditWriter(out, source=source)
    for partition, offset, value in run(topic_records(settings, "events")):
        writer.add(settings.topic("events"), partition, offset, 0, None, value)
    writer.close()
    key = tmp_path / "audit.key"
    keygen(key)
    code, report = verify(settings, out, "--heads", "--public-key", f"{key}.pub")
    assert code == 1 and "no head of archive" in findings(report, "anchor")[0]
    done = audit_run(settings, out, "--signing-key", str(key), frames=False)
    assert "0 records archived" in done.stderr, done.stderr
    assert len(digest_files(out / DIGESTS)) == 1
    code, report = verify(settings, out, "--heads", "--digests", str(out / DIGESTS),
                          "--public-key", f"{key}.pub")
    assert code == 0 and report["summary"]["anchored"] is True, report["problems"]
