"""``modelevents audit verify DIR``: prove an audit archive, or say precisely where it fails.

    report = verify_archive(Path("archive"))
    report.ok                      # True only when every check holds
    report.problems                # [Finding(check, where, message)], each a failure
    report.notes                   # informational findings (open runs, no input packet, …)

More on this module: docs/audit.md, ``consumers/audit/verify.py``.
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
from fastavro.schema import to_parsing_canonical_form

from modelevents.consumers.audit.anchor import Anchors, Chain, check_anchors
from modelevents.consumers.audit.format import (
    AUDIT_RECORD,
    CONTAINER_FINGERPRINT,
    FORMAT,
    GENESIS,
    archive_files,
    avro_path,
    decompress,
    fingerprint,
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
# The name a record goes by: the compiled reader's (the current schemas) or the dataclass's (an
# older schema, decoded by codec.decode).
EVENT_NAMES = (EVENT, "ModelEvent")
FRAME_NAMES = (FRAME, "ProviderFrame")
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


@dataclass(slots=True)
class _Found:
    """What the pass over the archive's files gathers for the checks that follow it."""

    # (chain index, file, manifest line) of every block the manifests record
    chain_entries: list[tuple[int, str, dict[str, Any]]] = field(default_factory=list)
    # run id → seq → the archived copies of its event
    events: dict[str, dict[int, list[_Event]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    tenants: dict[str, str] = field(default_factory=dict)  # run id → its first event's tenant
    frames: set[tuple[str, str, str]] = field(default_factory=set)  # (tenant, run key, frame id)
    # (tenant, frame id) → the run keys it was archived under
    frame_keys: dict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    # (topic, partition) → the offsets archived
    offsets_seen: dict[tuple[str, int], set[int]] = field(
        default_factory=lambda: defaultdict(set))


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


def _event_fields(rec: Any) -> tuple[str, str, str, int, str, str, int, Any, Any]:
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
    ~35% of verify's time in a profile; reference counting frees all of it anyway."""
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
    """One pass over the files (files, chain within a file, records) gathers what the checks
    across the archive read next: chain, offsets, anchor, runs, input packets, receipts."""
    report = Report(root)
    info = _archive_info(report, root)
    found = _Found()
    _check_files(report, root, found)
    last_checkpoint = _check_chain(report, root, found.chain_entries)
    _check_offsets(report, info, found.offsets_seen, last_checkpoint)
    if anchors is not None and anchors.asked:
        _check_anchor(report, anchors, info, found.chain_entries)
    _check_runs(report, found, frames_archived=bool(info.get("frames_topic")))
    check_input_packets(report, found.events)
    check_receipts(report, found.events, found.tenants, bool(info.get("receipts_topic")))
    return report


# --- files: archive.json, manifests and their container files -------------------------------


def _archive_info(report: Report, root: Path) -> dict[str, Any]:
    """archive.json (what the archive holds: its topics, its id); {} when there is none."""
    described = root / "archive.json"
    if not described.exists():
        report.fail("files", str(root), "no archive.json: not an audit archive, or it was removed")
        return {}
    try:
        info: dict[str, Any] = json.loads(described.read_text())
        if info.get("format") != FORMAT:
            report.fail("files", "archive.json", f"format {info.get('format')!r}, not {FORMAT}")
    except ValueError as exc:
        report.fail("files", "archive.json", f"not JSON ({exc})")
        return {}
    return info


def _check_files(report: Report, root: Path, found: _Found) -> None:
    """Every container file has its manifest; each manifest, its file checked (_check_file)."""
    avros, manifests = archive_files(root)
    report.files = len(avros)
    manifest_set = set(manifests)
    for avro in avros:
        if manifest_path(avro) not in manifest_set:
            report.fail("files", str(avro.relative_to(root)),
                        "no manifest beside it (deleted?): its blocks cannot be proven")
    readers = _Readers()
    for mpath in manifests:
        _check_manifest(report, root, mpath, readers, found)


def _check_manifest(report: Report, root: Path, mpath: Path, readers: _Readers,
                    found: _Found) -> None:
    """A manifest whole (its lines, its header line, sealed) and its file there; the blocks it
    records join the chain."""
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
        return
    for entry in manifest.blocks:
        found.chain_entries.append((entry.get("chain_index", -1), rel, entry))
    if manifest.seal is None:
        report.note("files", rel, "not sealed (a writer has it open, or it crashed and "
                    "`audit run` has not recovered it yet)")
    if not avro.exists():
        report.fail("files", rel, f"missing: {rel_manifest} records "
                    f"{len(manifest.blocks)} block(s) of it")
        return
    _check_file(report, rel, avro.read_bytes(), manifest, readers, found,
                tenant_of_dir(avro.parent.parent))


# --- chain within a file: header, blocks against the manifest, hashes -------------------------


def _check_file(report: Report, rel: str, data: bytes, manifest: Any, readers: _Readers,
                found: _Found, tenant: str) -> None:
    """One container file against its manifest (header, blocks, hashes), then the records of
    each block the manifest recorded."""
    header = _check_header(report, rel, data, manifest.header)
    if header is None:
        return
    recorded = manifest.blocks
    scan, matched = _match_blocks(report, rel, data, header, recorded)
    for index, block in enumerate(scan.blocks):
        m_index = matched.get(index)
        if m_index is None:
            continue  # modified or inserted: its records are not the archive's
        entry = recorded[m_index]
        where = f"{rel} block {m_index}"
        _check_block_hash(report, where, entry, data[block.start:block.start + block.length])
        records = _block_records(report, where, readers, header.codec,
                                 data[block.data_start:block.data_start + block.data_length],
                                 block.count)
        if records is not None:
            _read_records(report, where, records, entry.get("offsets", {}), readers, found,
                          tenant)


def _check_header(report: Report, rel: str, data: bytes, header_entry: dict[str, Any]) -> Any:
    """The file's header, the one its manifest recorded, of the audit record's schema; None
    when it cannot be read."""
    try:
        header = parse_header(data)
    except (ValueError, IndexError) as exc:
        report.fail("chain", rel, f"header unreadable ({exc})")
        return None
    if hashlib.sha256(data[:header.length]).hexdigest() != header_entry.get("header_sha256"):
        report.fail("chain", f"{rel} header", "the file header differs from the one its "
                    "manifest recorded (schema, codec, metadata or sync marker changed)")
    found = _schema_fingerprint(header)
    if found != CONTAINER_FINGERPRINT:
        report.fail("chain", f"{rel} header", f"record schema {found}, not the audit "
                    f"record's {CONTAINER_FINGERPRINT}")
    return header


def _schema_fingerprint(header: Any) -> str:
    """The fingerprint of the record schema a container header names (or why it has none)."""
    try:
        schema = json.loads(header.metadata.get("avro.schema", b"{}"))
        return fingerprint(to_parsing_canonical_form(parse_schema(schema, {})))
    except Exception as exc:
        return f"unreadable ({exc})"


def _match_blocks(report: Report, rel: str, data: bytes, header: Any,
                  recorded: list[dict[str, Any]]) -> tuple[Any, dict[int, int]]:
    """The file's blocks (the scan) and which manifest line each is (block index → manifest
    index); what differs is named (_diagnose), and an end inside a block."""
    scan = scan_blocks(data, header)
    actual = [hashlib.sha256(data[b.start:b.start + b.length]).hexdigest() for b in scan.blocks]
    report.blocks += len(actual)
    expected: list[Any] = [e.get("sha256") for e in recorded]
    matched: dict[int, int] = {}  # actual index -> manifest index
    if actual != expected:
        _diagnose(report, rel, actual, expected, recorded, scan, len(data), matched)
    else:
        matched = {i: i for i in range(len(actual))}
    _check_scan_end(report, rel, scan, len(data))
    return scan, matched


def _check_scan_end(report: Report, rel: str, scan: Any, size: int) -> None:
    """What the scan of the blocks stopped at: a problem, or an end inside a block (unless a
    truncation was already named)."""
    if scan.problem and scan.torn_at is None:
        report.fail("chain", rel, scan.problem)
    if scan.torn_at is not None and not any(f.where.startswith(rel) and "truncated" in f.message
                                            for f in report.problems):
        report.fail("chain", f"{rel} byte {scan.torn_at}",
                    f"the file ends inside a block ({size} bytes; torn or truncated)"
                    + (f": {scan.problem}" if scan.problem else ""))


def _check_block_hash(report: Report, where: str, entry: dict[str, Any], raw: bytes) -> None:
    """The manifest line's hash is sha256(prev || the block's bytes)."""
    try:
        good = hashlib.sha256(bytes.fromhex(entry["prev"]) + raw).hexdigest() == entry["hash"]
    except (KeyError, ValueError):
        good = False
    if not good:
        report.fail("chain", where, "hash is not sha256(prev || block bytes)")


def _diagnose(report: Report, rel: str, actual: list[str], expected: list[str],
              recorded: list[dict], scan: Any, size: int, matched: dict[int, int]) -> None:
    """Name what differs between the blocks found and the blocks recorded; fills ``matched``
    (found index → manifest index) with the blocks found among the recorded ones."""
    where_expected: dict[str, int] = {}
    for j, digest in enumerate(expected):
        where_expected.setdefault(digest, j)
    found = set(actual)
    missing = [j for j, d in enumerate(expected) if d not in found]
    extra = [i for i, d in enumerate(actual) if d not in where_expected]
    _match_found(actual, where_expected, matched)
    modified = {i for i in extra if i in missing and i not in matched.values()}
    for i in sorted(modified):
        report.fail("chain", f"{rel} block {i}", "modified: its bytes are not the ones the "
                    f"manifest recorded (sha256 {actual[i][:16]}…, recorded {expected[i][:16]}…)")
    _report_missing(report, rel, expected, missing, modified, recorded, scan, size)
    for i in extra:
        if i not in modified:
            report.fail("chain", f"{rel} block {i}", "inserted: a block the manifest does not "
                        f"record (sha256 {actual[i][:16]}…)")
    _report_reordered(report, rel, matched)


def _match_found(actual: list[str], where_expected: dict[str, int],
                 matched: dict[int, int]) -> None:
    for i, digest in enumerate(actual):
        at = where_expected.get(digest)
        if at is not None and at not in matched.values():
            matched[i] = at


def _report_missing(report: Report, rel: str, expected: list[str], missing: list[int],
                    modified: set[int], recorded: list[dict], scan: Any, size: int) -> None:
    """Recorded blocks the file lacks: its end cut off (truncated), or each one removed."""
    recorded_end = (recorded[-1]["start"] + recorded[-1]["length"]) if recorded else 0
    truncated = size < recorded_end and missing and missing == list(
        range(len(expected) - len(missing), len(expected)))
    if truncated:
        torn = f", and ends inside block {len(scan.blocks)}" if scan.torn_at is not None else ""
        report.fail("chain", f"{rel} block {missing[0]}",
                    f"truncated: the file has {size} of {recorded_end} bytes; block(s) "
                    f"{ranges([j for j in missing if j not in modified])} missing{torn}")
        return
    for j in missing:
        if j not in modified:
            report.fail("chain", f"{rel} block {j}", "removed: recorded in the manifest "
                        f"(sha256 {expected[j][:16]}…) but not in the file")


def _report_reordered(report: Report, rel: str, matched: dict[int, int]) -> None:
    order = [matched[i] for i in sorted(matched)]
    in_order = sorted(order)
    if order == in_order:
        return
    moved = [j for k, j in enumerate(order) if j != in_order[k]]
    report.fail("chain", f"{rel} blocks {', '.join(map(str, sorted(moved)))}",
                "reordered: found in the order "
                f"{', '.join(map(str, order))} of the manifest's blocks")


# --- records: each block's records read, events and frames gathered ---------------------------


def _block_records(report: Report, where: str, readers: _Readers, codec_name: str,
                   data: bytes, count: int) -> list[list[Any]] | None:
    """The block's records (its data decompressed); None, a failure, when they cannot be read."""
    try:
        return readers.records(decompress(codec_name, data), count)
    except Exception as exc:
        report.fail("records", where, f"cannot be read ({exc})")
        return None


def _read_records(report: Report, where: str, records: list[list[Any]],
                  spans: dict[str, Any], readers: _Readers, found: _Found, tenant: str) -> None:
    """The records check of one block — every record inside the offsets its manifest line
    states, archived once, with a value, that decodes — and each event (of the directory's
    tenant) or frame gathered for the runs check. Verify's hot path: one loop, the current
    schema's events read by the projection; the rest leaves it (_not_an_event, _undecodable)."""
    project, event_heads = readers.project, readers.event_heads
    events, tenants, offsets_seen = found.events, found.tenants, found.offsets_seen
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
            report.fail("records", where, f"{_where(topic, partition, offset)} lies outside the "
                        "offsets its manifest line states")
        if offset in seen:
            report.fail("records", where, f"{_where(topic, partition, offset)} archived twice")
        seen.add(offset)
        if value is None:
            report.fail("records", where,
                        f"{_where(topic, partition, offset)}: no value (tombstone)")
            continue
        try:
            fast = project(value, 10) if value[:10] in event_heads else None
            if fast is not None:
                (run_id, rec_tenant, kind, seq, frame_id, transport, body_len, payload,
                 piece) = fast
                if piece is not None:
                    piece = (piece["index"], piece["count"])
            else:
                name, obj = readers.read(value)
                if name in EVENT_NAMES:
                    (run_id, rec_tenant, kind, seq, frame_id, transport, body_len, piece,
                     payload) = _event_fields(obj)
        except Exception as exc:
            _undecodable(report, where, _where(topic, partition, offset), value, tenant, exc)
            continue
        if fast is None and name not in EVENT_NAMES:
            _not_an_event(report, where, _where(topic, partition, offset), name, obj, found)
            continue
        report.events += 1
        if rec_tenant != tenant:
            report.fail("records", where, f"{_where(topic, partition, offset)}: an event of "
                        f"tenant {rec_tenant!r} under tenant {tenant!r}")
        tenants.setdefault(run_id, rec_tenant)
        events[run_id][seq].append(_Event(
            value, kind, frame_id, transport, body_len, piece,
            _object_id(payload) if kind == "run.started" else None,
            payload if kind in TOOL_KINDS else None))


def _undecodable(report: Report, where: str, place: str, value: bytes, tenant: str,
                 exc: Exception) -> None:
    """A value that is not the events' contract: an input packet (inputs.py) or a tool receipt
    (receipts.py) is taken here, off the events' path; anything else fails."""
    if take_input_packet(report, value, place, tenant) or take_receipt(report, value, place,
                                                                        tenant):
        return
    report.fail("records", where, f"{place} cannot be decoded: {exc}")


def _not_an_event(report: Report, where: str, place: str, name: str, obj: Any,
                  found: _Found) -> None:
    """A decoded record other than an event: a frame is gathered (the frames check), anything
    else fails."""
    if name not in FRAME_NAMES:
        report.fail("records", where, f"{place}: a {name}, not an event or frame")
        return
    report.frames += 1
    if isinstance(obj, dict):
        key = (obj["tenant"], obj["run_key"], obj["frame_id"])
    else:
        key = (obj.tenant, obj.run_key, obj.frame_id)
    found.frames.add(key)
    found.frame_keys[(key[0], key[2])].add(key[1])


# --- chain across files, offsets, anchor ------------------------------------------------------


def _check_chain(report: Report, root: Path,
                 entries: list[tuple[int, str, dict]]) -> dict[str, Any] | None:
    """The chain checks across files; returns the last checkpoint line."""
    by_index = _chain_index(report, entries)
    indices = sorted(by_index)
    checkpoints, torn = read_checkpoints(root)
    last = checkpoints[-1] if checkpoints else None
    _check_chain_whole(report, by_index, indices, last)
    _check_links(report, by_index, indices)
    _check_head(report, by_index, indices, last)
    if torn:
        report.note("chain", CHECKPOINTS, "its last line is cut off (recovered at the next run)")
    return last


def _chain_index(report: Report, entries: list[tuple[int, str, dict]]
                 ) -> dict[int, list[tuple[str, dict]]]:
    """Chain index → the (file, manifest line) recording it; an index recorded twice fails.
    Sorts ``entries`` in place (the anchor check reads them in chain order)."""
    entries.sort(key=lambda item: item[0])
    by_index: dict[int, list[tuple[str, dict]]] = defaultdict(list)
    for index, rel, entry in entries:
        by_index[index].append((rel, entry))
    for index, items in by_index.items():
        if len(items) > 1:
            report.fail("chain", f"chain block {index}",
                        "recorded twice: " + ", ".join(f"{r} block {e.get('block')}"
                                                       for r, e in items))
    return by_index


def _check_chain_whole(report: Report, by_index: dict[int, list[tuple[str, dict]]],
                       indices: list[int], last: dict[str, Any] | None) -> None:
    """No chain index missing up to the last block recorded or checkpointed."""
    expected_last = last["chain_index"] if last else (indices[-1] if indices else -1)
    present = set(indices)
    absent = [i for i in range(0, max(expected_last, indices[-1] if indices else -1) + 1)
              if i not in present]
    if not absent:
        return
    before = by_index.get(absent[0] - 1)
    around = f" — after {before[0][0]} block {before[0][1].get('block')}" if before else ""
    report.fail("chain", f"chain blocks {ranges(absent)}",
                "missing from every manifest (a file and its manifest removed?)" + around)


def _check_links(report: Report, by_index: dict[int, list[tuple[str, dict]]],
                 indices: list[int]) -> None:
    """Each block links to the one before (the first to the genesis); a gap is named once."""
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


def _check_head(report: Report, by_index: dict[int, list[tuple[str, dict]]],
                indices: list[int], last: dict[str, Any] | None) -> None:
    """The last checkpoint names the head the manifests record (the report's head); blocks
    after it are a note."""
    if last is None:
        if indices:
            report.fail("chain", CHECKPOINTS, "missing: no checkpoint names the chain's head")
        return
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


def _check_offsets(report: Report, info: dict[str, Any],
                   offsets_seen: dict[tuple[str, int], set[int]],
                   last_checkpoint: dict[str, Any] | None) -> None:
    # Compaction leaves holes in run-inputs' offsets; the other topics have none (offsets.py).
    gapless = {info[k] for k in ("events_topic", "frames_topic", "receipts_topic")
               if isinstance(info.get(k), str)}
    check_offset_holes(report, offsets_seen, gapless, last_checkpoint)


def _check_anchor(report: Report, anchors: Anchors, info: dict[str, Any],
                  chain_entries: list[tuple[int, str, dict]]) -> None:
    """The archive against the heads kept outside it (anchor.py)."""
    chain = Chain(info.get("archive_id"))
    for index, _rel, entry in chain_entries:
        chain.hashes.setdefault(index, str(entry.get("hash")))
        chain.offsets.setdefault(index, entry.get("offsets") or {})
    check_anchors(report, anchors, chain)
    report.anchored = not any(f.check in ("anchor", "digests") for f in report.problems)


# --- runs: seq, copies, pieces, envelopes, frames ---------------------------------------------


def _check_runs(report: Report, found: _Found, frames_archived: bool) -> None:
    events = found.events
    report.runs = len(events)
    for run_id in sorted(events):
        by_seq = events[run_id]
        seqs = sorted(by_seq)
        chosen = _first_copies(report, run_id, by_seq, seqs)
        missing = _check_seqs(report, run_id, chosen, seqs)
        _check_events(report, run_id, found.tenants[run_id], chosen, seqs, missing,
                      found if frames_archived else None)


def _first_copies(report: Report, run_id: str, by_seq: dict[int, list[_Event]],
                  seqs: list[int]) -> dict[int, _Event]:
    """seq → the run's event (its first copy): a different event under the same seq fails,
    identical copies are a note."""
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
    return chosen


def _check_seqs(report: Report, run_id: str, chosen: dict[int, _Event],
                seqs: list[int]) -> list[int]:
    """seq contiguous from 0 (a terminal run must be whole; one without run.finished is open,
    a note); returns the seqs missing."""
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
    return missing


def _check_events(report: Report, run_id: str, tenant: str, chosen: dict[int, _Event],
                  seqs: list[int], missing: list[int], frames: _Found | None) -> None:
    """Each event of the run, an event in pieces taken whole: it carries its provider envelope
    (envelopes) and, when ``frames`` were archived, the frame it names is there (frames)."""
    object_ids = {e.object_id for e in chosen.values() if e.object_id}
    position = 0
    while position < len(seqs):
        seq = seqs[position]
        event = chosen[seq]
        span: list[Any] | None = None  # an event's pieces (None: one whole event)
        if event.piece is not None:
            span = _whole_pieces(report, run_id, seq, event.piece, chosen, missing)
            if span is None:
                position += 1
                continue
            position += len(span)
        else:
            position += 1
        body_len = event.body_len if span is None else sum(e.body_len for e in span)
        if body_len == 0 and not event.frame_id.endswith(CLOSE_SUFFIX):
            report.fail("envelopes", f"run {run_id} seq {seq}",
                        f"{event.kind} carries no provider envelope")
        # The events the executor and the gateway's approvals write to ingest (transport
        # EXECUTOR) come from no provider frame.
        if (frames is not None and not event.frame_id.startswith(NO_FRAMES)
                and event.transport != EXECUTOR):
            frame_id = event.frame_id.removesuffix(CLOSE_SUFFIX)
            if (tenant, run_id, frame_id) not in frames.frames and not (
                    frames.frame_keys.get((tenant, frame_id), set()) & object_ids):
                report.fail("frames", f"run {run_id} seq {seq}",
                            f"no archived frame {frame_id} for this {event.kind}")


def _whole_pieces(report: Report, run_id: str, seq: int, piece: tuple[int, int],
                  chosen: dict[int, _Event], missing: list[int]) -> list[_Event] | None:
    """The pieces of the event whose first piece is at ``seq``; None (a failure, unless seqs
    are missing: the runs check named that) when they do not stand in a whole run of pieces."""
    index, count = piece
    group = [chosen.get(seq + k) for k in range(count)] if index == 0 else []
    if index != 0 or any(g is None or g.piece != (k, count) for k, g in enumerate(group)):
        if not missing:
            report.fail("runs", f"run {run_id} seq {seq}",
                        f"piece {index + 1} of {count} does not stand in a whole run of pieces")
        return None
    return group  # type: ignore[return-value]  # no None in it: checked above
