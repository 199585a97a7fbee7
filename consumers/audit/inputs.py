"""``audit verify``'s input-packet check: every run started through the gateway has its packet.

Two calls from ``verify.py``, kept here so that the decode path there stays the events':

    take_input_packet(report, value, where, tenant)   # in the record loop: True when it took it
    check_input_packets(report, events)                # after the runs check

**Which runs were started through the gateway.** The frames of a call the gateway makes have ids
that begin with its call tag, ``c<n>-<8 hex digits>.`` (``schemas/ids.py``: ``CALL_TAG``, the
format ``LocalRuns.next_tag`` makes; ``c0-1a2b3c4d.s0:5``), and every event names its frame
(``source.frame_id``). A run whose first archived event came from such a frame was started by
``POST /v1/runs`` — it must have an input packet in the archive, or verify fails. A run fed
(``modelevents feed``) or forwarded (``/v1/runs/{id}/frames``) has other frame ids: without a
packet it is listed as such, a note, never a failure (a forwarded run may supply one with
``/v1/runs/{id}/input``).

**What holds for each packet.** It decodes (a packet cut into pieces, ``run_input_pieces.py``:
once its pieces are joined; pieces never joined are a note); it sits in its tenant's directory and its tenant is
its run's; its ``fingerprint`` is SHA-256 of its ``request`` (so a request edited after it was
written is found); and a packet of a run whose events are not in the archive is a note.
"""

from __future__ import annotations

from typing import Any, Protocol

from modelevents.schemas.errors import SchemaError
from modelevents.schemas.ids import GATEWAY_FRAME_ID
from modelevents.schemas.run_input import RunInput, decode, request_fingerprint
from modelevents.schemas.run_input_pieces import PacketAssembler, decode_piece, is_piece

__all__ = ["take_input_packet", "check_input_packets", "GATEWAY_FRAME_ID"]



class _Report(Protocol):
    input_packets: dict[str, list[RunInput]]

    def fail(self, check: str, where: str, message: str) -> None: ...

    def note(self, check: str, where: str, message: str) -> None: ...


def _assembler(report: _Report) -> PacketAssembler:
    # The pieces of packets too large for one record (schemas/run_input_pieces.py) are joined
    # across the archive's records; the assembler rides on the report (verify.py's Report
    # names no field for it).
    assembler: PacketAssembler = vars(report).setdefault("_input_pieces", PacketAssembler())
    return assembler


def take_input_packet(report: _Report, value: bytes, where: str, tenant: str) -> bool:
    """Whether ``value`` is an input packet or a piece of one; a packet (whole, or at its last
    piece) is checked and kept on ``report``."""
    if not PacketAssembler.accepts(value):
        return False
    if is_piece(value):
        try:
            piece = decode_piece(value)
            packet = _assembler(report).feed(value)
        except SchemaError as exc:
            report.fail("input", where, f"an input packet's piece that cannot be used: {exc}")
            return True
        if piece.tenant != tenant:
            report.fail("input", f"run {piece.run_id} ({where})", f"a piece of an input packet "
                        f"of tenant {piece.tenant!r} under tenant {tenant!r}")
        if packet is not None:
            _check(report, packet, where, packet.tenant)
        return True
    try:
        packet = decode(value)
    except SchemaError as exc:
        report.fail("input", where, f"an input packet that cannot be decoded: {exc}")
        return True
    _check(report, packet, where, tenant)
    return True


def _check(report: _Report, packet: RunInput, where: str, tenant: str) -> None:
    run = f"run {packet.run_id}"
    if packet.tenant != tenant:
        report.fail("input", f"{run} ({where})", f"an input packet of tenant {packet.tenant!r} "
                    f"under tenant {tenant!r}")
    if request_fingerprint(packet.request) != packet.fingerprint:
        report.fail("input", f"{run} call {packet.call}", "the packet's fingerprint is not "
                    "sha256 of its request: the request was changed after it was written")
    report.input_packets.setdefault(packet.run_id, []).append(packet)


def check_input_packets(report: _Report, events: dict[str, dict[int, list[Any]]]) -> None:
    """Every run started through the gateway has a packet; the others are listed without one.
    ``events``: run id → seq → the archived events (each with ``frame_id``)."""
    packets = report.input_packets
    for run_id in sorted(events):
        by_seq = events[run_id]
        first = by_seq[min(by_seq)][0]
        if run_id in packets:
            continue
        if GATEWAY_FRAME_ID.match(first.frame_id):
            report.fail("input", f"run {run_id}", "started through the gateway (its first event "
                        f"came from call frame {first.frame_id}) but no input packet is archived")
        else:
            report.note("input", f"run {run_id}", "no input packet recorded (a run fed, or "
                        "forwarded without POST /v1/runs/{id}/input)")
    assembler: PacketAssembler | None = vars(report).get("_input_pieces")
    for run_id, digest, read, count in assembler.incomplete() if assembler else []:
        # A write that failed half way (answered 503), or pieces of an earlier revision whose
        # head compaction removed before the archive read them.
        report.note("input", f"run {run_id}", f"{read} of the {count} pieces of input packet "
                    f"{digest[:12]}… are archived: not joined")
    for run_id in sorted(set(packets) - set(events)):
        report.note("input", f"run {run_id}", "an input packet, but none of the run's events "
                    "is in this archive")
