"""``modelevents audit verify DIR``: prove an audit archive, or say precisely where it fails.

    report = verify_archive(Path("archive"))
    report.ok                      # True only when every check holds
    report.problems                # [Finding(check, where, message)], each a failure
    report.notes                   # informational findings (open runs, no input packet, …)

Checks (``docs/audit.md``):

* **files** — every container file has its manifest and every manifest its file; the header is
  the one the manifest recorded (sha256, sync marker).
* **chain** — every block in every file is the block its manifest recorded at that position:
  a block whose bytes changed is *modified*, one the manifest does not know *inserted*, one
  the file lacks *removed*, blocks out of order *reordered*, a file ending inside or before its
  recorded blocks *truncated*; across files, blocks 0…n of the archive link by
  ``hash = sha256(prev || block bytes)`` with no index missing or twice, and the last
  checkpoint names the last block (a file removed at the end of the chain is found there).
* **records** — every record decodes, sits in its tenant's directory, lies inside the offsets
  its block's manifest line states, and no Kafka offset is archived twice.
* **runs** — per run: ``seq`` contiguous from 0 (an identical copy of an event is a note, a
  different event under the same ``seq`` a failure), pieces whole, a run whose last event is
  ``run.finished`` is terminal and must be whole; a run without one is listed as open (note).
* **envelopes** — every event carries its verbatim provider envelope (non-empty body, over its
  pieces), except what the end of input emits (``source.frame_id`` ending ``#close``: no frame,
  no bytes — ``adapters/base.py``).
* **frames** (archives with ``--with-frames``) — the frame every event names is archived
  (except the executor's and the approvals' events, transport ``executor``: they have none).
* **input** — every run started through the gateway has its input packet, and each packet's
  fingerprint is its request's; a run fed or forwarded without one is listed, a note
  (``inputs.py``).
* **offsets** — no offset missing in an archived partition of ``events``, ``frames`` or
  ``receipts`` from the first archived to the last checkpointed (``offsets.py``; the
  compacted ``run-inputs`` has legitimate holes).
* **anchor**, **digests** (when asked: ``Anchors``) — the archive holds the head kept outside it:
  the topic's signed head, a head hash, a copied digest chain (``anchor.py``).
* **receipts** (archives of the ``receipts`` topic) — every ``tool.result`` the tool executor
  wrote has its final receipt, which says what the result says, and every receipt of a finished
  attempt names an archived ``tool.call`` of its run; tool calls without any receipt (answered
  by the application) are listed, a note (``receipts.py``).
"""

from __future__ import annotations

import gc
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastavro import parse_schema

from modelevents.consumers.audit.anchor import Anchors, Chain, check_anchors
from modelevents.consumers.audit.format import (
    AUDIT_RECORD,
    CONTAINER_FINGERPRINT,
    FORMAT,
    GENESIS,
    archive_files,
    avro_path,
    decompress,
    manifest_path,
    parse_header,
    ranges,
    read_manifest,
    scan_blocks,
    tenant_of_dir,
)
from modelevents.consumers.audit.inputs import check_input_packets, take_input_packet
from modelevents.consumers.audit.offsets import check_offset_holes
from modelevents.consumers.audit.receipts import check_receipts, take_receipt
from modelevents.consumers.audit.writer import CHECKPOINTS, read_checkpoints
from modelevents.schemas import codec
from modelevents.schemas.avro_projection import compile_projection, named_records
from modelevents.schemas.errors import CorruptRecord
from modelevents.services.run_logic.executor_events import TRANSPORT as EXECUTOR

EVENT = "modelevents.ModelEvent"
FRAME = "modelevents.ProviderFrame"
CLOSE_SUFFIX = "#close"
NO_FRAMES = "(no frames)"
# What verify reads of a ModelEvent (the rest is skipped): the payload's branch, the provider
# object id of a run.started (frames of a run can be keyed by it), and the payload of a tool.call
# or tool.result (what the receipts check compares with the receipts: receipts.py).
RECORD_FIELDS = {"topic": True, "partition": True, "offset": True, "value": True}
EVENT_FIELDS = {"run_id": True, "tenant": True, "kind": True, "seq": True,
                "source": {"frame_id": True, "transport": True}, "envelope": {"body": "length"},
                "payload": {"$branch": {"modelevents.RunStarted": True,
                                        "modelevents.ToolCall": True,
                                        "modelevents.ToolResult": True}}, "piece": True}
TOOL_KINDS = frozenset({"tool.call", "tool.result"})


@dataclass(frozen=True, slots=True)
class Finding:
    check: str  # files | chain | records | runs | envelopes | frames | input | receipts
    where: str  # file and block, or run id (and seq)
    message: str

    def line(self, label: str) -> str:
        return f"{label} {self.check:<9} {self.where}: {self.message}"

    def as_dict(self) -> dict[str, str]:
        return {"check": self.check, "where": self.where, "message": self.message}


@dataclass
class Report:
    root: Path
    problems: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    files: int = 0
    blocks: int = 0
    records: int = 0
    events: int = 0
    frames: int = 0
    runs: int = 0
    terminal_runs: int = 0
    head: str | None = None
    anchored: bool | None = None  # held its anchors (None: compared with none)
    input_packets: dict[str, list[Any]] = field(default_factory=dict)  # run id → packets
    receipts: dict[str, list[Any]] = field(default_factory=dict)  # run id → ToolReceipts

    @property
    def ok(self) -> bool:
        return not self.problems

    def fail(self, check: str, where: str, message: str) -> None:
        self.problems.append(Finding(check, where, message))

    def note(self, check: str, where: str, message: str) -> None:
        self.notes.append(Finding(check, where, message))

    def summary(self) -> dict[str, Any]:
        return {"ok": self.ok, "archive": str(self.root), "files": self.files,
                "blocks": self.blocks, "records": self.records, "events": self.events,
                "frames": self.frames, "receipts": sum(map(len, self.receipts.values())),
                "runs": self.runs, "terminal_runs": self.terminal_runs,
                "problems": len(self.problems), "notes": len(self.notes), "head": self.head,
                "anchored": self.anchored}


@dataclass(slots=True)
class _Event:
    value: bytes
    kind: str
    frame_id: str
    transport: str
    body_len: int
    piece: tuple[int, int] | None
    object_id: str | None
    tool: Any  # a tool.call's or tool.result's payload ((name, dict) or a dataclass), else None


class _Readers:
    def __init__(self) -> None:
        schemas = codec.schemas()
        self.compiled = dict(schemas.readers)
        # Magic and fingerprint of the values the projection reads (the current schema's).
        self.event_heads = {codec.MAGIC + fp for fp, (name, _) in schemas.readers.items()
                            if name == EVENT}
        event = schemas.current[EVENT]
        self.project = compile_projection(event, named_records(event), EVENT_FIELDS)
        record = parse_schema(AUDIT_RECORD, {})
        assert isinstance(record, dict)  # a record schema parses to a dict
        self.record = compile_projection(record, {}, RECORD_FIELDS, to_end=False)

    def records(self, data: bytes, count: int) -> list[list[Any]]:
        """The ``count`` AuditRecords of a block's (decompressed) data — [topic, partition,
        offset, value] each —, read by a projection of
        the record schema (the log timestamp and key skipped); CorruptRecord when they do not
        fill the data exactly."""
        read = self.record
        out = []
        p = 0
        for _ in range(count):
            *record, p = read(data, p)
            out.append(record)
        if p != len(data):
            raise CorruptRecord(f"{len(data) - p} bytes after the block's {count} records")
        return out

    def event(self, d: bytes) -> tuple | None:
        """The fields verify needs of a current-schema ModelEvent — (run_id, tenant, kind, seq,
        frame_id, body length, (payload record name, RunStarted payload or None), piece) — read
        by a projection of the compiled reader (the rest of the record is walked and skipped,
        not built: schemas/avro_projection.py); None when the value is not one (the caller
        decodes it fully). A record that does not hold raises CorruptRecord."""
        if d[:10] not in self.event_heads:
            return None
        return self.project(d, 10)

    def read(self, value: bytes) -> tuple[str, dict[str, Any]] | tuple[str, Any]:
        """(record name, the record as a dict) for current-schema values (the compiled reader),
        else through codec.decode (older versions: a dataclass)."""
        compiled = self.compiled.get(value[2:10]) if len(value) >= 10 else None
        if compiled is not None:
            name, read = compiled
            return name, read(value, 10)
        obj = codec.decode(value)
        return type(obj).__name__, obj


def _event_fields(name: str, rec: Any) -> tuple[str, str, str, int, str, str, int, Any, Any]:
    """run_id, tenant, kind, seq, frame_id, transport, envelope body length, piece, payload."""
    if isinstance(rec, dict):
        piece = rec.get("piece")
        source = rec["source"]
        return (rec["run_id"], rec["tenant"], rec["kind"], rec["seq"], source["frame_id"],
                source["transport"], len(rec["envelope"]["body"]),
                None if piece is None else (piece["index"], piece["count"]), rec["payload"])
    piece = rec.piece
    return (rec.run_id, rec.tenant, rec.kind, rec.seq, rec.source.frame_id, rec.source.transport,
            len(rec.envelope.body), None if piece is None else (piece.index, piece.count),
            rec.payload)


def _object_id(payload: Any) -> str | None:
    """A run.started payload's provider object id (a (name, dict) of the compiled reader or
    the projection — whose dict is None for another branch —, or a dataclass)."""
    if isinstance(payload, tuple):
        return payload[1].get("provider_object_id") if payload[1] is not None else None
    return getattr(payload, "provider_object_id", None)


def _where(topic: str, partition: int, offset: int) -> str:
    """A record's place in Kafka, for findings (formatted only when there is one)."""
    return f"{topic}:{partition}@{offset}"


@contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """Verify keeps a small record of every event until the run checks (hundreds of thousands
    of objects, none in a reference cycle: dicts of lists of tuples and slotted records). The
    cycle collector, triggered by those allocations, walked them again and again for nothing —
    ~35% of verify's time (docs/performance.md); reference counting frees all of it anyway."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def archive_id(root: Path) -> str | None:
    """The id archive.json gives the archive (what its heads are published under)."""
    try:
        info = json.loads((Path(root) / "archive.json").read_text())
    except (OSError, ValueError):
        return None
    found = info.get("archive_id") if isinstance(info, dict) else None
    return found if isinstance(found, str) else None


def verify_archive(root: Path, anchors: Anchors | None = None) -> Report:
    """Every check of the module docstring over the archive at ``root``, and its comparison
    with the heads kept outside it that ``anchors`` names (anchor.py)."""
    with _without_cycle_collection():
        return _verify(Path(root), anchors)


def _verify(root: Path, anchors: Anchors | None) -> Report:
    report = Report(root)
    described = root / "archive.json"
    frames_archived = False
    receipts_archived = False
    info: dict[str, Any] = {}
    if not described.exists():
        report.fail("files", str(root), "no archive.json: not an audit archive, or it was removed")
    else:
        try:
            info = json.loads(described.read_text())
            if info.get("format") != FORMAT:
                report.fail("files", "archive.json", f"format {info.get('format')!r}, not {FORMAT}")
            frames_archived = bool(info.get("frames_topic"))
            receipts_archived = bool(info.get("receipts_topic"))
        except ValueError as exc:
            report.fail("files", "archive.json", f"not JSON ({exc})")
    avros, manifests = archive_files(root)
    report.files = len(avros)
    manifest_set = set(manifests)
    for avro in avros:
        if manifest_path(avro) not in manifest_set:
            report.fail("files", str(avro.relative_to(root)),
                        "no manifest beside it (deleted?): its blocks cannot be proven")
    chain_entries: list[tuple[int, str, dict[str, Any]]] = []  # (chain index, file, entry)
    readers = _Readers()
    events: dict[str, dict[int, list[_Event]]] = defaultdict(lambda: defaultdict(list))
    tenants: dict[str, str] = {}
    frames: set[tuple[str, str, str]] = set()
    frame_keys: dict[tuple[str, str], set[str]] = defaultdict(set)
    offsets_seen: dict[tuple[str, int], set[int]] = defaultdict(set)
    verified_hashes: dict[int, bool] = {}

    for mpath in manifests:
        rel_manifest = str(mpath.relative_to(root))
        avro = avro_path(mpath)
        rel = str(avro.relative_to(root))
        manifest = read_manifest(mpath)
        if manifest.torn_line:
            report.fail("files", rel_manifest, "its last line is cut off (a crash while "
                        "writing it that was never recovered: run `audit run` again)")
        for number in manifest.bad_lines:
            report.fail("files", rel_manifest, f"line {number} is not a manifest entry")
        if manifest.header is None:
            report.fail("files", rel_manifest, "no header line")
            continue
        for entry in manifest.blocks:
            chain_entries.append((entry.get("chain_index", -1), rel, entry))
        if manifest.seal is None:
            report.note("files", rel, "not sealed (a writer has it open, or it crashed and "
                        "`audit run` has not recovered it yet)")
        if not avro.exists():
            report.fail("files", rel, f"missing: {rel_manifest} records "
                        f"{len(manifest.blocks)} block(s) of it")
            continue
        data = avro.read_bytes()
        _check_file(report, rel, data, manifest, verified_hashes, readers, events, tenants,
                    frames, frame_keys, offsets_seen, tenant_of_dir(avro.parent.parent))

    last_checkpoint = _check_chain(report, root, chain_entries, verified_hashes)
    # Compaction leaves holes in run-inputs' offsets; the other topics have none (offsets.py).
    gapless = {info[k] for k in ("events_topic", "frames_topic", "receipts_topic")
               if isinstance(info.get(k), str)}
    check_offset_holes(report, offsets_seen, gapless, last_checkpoint)
    if anchors is not None and anchors.asked:
        chain = Chain(info.get("archive_id"))
        for index, _rel, entry in chain_entries:
            chain.hashes.setdefault(index, str(entry.get("hash")))
            chain.offsets.setdefault(index, entry.get("offsets") or {})
        check_anchors(report, anchors, chain)
        report.anchored = not any(f.check in ("anchor", "digests") for f in report.problems)
    _check_runs(report, events, tenants, frames_archived, frames, frame_keys)
    check_input_packets(report, events)
    check_receipts(report, events, tenants, receipts_archived)
    return report


def _check_file(report: Report, rel: str, data: bytes, manifest: Any,
                verified_hashes: dict[int, bool], readers: _Readers, events: Any,
                tenants: dict[str, str], frames: set, frame_keys: Any, offsets_seen: Any,
                tenant: str) -> None:
    header_entry = manifest.header
    try:
        header = parse_header(data)
    except (ValueError, IndexError) as exc:
        report.fail("chain", rel, f"header unreadable ({exc})")
        return
    if hashlib.sha256(data[:header.length]).hexdigest() != header_entry.get("header_sha256"):
        report.fail("chain", f"{rel} header", "the file header differs from the one its "
                    "manifest recorded (schema, codec, metadata or sync marker changed)")
    try:
        schema = json.loads(header.metadata.get("avro.schema", b"{}"))
        from fastavro import parse_schema
        from fastavro.schema import to_parsing_canonical_form

        from modelevents.consumers.audit.format import fingerprint
        found = fingerprint(to_parsing_canonical_form(parse_schema(schema, {})))
    except Exception as exc:
        found = f"unreadable ({exc})"
    if found != CONTAINER_FINGERPRINT:
        report.fail("chain", f"{rel} header", f"record schema {found}, not the audit "
                    f"record's {CONTAINER_FINGERPRINT}")
    scan = scan_blocks(data, header)
    recorded = manifest.blocks
    actual = [hashlib.sha256(data[b.start:b.start + b.length]).hexdigest() for b in scan.blocks]
    report.blocks += len(actual)
    expected = [e.get("sha256") for e in recorded]
    matched: dict[int, int] = {}  # actual index -> manifest index
    if actual != expected:
        _diagnose(report, rel, actual, expected, recorded, scan, len(data), matched)
    else:
        matched = {i: i for i in range(len(actual))}
    if scan.problem and scan.torn_at is None:
        report.fail("chain", rel, scan.problem)
    if scan.torn_at is not None and not any(f.where.startswith(rel) and "truncated" in f.message
                                            for f in report.problems):
        report.fail("chain", f"{rel} byte {scan.torn_at}",
                    f"the file ends inside a block ({len(data)} bytes; torn or truncated)"
                    + (f": {scan.problem}" if scan.problem else ""))
    codec_name = header.codec
    for index, block in enumerate(scan.blocks):
        m_index = matched.get(index)
        entry = recorded[m_index] if m_index is not None else None
        raw = data[block.start:block.start + block.length]
        if entry is not None:
            try:
                good = hashlib.sha256(bytes.fromhex(entry["prev"]) + raw).hexdigest() == entry["hash"]
            except (KeyError, ValueError):
                good = False
            verified_hashes[entry.get("chain_index", -1)] = good
            if not good:
                report.fail("chain", f"{rel} block {m_index}",
                            "hash is not sha256(prev || block bytes)")
        if entry is None:
            continue  # modified or inserted: its records are not the archive's
        try:
            payload = decompress(codec_name, data[block.data_start:block.data_start
                                                  + block.data_length])
            records = readers.records(payload, block.count)
        except Exception as exc:
            report.fail("records", f"{rel} block {m_index}", f"cannot be read ({exc})")
            continue
        spans = entry.get("offsets", {})
        project, event_heads = readers.project, readers.event_heads
        # (topic, partition) → (its offsets span in this block's manifest line, offsets seen)
        partitions: dict[tuple[str, int], tuple[Any, set[int]]] = {}
        report.records += len(records)
        for topic, partition, offset, value in records:
            known = partitions.get((topic, partition))
            if known is None:
                known = partitions[(topic, partition)] = (spans.get(f"{topic}:{partition}"),
                                                          offsets_seen[(topic, partition)])
            span, seen = known
            if span is None or not span["first"] <= offset <= span["last"]:
                report.fail("records", f"{rel} block {m_index}",
                            f"{_where(topic, partition, offset)} lies outside the offsets its "
                            "manifest line states")
            if offset in seen:
                report.fail("records", f"{rel} block {m_index}",
                            f"{_where(topic, partition, offset)} archived twice")
            seen.add(offset)
            if value is None:
                report.fail("records", f"{rel} block {m_index}",
                            f"{_where(topic, partition, offset)}: no value (tombstone)")
                continue
            try:
                fast = project(value, 10) if value[:10] in event_heads else None
                if fast is not None:
                    name = EVENT
                    (run_id, rec_tenant, kind, seq, frame_id, transport, body_len, payload,
                     piece) = fast
                    if piece is not None:
                        piece = (piece["index"], piece["count"])
                else:
                    name, obj = readers.read(value)
                    if name in (EVENT, "ModelEvent"):
                        (run_id, rec_tenant, kind, seq, frame_id, transport, body_len, piece,
                         payload) = _event_fields(name, obj)
            except Exception as exc:
                # Not the events' contract: an input packet (inputs.py) or a tool receipt
                # (receipts.py) is taken here, off the events' path.
                where = _where(topic, partition, offset)
                if (take_input_packet(report, value, where, tenant)
                        or take_receipt(report, value, where, tenant)):
                    continue
                report.fail("records", f"{rel} block {m_index}",
                            f"{_where(topic, partition, offset)} cannot be decoded: {exc}")
                continue
            if name in (EVENT, "ModelEvent"):
                report.events += 1
                if rec_tenant != tenant:
                    report.fail("records", f"{rel} block {m_index}",
                                f"{_where(topic, partition, offset)}: an event of tenant "
                                f"{rec_tenant!r} under tenant "
                                f"{tenant!r}")
                tenants.setdefault(run_id, rec_tenant)
                events[run_id][seq].append(_Event(
                    value, kind, frame_id, transport, body_len, piece,
                    _object_id(payload) if kind == "run.started" else None,
                    payload if kind in TOOL_KINDS else None))
            elif name in (FRAME, "ProviderFrame"):
                report.frames += 1
                if isinstance(obj, dict):
                    key = (obj["tenant"], obj["run_key"], obj["frame_id"])
                else:
                    key = (obj.tenant, obj.run_key, obj.frame_id)
                frames.add(key)
                frame_keys[(key[0], key[2])].add(key[1])
            else:
                report.fail("records", f"{rel} block {m_index}",
                            f"{_where(topic, partition, offset)}: a {name}, not an "
                            "event or frame")


def _diagnose(report: Report, rel: str, actual: list[str], expected: list[str],
              recorded: list[dict], scan: Any, size: int, matched: dict[int, int]) -> None:
    """Name what differs between the blocks found and the blocks recorded."""
    where_expected: dict[str, int] = {}
    for j, digest in enumerate(expected):
        where_expected.setdefault(digest, j)
    found = set(actual)
    missing = [j for j, d in enumerate(expected) if d not in found]
    extra = [i for i, d in enumerate(actual) if d not in where_expected]
    for i, digest in enumerate(actual):
        at = where_expected.get(digest)
        if at is not None and at not in matched.values():
            matched[i] = at
    recorded_end = (recorded[-1]["start"] + recorded[-1]["length"]) if recorded else 0
    truncated = size < recorded_end and missing and missing == list(
        range(len(expected) - len(missing), len(expected)))
    modified = set()
    for i in extra:
        if i in missing and i not in matched.values():
            modified.add(i)
    for i in sorted(modified):
        report.fail("chain", f"{rel} block {i}", "modified: its bytes are not the ones the "
                    f"manifest recorded (sha256 {actual[i][:16]}…, recorded {expected[i][:16]}…)")
    if truncated:
        torn = f", and ends inside block {len(scan.blocks)}" if scan.torn_at is not None else ""
        report.fail("chain", f"{rel} block {missing[0]}",
                    f"truncated: the file has {size} of {recorded_end} bytes; block(s) "
                    f"{ranges([j for j in missing if j not in modified])} missing{torn}")
    else:
        for j in missing:
            if j not in modified:
                report.fail("chain", f"{rel} block {j}", "removed: recorded in the manifest "
                            f"(sha256 {expected[j][:16]}…) but not in the file")
    for i in extra:
        if i not in modified:
            report.fail("chain", f"{rel} block {i}", "inserted: a block the manifest does not "
                        f"record (sha256 {actual[i][:16]}…)")
    order = [matched[i] for i in sorted(matched)]
    if order != sorted(order):
        moved = [j for k, j in enumerate(order) if j != sorted(order)[k]]
        report.fail("chain", f"{rel} blocks {', '.join(map(str, sorted(moved)))}",
                    "reordered: found in the order "
                    f"{', '.join(map(str, order))} of the manifest's blocks")


def _check_chain(report: Report, root: Path, entries: list[tuple[int, str, dict]],
                 verified: dict[int, bool]) -> dict[str, Any] | None:
    """The chain checks; returns the last checkpoint line."""
    entries.sort(key=lambda item: item[0])
    by_index: dict[int, list[tuple[str, dict]]] = defaultdict(list)
    for index, rel, entry in entries:
        by_index[index].append((rel, entry))
    for index, items in by_index.items():
        if len(items) > 1:
            report.fail("chain", f"chain block {index}",
                        "recorded twice: " + ", ".join(f"{r} block {e.get('block')}"
                                                       for r, e in items))
    indices = sorted(by_index)
    checkpoints, torn = read_checkpoints(root)
    last = checkpoints[-1] if checkpoints else None
    expected_last = last["chain_index"] if last else (indices[-1] if indices else -1)
    present = set(indices)
    absent = [i for i in range(0, max(expected_last, indices[-1] if indices else -1) + 1)
              if i not in present]
    if absent:
        around = []
        for gap_start in [absent[0]]:
            before = by_index.get(gap_start - 1)
            if before:
                around.append(f"after {before[0][0]} block {before[0][1].get('block')}")
        report.fail("chain", f"chain blocks {ranges(absent)}",
                    "missing from every manifest (a file and its manifest removed?)"
                    + (f" — {around[0]}" if around else ""))
    previous: str | None = GENESIS.hex()
    for index in range(0, (indices[-1] + 1) if indices else 0):
        listed = by_index.get(index)
        if not listed:
            previous = None
            continue
        rel, entry = listed[0]
        if previous is not None and entry.get("prev") != previous:
            report.fail("chain", f"{rel} block {entry.get('block')}",
                        f"chain block {index} does not link to chain block {index - 1}")
        previous = entry.get("hash")
    if last is not None:
        head = by_index.get(last["chain_index"])
        if head and head[0][1].get("hash") != last["hash"]:
            report.fail("chain", CHECKPOINTS, f"checkpoint {last['checkpoint']} names chain "
                        f"block {last['chain_index']} with hash {last['hash'][:16]}…; the "
                        "manifests record another")
        report.head = last["hash"]
        after = [i for i in indices if i > last["chain_index"]]
        if after:
            report.note("chain", f"chain blocks {ranges(after)}",
                        "written after the last checkpoint (a writer is running, or crashed: "
                        "the next `audit run` rolls them back)")
    elif indices:
        report.fail("chain", CHECKPOINTS, "missing: no checkpoint names the chain's head")
    if torn:
        report.note("chain", CHECKPOINTS, "its last line is cut off (recovered at the next run)")
    return last


def _check_runs(report: Report, events: dict[str, dict[int, list[_Event]]],
                tenants: dict[str, str], frames_archived: bool, frames: set,
                frame_keys: dict[tuple[str, str], set[str]]) -> None:
    report.runs = len(events)
    for run_id in sorted(events):
        by_seq = events[run_id]
        tenant = tenants[run_id]
        seqs = sorted(by_seq)
        chosen: dict[int, _Event] = {}
        copies = 0
        for seq in seqs:
            found = by_seq[seq]
            first = chosen[seq] = found[0]
            if len(found) == 1:
                continue
            for other in found[1:]:
                if other.value != first.value:
                    report.fail("runs", f"run {run_id} seq {seq}",
                                f"two different events under one seq ({first.kind}, "
                                f"{other.kind})")
                else:
                    copies += 1
        if copies:
            report.note("runs", f"run {run_id}", f"{copies} identical cop"
                        f"{'y' if copies == 1 else 'ies'} of events (the worker's at-least-once "
                        "output; deduped by (run_id, seq))")
        last = seqs[-1]
        # seqs are distinct and sorted: 0..last are all there exactly when there are last + 1
        missing = ([] if seqs[0] == 0 and len(seqs) == last + 1
                   else sorted(set(range(last + 1)) - set(seqs)))
        terminal = chosen[last].kind == "run.finished"
        if terminal:
            report.terminal_runs += 1
        if missing:
            report.fail("runs", f"run {run_id}",
                        ("terminal run incomplete" if terminal else "incomplete")
                        + f": seq {ranges(missing)} missing of 0..{last}")
        elif not terminal:
            report.note("runs", f"run {run_id}", f"open: no run.finished yet (last seq {last}, "
                        f"{chosen[last].kind})")
        object_ids = {e.object_id for e in chosen.values() if e.object_id}
        seq_list = seqs  # chosen's keys, sorted
        position = 0
        while position < len(seq_list):
            seq = seq_list[position]
            event = chosen[seq]
            span: list[Any] | None = None  # an event's pieces (None: one whole event)
            if event.piece is not None:
                index, count = event.piece
                group = [chosen.get(seq + k) for k in range(count)] if index == 0 else []
                if (index != 0 or any(g is None or g.piece != (k, count)
                                      for k, g in enumerate(group))):
                    if not missing:
                        report.fail("runs", f"run {run_id} seq {seq}",
                                    f"piece {index + 1} of {count} does not stand in a whole "
                                    "run of pieces")
                    position += 1
                    continue
                span = group
                position += count
            else:
                position += 1
            closing = event.frame_id.endswith(CLOSE_SUFFIX)
            body_len = event.body_len if span is None else sum(e.body_len for e in span)
            if not closing and body_len == 0:
                report.fail("envelopes", f"run {run_id} seq {seq}",
                            f"{event.kind} carries no provider envelope")
            # The events the executor and the gateway's approvals write to ingest (transport
            # EXECUTOR) come from no provider frame.
            if (frames_archived and not event.frame_id.startswith(NO_FRAMES)
                    and event.transport != EXECUTOR):
                frame_id = event.frame_id.removesuffix(CLOSE_SUFFIX)
                if (tenant, run_id, frame_id) not in frames and not (
                        frame_keys.get((tenant, frame_id), set()) & object_ids):
                    report.fail("frames", f"run {run_id} seq {seq}",
                                f"no archived frame {frame_id} for this {event.kind}")
