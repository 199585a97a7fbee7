"""The audit archive on the real broker with the real worker: runs fed through the worker are
archived by ``modelevents audit run`` (a subprocess, as users run it), ``audit verify`` passes,
every event and frame is in it exactly once; an ``audit run`` SIGKILLed while it writes — and
the torn block such a kill leaves — is survived by the next run without loss or duplicates;
tampering and an incomplete run are reported by the CLI's exit status and lines; a run whose
tool call the real executor ran is archived with its receipts and verifies, the official
``avro`` package reads every file of that archive and its receipts as the executor wrote them,
and a receipt block deleted or changed is caught and named.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import avro.datafile
import avro.io
import avro.schema
import pytest
from aiokafka import TopicPartition

from modelevents.adapters.registry import normalize_file
from modelevents.consumers.audit import export
from modelevents.consumers.audit.format import archive_files, manifest_path, read_manifest
from modelevents.consumers.replay import checks
from modelevents.consumers.tools.executor import Executor
from modelevents.consumers.tools.receipts import SCHEMA_PATH as RECEIPT_SCHEMA
from modelevents.consumers.tools.sqlite_tools import make_registry
from modelevents.schemas import codec
from modelevents.schemas.end_of_input import with_end_markers
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local import feeder
from tests.integration.pipeline import (
    HANG_GUARD_S,
    ONE_PER_API,
    collect,
    feed,
    own_recordings,
    run,
)
from tests.integration.tools.test_executor import (  # noqa: F401 (db: a fixture)
    RunningExecutor,
    db,
    policy_for,
    propose,
    receipts_of,
    results_of,
)
from tests.schemas.test_interop import official_fingerprint

pytestmark = pytest.mark.kafka


def cli(settings: PipelineSettings, *args: str) -> list[str]:
    return [sys.executable, "-m", "modelevents.services.cli", *args,
            "--bootstrap-servers", settings.bootstrap_servers, "--prefix", settings.topic_prefix]


def audit_run(settings: PipelineSettings, out: Path, *extra: str, frames: bool = True,
              timeout: float = HANG_GUARD_S) -> subprocess.CompletedProcess:
    if "--group" not in extra:
        extra = (*extra, "--group", f"{settings.app_id}-audit")
    extra = ("--with-frames", *extra) if frames else extra
    done = subprocess.run(cli(settings, "audit", "run", "--out", str(out), "--until-end",
                              *extra), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def verify(out: Path) -> tuple[int, dict]:
    done = subprocess.run([sys.executable, "-m", "modelevents.services.cli", "audit", "verify",
                           str(out), "--json"], capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    return done.returncode, json.loads(done.stdout)


def unshared_recordings() -> list[Path]:
    """The own recordings, less those that announce a provider object another one announces
    too (polls of one object fed as runs of their own: which run keeps the object depends on
    arrival order, so their counts are not fixed)."""
    owners: dict[str, set[Path]] = {}
    for path in own_recordings():
        for event in normalize_file(path).events:
            object_id = getattr(event.payload, "provider_object_id", None)
            if object_id:
                owners.setdefault(object_id, set()).add(path)
    shared = {p for paths in owners.values() if len(paths) > 1 for p in paths}
    return [p for p in own_recordings() if p not in shared]


# Rounds of runs the SIGKILL test feeds at most while it waits for the writer to be mid-way.
MAX_FEED_ROUNDS = 50


def frames_of(paths: list[Path], copies: int = 1, tenants: tuple[str, ...] = ("default",),
              first_copy: int = 0):
    frames, counts = [], {}
    for copy in range(first_copy, first_copy + copies):
        for index, path in enumerate(paths):
            tenant = tenants[(copy + index) % len(tenants)]
            run_id = f"{tenant}-{copy}-{path.parent.name}-{path.stem}"
            fed = feeder.frames_for_file(path, run_id=run_id, tenant=tenant, received_at=0)
            frames += with_end_markers(fed.frames)
            counts[run_id] = len(normalize_file(path, run_id=run_id).events)
    return frames, counts


async def topic_records(settings: PipelineSettings, topic: str) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record ``topic`` holds now."""
    out = []
    async for rec in clients.read_records(settings, topic, to_end=True, timeout=30):
        out.append((rec.partition, rec.offset, rec.raw))
    return out


def archived(out: Path) -> Counter:
    return Counter((r.topic, r.partition, r.offset, r.value)
                   for r in export.archived_records(out))


def assert_exactly_once(settings: PipelineSettings, out: Path) -> None:
    held = archived(out)
    expected = Counter()
    for topic in ("events", "frames"):
        for partition, offset, value in run(topic_records(settings, topic)):
            expected[(settings.topic(topic), partition, offset, value)] += 1
    assert held == expected, (f"{sum((held - expected).values())} extra, "
                              f"{sum((expected - held).values())} missing")
    seqs = Counter((e.run_id, e.seq) for key in held if key[0].endswith("events")
                   for e in [codec.decode(key[3])])
    assert max(seqs.values()) == 1


def test_archive_of_worker_output_verifies(settings, start_worker, tmp_path: Path) -> None:
    start_worker()
    frames, counts = frames_of(ONE_PER_API, tenants=("default", "acme"))
    run(feed(settings, frames))
    run(collect(settings, lambda p: all(p.complete(r, n) for r, n in counts.items())))
    out = tmp_path / "archive"
    audit_run(settings, out)
    code, report = verify(out)
    assert code == 0, report["problems"]
    summary = report["summary"]
    assert summary["runs"] == len(counts) and summary["events"] == sum(counts.values())
    assert summary["frames"] == len(frames)
    assert {p.parent.parent.name for p in archive_files(out)[0]} == {"tenant=default",
                                                                      "tenant=acme"}
    notes = [n for n in report["notes"] if n["check"] == "input"]
    assert len(notes) == len(counts)
    assert all(n["message"].startswith("no input packet recorded") for n in notes)
    assert_exactly_once(settings, out)

    # `replay state` reads the archive as it reads `events`: every run's state rebuilt from the
    # archive equals the one on `runs`.
    state = run(checks.check_state(settings, archive=out))
    assert state.ok and {c.verdict for c in state.runs} == {"equal"}
    assert {c.run_id for c in state.runs} == set(counts)
    assert state.events_read == sum(counts.values())
    # … and so does the command a user runs.
    replayed = subprocess.run(cli(settings, "replay", "state", "--archive", str(out)),
                              capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert replayed.returncode == 0, replayed.stdout[-2000:] + replayed.stderr[-2000:]
    assert f"state: {len(counts)} runs" in replayed.stdout and f"{len(counts)} equal" in replayed.stdout

    # Offsets are committed after the checkpoints: a second run finds nothing new.
    again = audit_run(settings, out)
    assert "0 records archived" in again.stderr, again.stderr
    assert verify(out)[0] == 0

    # More runs later: appended to the same chain.
    more, more_counts = frames_of(ONE_PER_API[:2], copies=1, tenants=("late",))
    run(feed(settings, more))
    run(collect(settings, lambda p: all(p.complete(r, n) for r, n in more_counts.items())))
    audit_run(settings, out)
    code, report = verify(out)
    assert code == 0, report["problems"]
    assert report["summary"]["runs"] == len(counts) + len(more_counts)
    assert_exactly_once(settings, out)

    # Tampering is caught by the CLI: one line naming the file and block.
    path = next(p for p in archive_files(out)[0] if "tenant=acme" in str(p))
    blocks = read_manifest(manifest_path(path)).blocks
    data = bytearray(path.read_bytes())
    data[blocks[0]["start"] + blocks[0]["length"] - 20] ^= 0x10
    path.write_bytes(bytes(data))
    done = subprocess.run([sys.executable, "-m", "modelevents.services.cli", "audit", "verify",
                           str(out), "--quiet"], capture_output=True, text=True)
    assert done.returncode == 1
    assert f"{path.relative_to(out).as_posix()} block 0: modified" in done.stdout, done.stdout


def test_sigkilled_writer_loses_nothing_and_duplicates_nothing(settings, start_worker,
                                                               tmp_path: Path) -> None:
    start_worker()
    out = tmp_path / "archive"
    log = (tmp_path / "audit.log").open("wb")
    writer = subprocess.Popen(
        cli(settings, "audit", "run", "--out", str(out), "--with-frames", "--block-records", "5",
            "--checkpoint-seconds", "0.05", "--group", f"{settings.app_id}-audit"),
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    # The feed goes on, a round of runs after another, until the writer is killed: however slow
    # the writer is to start on a loaded machine, it is killed while records still arrive.
    killed = threading.Event()
    counts: dict[str, int] = {}

    def feed_until_killed() -> None:
        for first_copy in range(MAX_FEED_ROUNDS):
            frames, fed = frames_of(unshared_recordings(), tenants=("default", "acme", "beta"),
                                    first_copy=first_copy)
            run(feed(settings, frames, rate=100))
            counts.update(fed)
            if killed.is_set():
                return

    feeding = threading.Thread(target=feed_until_killed)
    feeding.start()
    try:
        # Kill it while it writes: checkpoints are being made, the feed is still going.
        deadline = time.monotonic() + HANG_GUARD_S
        checkpoints = out / "checkpoints.jsonl"
        while not (checkpoints.exists() and checkpoints.read_bytes().count(b"\n") >= 3):
            assert writer.poll() is None, (tmp_path / "audit.log").read_text()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert feeding.is_alive(), f"the feed ended after {MAX_FEED_ROUNDS} rounds, before the kill"
    finally:
        if writer.poll() is None:
            os.killpg(writer.pid, signal.SIGKILL)
        killed.set()
        writer.wait()
        log.close()
        feeding.join()
    # What such a kill can leave in the middle of a write: a part of a block after the last one.
    open_files = [p for p in archive_files(out)[0]
                  if read_manifest(manifest_path(p)).seal is None]
    assert open_files, "the killed writer had files open"
    victim = open_files[0]
    with open(victim, "ab") as fo:
        fo.write(victim.read_bytes()[-300:-100])
    assert verify(out)[0] == 1  # not yet recovered: the torn block is reported, never kept

    run(collect(settings, lambda p: all(p.complete(r, n) for r, n in counts.items())))
    restarted = audit_run(settings, out, "--block-records", "5",
                          "--group", f"{settings.app_id}-audit")
    assert "recovered" in restarted.stderr, restarted.stderr
    assert list((out / "quarantine").iterdir())
    code, report = verify(out)
    assert code == 0, report["problems"][:20]
    assert report["summary"]["events"] == sum(counts.values())
    assert_exactly_once(settings, out)


def test_incomplete_run_is_reported(settings, start_worker, tmp_path: Path) -> None:
    """An archive that starts inside a run (its first events are past the topics' retention, or
    were never archived): the run is incomplete, verify fails and names it."""
    start_worker()
    frames, counts = frames_of(ONE_PER_API[:1])
    run(feed(settings, frames))
    run(collect(settings, lambda p: all(p.complete(r, n) for r, n in counts.items())))
    (run_id,) = counts
    records = run(topic_records(settings, "events"))
    partition = records[0][0]
    group = f"{settings.app_id}-audit"

    async def commit_past_first_events() -> None:
        consumer = clients.make_consumer(settings, "events", group_id=group)
        await clients.start_client(consumer, settings)
        try:
            await consumer.commit({TopicPartition(settings.topic("events"), partition): 3})
        finally:
            await consumer.stop()

    run(commit_past_first_events())
    out = tmp_path / "archive"
    done = subprocess.run(cli(settings, "audit", "run", "--out", str(out), "--until-end",
                              "--group", group),
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert done.returncode == 0, done.stderr
    verified = subprocess.run([sys.executable, "-m", "modelevents.services.cli", "audit",
                               "verify", str(out)], capture_output=True, text=True)
    assert verified.returncode == 1
    assert f"FAIL runs      run {run_id}: incomplete: seq 0..2 missing" in verified.stdout, \
        verified.stdout


def _receipt_blocks(out: Path, receipts_topic: str) -> list[tuple[int, Path, dict]]:
    """(last receipts offset, file, manifest line) of every block that holds receipts."""
    found = []
    for path in archive_files(out)[0]:
        for entry in read_manifest(manifest_path(path)).blocks:
            spans = [v for k, v in entry["offsets"].items() if k.startswith(receipts_topic)]
            if entry["receipts"]:
                found.append((max(s["last"] for s in spans), path, entry))
    return sorted(found, key=lambda item: item[0])


def archive_executor_runs(settings: PipelineSettings, db: Path, out: Path) -> tuple[str, str]:
    """A run whose get_weather call the real executor served (tenant ``tools``) and one whose
    call nobody answered (``self-served``), archived by ``audit run`` into ``out`` with their
    receipts, a block per record; (served run id, unserved run id)."""
    executor = RunningExecutor(Executor(make_registry(db), policy_for("tools"), settings,
                                        tenant="tools", group=f"{settings.app_id}-tools"))
    try:
        served = propose(settings, "tools", [("get_weather", "c1", '{"city": "Paris"}')])
        # A tenant no executor serves: its application answers its calls (here: nobody yet).
        unserved = propose(settings, "self-served", [("get_weather", "c7", '{"city": "Rome"}')])
        assert not results_of(settings, served, 1)["c1"].payload.is_error
    finally:
        executor.stop()
    # The runs' events were written to ingest (no frames); a block per record: one can go.
    audit_run(settings, out, "--block-records", "1", frames=False)
    return served, unserved


def test_a_run_the_executor_served_is_archived_with_its_receipts(settings, start_worker, db,
                                                                 tmp_path: Path) -> None:
    start_worker()
    out = tmp_path / "archive"
    served, unserved = archive_executor_runs(settings, db, out)
    code, report = verify(out)
    assert code == 0, report["problems"]
    assert report["summary"]["receipts"] == 2  # started and finished
    receipt_notes = [n for n in report["notes"] if n["check"] == "receipts"]
    assert receipt_notes == [{"check": "receipts", "where": f"run {unserved}", "message":
                              "1 tool call(s) without a receipt: not executed by the tool "
                              "executor (answered by the application, or not yet): c7"}]
    exported = io.StringIO()
    export.export_jsonl(out, exported)
    kinds = Counter(json.loads(line)["type"] for line in exported.getvalue().splitlines())
    assert kinds["receipt"] == 2
    # `replay state --archive` reads the runs' events from it, receipts beside them.
    state = run(checks.check_state(settings, archive=out))
    assert state.ok and {c.run_id for c in state.runs} == {served, unserved}, state

    # The final receipt's block changed: the block is named, and so is the result it proved.
    (_, path, entry), = [b for b in _receipt_blocks(out, settings.topic("receipts"))][-1:]
    changed = tmp_path / "changed"
    shutil.copytree(out, changed)
    victim = changed / path.relative_to(out)
    data = bytearray(victim.read_bytes())
    data[entry["start"] + entry["length"] - 20] ^= 0x01
    victim.write_bytes(bytes(data))
    code, report = verify(changed)
    assert code == 1
    failed = {(p["check"], p["where"]) for p in report["problems"]}
    rel = path.relative_to(out).as_posix()
    assert ("chain", f"{rel} block {entry['block']}") in failed, report["problems"]
    assert ("receipts", f"run {served} tool call c1") in failed, report["problems"]

    # … removed: the same two findings, the block as missing (removed, or — the file's last
    # block — the file truncated).
    data = path.read_bytes()
    path.write_bytes(data[:entry["start"]] + data[entry["start"] + entry["length"]:])
    code, report = verify(out)
    assert code == 1
    messages = {(p["check"], p["where"]): p["message"] for p in report["problems"]}
    assert messages[("chain", f"{rel} block {entry['block']}")].startswith(
        ("removed", "truncated")), messages
    assert "without its receipt" in messages[("receipts", f"run {served} tool call c1")]


def test_official_avro_reads_an_archive_with_receipts_as_the_executor_wrote_them(
        settings, start_worker, db, tmp_path: Path) -> None:
    # Every container file read by the official Apache Avro package (not our fastavro path),
    # every receipt value decoded by it with schemas/avro/tools/tool_receipt.avsc: the fields
    # are those of the receipts the executor wrote on the topic, byte for byte the same records.
    start_worker()
    out = tmp_path / "archive"
    served, _ = archive_executor_runs(settings, db, out)
    written = receipts_of(settings, served)
    assert [r.phase for r in written] == ["started", "finished"]
    schema = avro.schema.parse(RECEIPT_SCHEMA.read_text())
    receipts_topic = settings.topic("receipts")
    read = 0
    found: list[dict] = []
    for path in archive_files(out)[0]:
        with avro.datafile.DataFileReader(path.open("rb"), avro.io.DatumReader()) as reader:
            for record in reader:
                read += 1
                if record["topic"] != receipts_topic:
                    continue
                value = record["value"]
                # Single-object encoding: C3 01, the fingerprint official Avro computes, the body.
                assert value[:2] == b"\xc3\x01"
                assert value[2:10] == official_fingerprint(RECEIPT_SCHEMA)
                datum = avro.io.DatumReader(schema).read(
                    avro.io.BinaryDecoder(io.BytesIO(value[10:])))
                assert record["key"] == datum["run_id"].encode()
                assert f"tenant={datum['tenant']}" in path.as_posix()
                found.append(datum)
    assert read == verify(out)[1]["summary"]["records"]  # every record of every file was read

    def millis(moment: dt.datetime | None) -> int | None:
        return None if moment is None else round(moment.timestamp() * 1000)

    as_read = [{**datum, "started_at": millis(datum["started_at"]),
                "finished_at": millis(datum["finished_at"])} for datum in found]
    assert as_read == [dataclasses.asdict(r) for r in written]
    started, done = as_read
    assert (done["run_id"], done["tenant"], done["tool_name"], done["tool_call_id"]) == (
        served, "tools", "get_weather", "c1")
    assert (started["phase"], started["finished_at"], started["result"]) == ("started", None, None)
    assert (done["phase"], done["outcome"], done["attempt"]) == ("finished", "succeeded", 1)
    # The finished receipt holds the output the model was sent: the executor's tool.result.
    result = results_of(settings, served, 1)["c1"].payload
    assert done["result"] == result.output and done["result_is_error"] is result.is_error
