"""The frame journal's files (services/gateway/spool/segments.py): records come back in the
order they were appended, across segments and restarts; what was acknowledged is gone from the
disk; a record torn by a crash, or damaged, is skipped with a log and the rest kept."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from modelevents.schemas.errors import ConfigError
from modelevents.services.gateway.spool.segments import MAGIC, SegmentLog


def payloads(count: int, start: int = 0, size: int = 100) -> list[bytes]:
    return [f"record {i:05d} ".encode().ljust(size, b".") for i in range(start, start + count)]


def drain(journal: SegmentLog, batch: int = 7) -> list[bytes]:
    """Every record held, oldest first, acknowledged as it is read."""
    read: list[bytes] = []
    while journal.records:
        taken = journal.peek(batch, 10_000)
        read += taken.payloads
        journal.ack(taken.end)
    return read


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.seg"))


def reopened_after(directory: Path, records: list[bytes], damage: Callable[[Path], None],
                   caplog: pytest.LogCaptureFixture) -> SegmentLog:
    """The journal holding ``records`` in one segment, closed, the segment damaged, opened
    again (its logs in ``caplog``)."""
    journal = SegmentLog.open(directory, max_bytes=1024 * 1024)
    journal.append(records)
    journal.close()
    [segment] = segments(directory)
    damage(segment)
    with caplog.at_level(logging.WARNING, logger="modelevents.gateway.journal"):
        return SegmentLog.open(directory, max_bytes=1024 * 1024)


def test_records_come_back_in_order_across_segments_and_drained_segments_are_deleted(
        tmp_path: Path) -> None:
    journal = SegmentLog.open(tmp_path, max_bytes=64 * 1024)  # 8 KiB segments
    records = payloads(300)
    for start in range(0, 300, 25):
        assert journal.append(records[start:start + 25]) == 25
    assert len(segments(tmp_path)) > 2, "several segments, or the test shows nothing"
    assert journal.records == 300
    assert journal.size == sum(8 + len(r) for r in records)

    first = journal.peek(50, 100_000)
    journal.ack(first.end)
    assert first.payloads == records[:50]
    assert journal.records == 250
    assert drain(journal) == records[50:]
    assert journal.records == 0 and journal.size == 0
    assert segments(tmp_path) == [], "drained segments stay on disk"
    journal.close()


def test_a_restart_finds_what_was_not_acknowledged_and_only_that(tmp_path: Path) -> None:
    journal = SegmentLog.open(tmp_path, max_bytes=64 * 1024)
    records = payloads(120)
    journal.append(records[:60])
    journal.append(records[60:])
    batch = journal.peek(45, 100_000)
    journal.ack(batch.end)
    journal.close()  # as a killed process leaves it: nothing flushed at close

    again = SegmentLog.open(tmp_path, max_bytes=64 * 1024)
    assert again.records == 75
    again.append(payloads(5, start=120))
    assert drain(again) == records[45:] + payloads(5, start=120)
    again.close()


def test_a_torn_last_record_is_skipped_with_a_log_and_the_rest_kept(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def torn(segment: Path) -> None:
        with segment.open("r+b") as file:  # the crash came in the middle of the last record
            file.truncate(segment.stat().st_size - 30)

    records = payloads(10)
    again = reopened_after(tmp_path, records, torn, caplog)
    assert again.records == 9
    assert any("torn record" in r.getMessage() and "9 records before it are kept"
               in r.getMessage() for r in caplog.records), caplog.text
    # Appended after the repair, a record follows the kept ones (not the torn bytes).
    again.append([b"after the restart"])
    assert drain(again) == records[:9] + [b"after the restart"]
    again.close()


def test_a_torn_record_header_is_skipped_too(tmp_path: Path,
                                             caplog: pytest.LogCaptureFixture) -> None:
    def torn(segment: Path) -> None:
        with segment.open("ab") as file:
            file.write(b"\x10\x00\x00")  # three bytes of the next record's header

    again = reopened_after(tmp_path, payloads(3), torn, caplog)
    assert drain(again) == payloads(3)
    assert "torn record" in caplog.text
    again.close()


def test_a_damaged_record_in_the_middle_is_skipped_and_the_records_around_it_kept(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def flipped(segment: Path) -> None:
        data = bytearray(segment.read_bytes())
        third = len(MAGIC) + 2 * (8 + 100)
        data[third + 8 + 50] ^= 0xFF  # a flipped bit inside the third record's payload
        segment.write_bytes(bytes(data))

    records = payloads(5)
    again = reopened_after(tmp_path, records, flipped, caplog)
    assert "fails its checksum" in caplog.text
    assert drain(again) == records[:2] + records[3:]
    again.close()


def test_a_file_that_is_no_segment_is_kept_aside_and_the_others_read(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    journal = SegmentLog.open(tmp_path, max_bytes=64 * 1024)
    records = payloads(200)
    journal.append(records[:100])
    journal.append(records[100:])
    journal.close()
    first, *rest = segments(tmp_path)
    assert rest
    first.write_bytes(b"not a journal at all")
    with caplog.at_level(logging.ERROR, logger="modelevents.gateway.journal"):
        again = SegmentLog.open(tmp_path, max_bytes=64 * 1024)
    assert "is not a journal segment" in caplog.text
    assert first.with_suffix(".bad").exists()
    read = drain(again)
    assert read and read == records[200 - len(read):], "the later segments' records, in order"
    again.close()


def test_a_full_journal_takes_what_fits_in_order(tmp_path: Path) -> None:
    journal = SegmentLog.open(tmp_path, max_bytes=4096)
    records = payloads(100)  # 108 bytes each with their header: 37 fit
    taken = journal.append(records)
    assert taken == 4096 // 108
    assert journal.size <= 4096
    assert journal.append(records[taken:]) == 0, "no room: nothing more taken"
    batch = journal.peek(10, 100_000)
    journal.ack(batch.end)
    assert journal.append(records[taken:]) == 10, "what was acknowledged is room again"
    assert drain(journal) == records[10:taken + 10]
    journal.close()


def test_one_process_at_a_time_holds_a_journal(tmp_path: Path) -> None:
    journal = SegmentLog.open(tmp_path, max_bytes=4096)
    with pytest.raises(ConfigError, match="in use by another process.*instance_id"):
        SegmentLog.open(tmp_path, max_bytes=4096)
    journal.close()
    SegmentLog.open(tmp_path, max_bytes=4096).close()


def test_a_crash_between_acknowledging_a_segment_and_deleting_it_sends_nothing_twice(
        tmp_path: Path) -> None:
    journal = SegmentLog.open(tmp_path, max_bytes=64 * 1024)
    records = payloads(200)
    journal.append(records[:100])
    journal.append(records[100:])
    first = segments(tmp_path)[0]
    kept = first.read_bytes()
    read: list[bytes] = []
    while not read or journal.peek(1, 100).end.segment == 0:
        batch = journal.peek(7, 100_000)
        read += batch.payloads
        journal.ack(batch.end)
    journal.close()
    first.write_bytes(kept)  # the segment acknowledged to its end is back: the unlink was lost

    again = SegmentLog.open(tmp_path, max_bytes=64 * 1024)
    assert read + drain(again) == records
    again.close()


def test_a_cursor_left_beside_newer_segments_never_hides_their_records(tmp_path: Path) -> None:
    journal = SegmentLog.open(tmp_path, max_bytes=64 * 1024)
    for start in range(0, 200, 25):
        journal.append(payloads(25, start))
    last = int(segments(tmp_path)[-1].stem)
    assert last > 0
    drain(journal)
    # A crash while the drained journal was cleared could leave the last cursor behind.
    (tmp_path / "cursor").write_text(f"{last} 4 0\n")
    journal.append(payloads(5, start=200))
    journal.close()

    again = SegmentLog.open(tmp_path, max_bytes=64 * 1024)
    assert drain(again) == payloads(5, start=200)
    again.close()


def test_one_large_append_is_cut_into_segments_whose_space_returns_as_they_drain(
        tmp_path: Path) -> None:
    journal = SegmentLog.open(tmp_path, max_bytes=64 * 1024)  # 8 KiB segments
    records = payloads(400)  # ~43 KB in one append (a long outage's backlog at once)
    assert journal.append(records) == 400
    on_disk = len(segments(tmp_path))
    assert on_disk >= 5
    read: list[bytes] = []
    while len(read) < 250:
        batch = journal.peek(50, 100_000)
        read += batch.payloads
        journal.ack(batch.end)
    assert len(segments(tmp_path)) < on_disk, "drained segments are deleted as the drain goes"
    assert read + drain(journal) == records
    journal.close()
