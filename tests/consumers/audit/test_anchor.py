"""An audit archive against the heads kept outside it, and offset holes, without a broker
(consumers/audit/anchor.py, offsets.py, heads.py): archives written by the real
AuditWriter with the digests a run writes. The same through `modelevents audit` on the real
broker, the heads topic included: tests/integration/audit/test_anchor.py."""

from __future__ import annotations

import shutil
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from modelevents.consumers.audit.anchor import Anchors
from modelevents.consumers.audit.heads import DIGESTS, DigestWriter, digest_files
from modelevents.consumers.audit.verify import verify_archive
from modelevents.consumers.audit.writer import AuditWriter, read_checkpoints
from tests.consumers.audit.test_inputs import _packet
from tests.consumers.audit.test_verify import SOURCE, TS, _records

KEY = Ed25519PrivateKey.generate()


def numbered(records, start: int = 0):
    """(topic, partition, offset, key, value): consecutive offsets per partition from ``start``."""
    next_offset: dict[tuple[str, int], int] = {}
    out = []
    for topic, partition, key, value in records:
        offset = next_offset.get((topic, partition), start)
        next_offset[(topic, partition)] = offset + 1
        out.append((topic, partition, offset, key, value))
    return out


def write(root: Path, records, *, key=KEY, checkpoint_every: int = 40, source=SOURCE) -> str:
    """An archive of ``records`` with a signed digest per checkpoint, as `audit run` writes it;
    returns its head hash."""
    writer = AuditWriter(root, block_records=7, source=source)
    digests = DigestWriter(root, writer.archive_id, key)
    for n, (topic, partition, offset, k, value) in enumerate(records, 1):
        writer.add(topic, partition, offset, TS, k, value)
        if n % checkpoint_every == 0 and writer.checkpoint() is not None:
            digests.write(writer.last_checkpoint)
    if writer.checkpoint() is not None:
        digests.write(writer.last_checkpoint)
    writer.close()
    return read_checkpoints(root)[0][-1]["hash"]


def checks(report, check: str) -> list[str]:
    return [f"{f.where}: {f.message}" for f in report.problems if f.check == check]


def rewrite(original: Path, into: Path, *, drop_run: str, cut_run: str, cut: int) -> None:
    """The attack: the project's own writer makes a copy without one run and with another cut
    short, offsets renumbered so that no hole shows, under the original's archive.json."""
    records = numbered(_records())
    cut_values = [r for r in records if r[3] == cut_run.encode() and r[0] == "t.events"][-cut:]
    kept = [(t, p, k, v) for t, p, _o, k, v in records
            if k != drop_run.encode() and (t, p, _o, k, v) not in cut_values]
    write(into, numbered(kept), key=None)
    shutil.copy(original / "archive.json", into / "archive.json")


def test_an_untouched_archive_holds_its_anchors(tmp_path: Path) -> None:
    root = tmp_path / "a"
    head = write(root, numbered(_records()))
    assert len(digest_files(root / DIGESTS)) >= 3
    report = verify_archive(root, Anchors(expect_head=head, digests=root / DIGESTS,
                                          public_key=KEY.public_key()))
    assert report.ok and report.anchored, report.problems
    assert verify_archive(root).anchored is None


def test_a_rewritten_archive_verifies_alone_and_fails_its_anchors(tmp_path: Path) -> None:
    original, doctored = tmp_path / "a", tmp_path / "b"
    head = write(original, numbered(_records()))
    runs = sorted({k.decode() for _t, _p, k, _v in _records()})
    rewrite(original, doctored, drop_run=runs[0], cut_run=runs[1], cut=2)
    assert verify_archive(doctored).ok  # the chain alone cannot tell
    report = verify_archive(doctored, Anchors(expect_head=head))
    assert not report.ok and report.anchored is False
    assert "no chain block of this archive has this hash" in checks(report, "anchor")[0]
    report = verify_archive(doctored, Anchors(digests=original / DIGESTS,
                                              public_key=KEY.public_key()))
    found = checks(report, "digests")
    assert any("rewritten" in f or "cut short" in f for f in found), found
    # The doctored copy's own digests are unsigned: the operator's key refuses them.
    report = verify_archive(doctored, Anchors(digests=doctored / DIGESTS,
                                              public_key=KEY.public_key()))
    assert any("not signed" in f for f in checks(report, "digests")), report.problems


def test_a_head_signed_with_another_key_fails(tmp_path: Path) -> None:
    root = tmp_path / "a"
    write(root, numbered(_records()))
    other = Ed25519PrivateKey.generate().public_key()
    report = verify_archive(root, Anchors(digests=root / DIGESTS, public_key=other))
    assert checks(report, "digests") and all("signed by another key" in f
                                             for f in checks(report, "digests"))


def test_a_deleted_digest_breaks_the_digest_chain(tmp_path: Path) -> None:
    root = tmp_path / "a"
    write(root, numbered(_records()))
    copy = tmp_path / "kept-elsewhere"
    shutil.copytree(root / DIGESTS, copy)
    files = digest_files(copy)
    files[1].unlink()
    report = verify_archive(root, Anchors(digests=copy, public_key=KEY.public_key()))
    assert [f.split(": ", 1)[0] for f in checks(report, "digests")] == [str(files[2])]
    assert "was deleted" in checks(report, "digests")[0]


def test_a_record_removed_from_the_middle_is_an_offset_hole(tmp_path: Path) -> None:
    records = numbered(_records())
    events = [r for r in records if r[0] == "t.events" and r[1] == 0]
    gone = events[len(events) // 2]
    root = tmp_path / "a"
    write(root, [r for r in records if r is not gone])
    report = verify_archive(root)
    assert checks(report, "offsets") == [
        f"t.events:0: offsets {gone[2]} missing of 0..{events[-1][2]} (archived from 0, the "
        f"last checkpoint names {events[-1][2]} as archived): records removed from the "
        "archive, or the archive was rewritten without them"]


def test_an_archive_starting_above_offset_zero_has_no_hole(tmp_path: Path) -> None:
    root = tmp_path / "a"
    write(root, numbered(_records(), start=1000))  # retention took what came before
    assert verify_archive(root).ok


def test_holes_of_the_compacted_run_inputs_are_not_failed(tmp_path: Path) -> None:
    source = {**SOURCE, "inputs_topic": "t.run-inputs"}
    root = tmp_path / "a"
    packets = [_packet("run_a"), _packet("run_b")]
    # Compaction removed offsets 1..4 (earlier packets of run_b) before the archive read them.
    write(root, [(t, p, offset, k, v) for offset, (t, p, k, v) in zip((0, 5), packets)],
          source=source)
    report = verify_archive(root)
    assert checks(report, "offsets") == [] and report.ok, report.problems
