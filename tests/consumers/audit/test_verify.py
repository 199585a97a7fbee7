"""The audit archive without a broker: the writer on the project's own fixtures, every kind of
tampering caught and named by verify, crash recovery, interop with the official avro package
(the exports: test_export.py). The same on the real broker with the real worker:
tests/integration/audit/test_archive.py.
"""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import avro.datafile
import avro.io
import avro.schema
import fastavro
import pytest

from modelevents.adapters.registry import normalize_file
from modelevents.consumers.audit.format import (
    archive_files,
    block_bytes,
    compress,
    encode_record,
    manifest_path,
    read_manifest,
    topic_prefix_bytes,
)
from modelevents.consumers.audit.verify import verify_archive
from modelevents.consumers.audit.writer import AuditWriter
from modelevents.schemas import codec
from modelevents.schemas.events import Envelope
from tests.integration.pipeline import ONE_PER_API, fixture_frames

TS = 1_764_700_000_000  # 2025-12-02T18:26:40Z
SOURCE = {"events_topic": "t.events", "frames_topic": "t.frames", "group": "g"}


def _records(tenants=("default", "acme")):
    """(topic, partition, key, value) of every ONE_PER_API run, each copied under every tenant."""
    out = []
    for tenant in tenants:
        for path in ONE_PER_API:
            run_id, frames = fixture_frames(path, tenant=tenant)
            run_id = f"{tenant}-{run_id}"
            frames = [dataclasses.replace(f, run_key=run_id) for f in frames]
            events = [dataclasses.replace(e, run_id=run_id, tenant=tenant)
                      for e in normalize_file(path).events]
            out += [("t.frames", 0, run_id.encode(), codec.encode(f)) for f in frames]
            out += [("t.events", hash(run_id) % 2, run_id.encode(), codec.encode(e))
                    for e in events]
    return out


def write_archive(root: Path, records=None, *, block_records=7, checkpoint_every=40,
                  source=SOURCE):
    writer = AuditWriter(root, block_records=block_records, source=source)
    offsets: dict[tuple[str, int], int] = {}
    for n, (topic, partition, key, value) in enumerate(records or _records(), 1):
        offset = offsets.get((topic, partition), 0)
        offsets[(topic, partition)] = offset + 1
        writer.add(topic, partition, offset, TS, key, value)
        if n % checkpoint_every == 0:
            writer.checkpoint()
    writer.close()
    return writer


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    root = tmp_path / "archive"
    write_archive(root)
    return root


def problems(root: Path) -> list[str]:
    return [f.line("FAIL") for f in verify_archive(root).problems]


def a_file(root: Path, tenant: str = "acme") -> Path:
    return next(p for p in archive_files(root)[0] if f"tenant={tenant}" in str(p))


def blocks_of(path: Path) -> list[dict]:
    return read_manifest(manifest_path(path)).blocks


def test_archive_verifies(archive: Path) -> None:
    report = verify_archive(archive)
    assert report.ok, problems(archive)
    assert report.files == 2 and report.runs == 12
    assert report.events == sum(len(normalize_file(p).events) for p in ONE_PER_API) * 2
    assert report.frames > 0 and report.blocks > 10
    # The input packet is not built yet: listed for every run, never a failure.
    assert sum(1 for f in report.notes if f.check == "input") == 12
    # Partitioned by tenant and hour (Kafka log time).
    assert {p.parent.relative_to(archive).as_posix() for p in archive_files(archive)[0]} == {
        "tenant=default/hour=2025-12-02T18", "tenant=acme/hour=2025-12-02T18"}
    manifest = read_manifest(manifest_path(a_file(archive)))
    assert manifest.header["redaction"] == {"policy": "none"}
    assert manifest.header["container_schema_fingerprint"]
    assert manifest.blocks[0]["value_schemas"]
    assert manifest.seal["reason"] == "closed"


def test_cli_verify_exit_status_and_json(archive: Path) -> None:
    ok = subprocess.run([sys.executable, "-m", "modelevents.services.cli", "audit", "verify",
                         str(archive), "--json"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(ok.stdout)["summary"]["ok"] is True
    path = a_file(archive)
    data = bytearray(path.read_bytes())
    data[blocks_of(path)[1]["start"] + 8] ^= 0xFF
    path.write_bytes(bytes(data))
    bad = subprocess.run([sys.executable, "-m", "modelevents.services.cli", "audit", "verify",
                          str(archive), "--quiet"], capture_output=True, text=True)
    assert bad.returncode == 1
    rel = path.relative_to(archive).as_posix()
    assert f"FAIL chain     {rel} block 1: modified" in bad.stdout, bad.stdout
    assert bad.stdout.strip().splitlines()[-1].startswith("verify: FAILED")


def test_modified_byte(archive: Path) -> None:
    path = a_file(archive)
    block = blocks_of(path)[3]
    data = bytearray(path.read_bytes())
    data[block["start"] + block["length"] // 2] ^= 0x01
    path.write_bytes(bytes(data))
    found = problems(archive)
    rel = path.relative_to(archive).as_posix()
    assert any(f"{rel} block 3: modified" in line for line in found), found


def test_removed_block(archive: Path) -> None:
    path = a_file(archive)
    block = blocks_of(path)[2]
    data = path.read_bytes()
    path.write_bytes(data[:block["start"]] + data[block["start"] + block["length"]:])
    found = problems(archive)
    rel = path.relative_to(archive).as_posix()
    assert any(f"{rel} block 2: removed" in line for line in found), found
    # Its events are gone: the runs they belonged to are incomplete.
    assert any("runs" in line and "missing" in line for line in found), found


def test_inserted_block(archive: Path) -> None:
    path = a_file(archive)
    manifest = read_manifest(manifest_path(path))
    sync = bytes.fromhex(manifest.header["sync"])
    event = normalize_file(ONE_PER_API[0]).events[0]
    forged = dataclasses.replace(event, run_id="forged", tenant="acme")
    record = encode_record(topic_prefix_bytes("t.events", 0), 10_000, TS, b"forged",
                           codec.encode(forged))
    block = block_bytes(1, compress("deflate", record), sync)  # a valid Avro block
    at = manifest.blocks[4]["start"]
    data = path.read_bytes()
    path.write_bytes(data[:at] + block + data[at:])
    assert sum(1 for _ in fastavro.reader(io.BytesIO(path.read_bytes()))) > 0  # still Avro
    found = problems(archive)
    rel = path.relative_to(archive).as_posix()
    assert any(f"{rel} block 4: inserted" in line for line in found), found


def test_reordered_blocks(archive: Path) -> None:
    path = a_file(archive)
    b1, b2 = blocks_of(path)[1:3]
    data = path.read_bytes()
    one = data[b1["start"]:b1["start"] + b1["length"]]
    two = data[b2["start"]:b2["start"] + b2["length"]]
    path.write_bytes(data[:b1["start"]] + two + one + data[b2["start"] + b2["length"]:])
    found = problems(archive)
    rel = path.relative_to(archive).as_posix()
    assert any(f"{rel} blocks 1, 2: reordered" in line for line in found), found


def test_truncated_file(archive: Path) -> None:
    path = a_file(archive)
    block = blocks_of(path)[5]
    data = path.read_bytes()
    path.write_bytes(data[:block["start"] + 10])
    found = problems(archive)
    rel = path.relative_to(archive).as_posix()
    assert any(f"{rel} block 5: truncated" in line for line in found), found


def test_deleted_manifest(archive: Path) -> None:
    path = a_file(archive)
    manifest_path(path).unlink()
    found = problems(archive)
    rel = path.relative_to(archive).as_posix()
    assert any(f"{rel}: no manifest beside it" in line for line in found), found
    assert any("chain blocks" in line and "missing from every manifest" in line
               for line in found), found


def test_removed_last_file_is_found_by_the_checkpoint(archive: Path) -> None:
    last = max(archive_files(archive)[0],
               key=lambda p: blocks_of(p)[-1]["chain_index"])
    manifest_path(last).unlink()
    last.unlink()
    found = problems(archive)
    assert any("missing from every manifest" in line for line in found), found


def test_torn_block_is_quarantined_on_restart(tmp_path: Path) -> None:
    root = tmp_path / "archive"
    records, counters = [], {}
    for topic, _, key, value in _records(("default",)):
        counters[topic] = counters.get(topic, -1) + 1
        records.append((topic, 0, counters[topic], TS, key, value))
    writer = AuditWriter(root, block_records=5, source=SOURCE)
    for record in records[:30]:
        writer.add(*record)
    writer.checkpoint()
    done = dict(writer.positions)
    # What a SIGKILL leaves: blocks after the checkpoint, one of them torn, a manifest line cut.
    for record in records[30:43]:
        writer.add(*record)
    path = next(iter(writer._files.values())).path
    full = path.read_bytes()
    with open(path, "ab") as fo:
        fo.write(full[-200:-60])  # half a block
    with open(manifest_path(path), "ab") as fo:
        fo.write(b'{"type":"block","block":99,')
    # No close(): the process died. (Release the lock as the kernel would.)
    import fcntl
    import os
    fcntl.flock(writer._lock_fd, fcntl.LOCK_UN)
    os.close(writer._lock_fd)
    assert verify_archive(root).problems  # the torn file does not verify as it is

    again = AuditWriter(root, block_records=5, source=SOURCE)
    assert again.recovery.rolled_back_blocks >= 2
    assert again.recovery.quarantined_bytes > 0
    assert again.positions == done  # resumes after the checkpoint
    for record in records[30:]:
        assert again.add(*record)
    assert not again.add(*records[0])  # already archived
    again.close()
    report = verify_archive(root)
    assert report.ok, problems(root)
    assert report.records == len(records)
    assert list((root / "quarantine").iterdir())
    assert read_manifest(manifest_path(path)).seal["reason"] == "recovered"


def test_second_writer_is_refused(archive: Path) -> None:
    first = AuditWriter(archive, source=SOURCE)
    try:
        with pytest.raises(Exception, match="another `modelevents audit run`"):
            AuditWriter(archive, source=SOURCE)
    finally:
        first.close()


def test_incomplete_runs_and_envelopes(tmp_path: Path) -> None:
    path = ONE_PER_API[0]
    events = normalize_file(path).events
    gap = [e for e in events if e.seq != 3]
    late = [dataclasses.replace(e, run_id="late") for e in events if e.seq >= 2]
    bare = [dataclasses.replace(e, run_id="bare",
                                envelope=Envelope(e.envelope.content_type, b""))
            if e.seq == 1 else dataclasses.replace(e, run_id="bare") for e in events]
    records = [("t.events", 0, e.run_id.encode(), codec.encode(e)) for e in gap + late + bare]
    root = tmp_path / "archive"
    write_archive(root, records, source={**SOURCE, "frames_topic": None})  # events only
    found = problems(root)
    run_id = events[0].run_id
    assert any(f"run {run_id}: incomplete: seq 3 missing" in line for line in found), found
    assert any("run late: incomplete: seq 0..1 missing" in line for line in found), found
    assert any("envelopes run bare seq 1: " in line for line in found), found
    assert len(found) == 3, found


def test_frame_missing(tmp_path: Path) -> None:
    records = _records(("default",))
    event = codec.decode(next(r[3] for r in records if r[0] == "t.events"))
    frame_index = next(i for i, r in enumerate(records) if r[0] == "t.frames"
                       and codec.decode(r[3]).frame_id == event.source.frame_id
                       and codec.decode(r[3]).run_key == event.run_id)
    del records[frame_index]
    root = tmp_path / "archive"
    write_archive(root, records)
    found = problems(root)
    assert found and all(f"frames    run {event.run_id} seq " in line
                         and f"no archived frame {event.source.frame_id} " in line
                         for line in found), found


def test_official_avro_reads_the_archive(archive: Path) -> None:
    schema = avro.schema.parse((Path(codec.AVRO_DIR) / "model_event.avsc").read_text())
    count = 0
    for path in archive_files(archive)[0]:
        with avro.datafile.DataFileReader(open(path, "rb"), avro.io.DatumReader()) as reader:
            for record in reader:
                count += 1
                value = record["value"]
                assert value[:2] == b"\xc3\x01"
                if record["topic"] == "t.events":
                    event = avro.io.DatumReader(schema).read(
                        avro.io.BinaryDecoder(io.BytesIO(value[10:])))
                    assert event == {**event, "run_id": record["key"].decode()}
    assert count == verify_archive(archive).records


def test_copy_of_archive_verifies_elsewhere(archive: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(archive, copy)
    assert verify_archive(copy).ok
