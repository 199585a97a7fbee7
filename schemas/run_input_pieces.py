"""An input packet too large for one Kafka record travels as pieces (``run_input_piece.avsc``).

    records = packet_records(packet)         # [(key, value)]: [(run_id, encode(packet))] or pieces
    assembler = PacketAssembler()
    for key, value in records:               # in offset order, as read from the run's partition
        assembler.feed(value)
    assembler.latest                         # the packet, or None

A request may be up to 4 MiB (``services/gateway/limits``) and its packet as much, while a
record may not exceed :data:`~modelevents.schemas.limits.MAX_RECORD_BYTES`. A packet whose
encoding is larger than :data:`~modelevents.schemas.limits.PIECE_BYTES` is cut, as deliveries and
events are (``pieces.py``): its single-object encoding is sliced into ``count`` runs of bytes,
each in a ``RunInputPiece`` naming the run, the tenant, ``packet`` (SHA-256 of the whole
encoding: the write they belong to) and ``index``. A packet that fits stays one RunInput record,
byte for byte as before.

**Keys, on a compacted topic.** Compaction keeps the last record of each *key*, so pieces cannot
share one (only the last piece would stay). Piece 0 is keyed ``run_id`` — the key of a whole
packet — and piece ``i`` ``run_id#i`` (``#`` is no id character, ``schemas/ids.py``: no run id
can be mistaken for it). All are written, in index order, to the partition the run id maps to
(the producer is told the partition: the keys differ).

More on this module: docs/schemas.md, ``schemas/run_input_pieces.py``.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

from modelevents.schemas.errors import SchemaError
from modelevents.schemas.limits import PIECE_BYTES
from modelevents.schemas.run_input import (
    RunInput,
    SingleObjectCodec,
    decode,
    encode,
    is_run_input,
)

__all__ = ["RunInputPiece", "PIECE_SCHEMA_PATH", "is_piece", "encode_piece", "decode_piece",
           "packet_records", "piece_key", "is_packet_key", "PacketAssembler", "tenant_of"]

PIECE_SCHEMA_PATH = Path(__file__).parent / "avro" / "inputs" / "run_input_piece.avsc"


@dataclass(frozen=True, slots=True)
class RunInputPiece:
    run_id: str
    tenant: str
    packet: str  # sha256 hex of the whole packet's encoding
    index: int
    count: int
    data: bytes
    redaction_name: str  # the packet's redaction policy (the archive's manifest names it)
    redaction_fingerprint: str


_CODEC = SingleObjectCodec(PIECE_SCHEMA_PATH, "RunInputPiece")


def is_piece(value: bytes | None) -> bool:
    return _CODEC.matches(value)


def encode_piece(piece: RunInputPiece) -> bytes:
    return _CODEC.encode(asdict(piece))


def decode_piece(value: bytes) -> RunInputPiece:
    return RunInputPiece(**_CODEC.decode(value))


def piece_key(run_id: str, index: int) -> str:
    """The Kafka key of piece ``index`` of a packet of ``run_id`` (0: the run id itself)."""
    return run_id if index == 0 else f"{run_id}#{index}"


def is_packet_key(key: bytes | None, run_id: str) -> bool:
    """Whether ``key`` is one a packet of ``run_id`` is written under (whole or piece)."""
    if key is None:
        return False
    own = run_id.encode()
    return key == own or (key.startswith(own + b"#") and key[len(own) + 1:].isdigit())


def packet_records(packet: RunInput, budget: int = PIECE_BYTES) -> list[tuple[str, bytes]]:
    """The (key, value) records that write ``packet``, in the order they must be written."""
    whole = encode(packet)
    if len(whole) <= budget:
        return [(packet.run_id, whole)]
    digest = hashlib.sha256(whole).hexdigest()
    count = -(-len(whole) // budget)
    return [(piece_key(packet.run_id, i), encode_piece(RunInputPiece(
        packet.run_id, packet.tenant, digest, i, count, whole[i * budget:(i + 1) * budget],
        packet.redaction.name, packet.redaction.fingerprint)))
        for i in range(count)]


def tenant_of(value: bytes | None) -> str | None:
    """The tenant of a RunInput or RunInputPiece value (None: neither, or unreadable)."""
    try:
        if is_run_input(value):
            return decode(value).tenant  # type: ignore[arg-type]
        if is_piece(value):
            return decode_piece(value).tenant  # type: ignore[arg-type]
    except SchemaError:
        return None
    return None


class PacketAssembler:
    """Reads the records of ``run-inputs`` in offset order (one or more runs, one partition at a
    time or all interleaved) and joins pieces: ``feed`` gives each packet as it becomes whole
    (a whole record at once, a cut one at its last piece), None otherwise; ``latest`` keeps,
    per run, the packet of the last head read (see the module doc), or None while its pieces
    are missing. Feed only values :meth:`accepts` takes; one that claims to be a packet or a
    piece and cannot be read raises SchemaError."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, str], dict[int, RunInputPiece]] = {}
        self._head: dict[str, str] = {}  # run id → the packet digest of its last head
        self._latest: dict[str, RunInput | None] = {}  # run id → its last head's packet

    @staticmethod
    def accepts(value: bytes | None) -> bool:
        return is_run_input(value) or is_piece(value)

    def feed(self, value: bytes) -> RunInput | None:
        if is_run_input(value):
            packet = decode(value)
            digest = hashlib.sha256(value).hexdigest()
            self._head[packet.run_id] = digest
            self._latest[packet.run_id] = packet
            return packet
        piece = decode_piece(value)
        key = (piece.run_id, piece.packet)
        if piece.index == 0:
            self._head[piece.run_id] = piece.packet
            self._latest[piece.run_id] = None  # until its pieces are read
        # Collected whatever came first (an archive need not keep the offset order); pieces
        # whose head is gone stay open: :meth:`incomplete`.
        collected = self._open.setdefault(key, {})
        collected[piece.index] = piece
        if len(collected) < piece.count:
            return None
        del self._open[key]
        if set(collected) != set(range(piece.count)):
            raise SchemaError(f"run {piece.run_id}: input packet {piece.packet[:12]}… has "
                              f"pieces {sorted(collected)}, not 0..{piece.count - 1}")
        whole = b"".join(collected[i].data for i in range(piece.count))
        if hashlib.sha256(whole).hexdigest() != piece.packet:
            raise SchemaError(f"run {piece.run_id}: the pieces of input packet "
                              f"{piece.packet[:12]}… do not join to it (sha256 differs)")
        packet = decode(whole)
        if self._head.get(piece.run_id) == piece.packet:
            self._latest[piece.run_id] = packet
        return packet

    def latest(self, run_id: str) -> RunInput | None:
        return self._latest.get(run_id)

    def incomplete(self) -> list[tuple[str, str, int, int]]:
        """(run id, packet digest, pieces read, count) of every packet still missing pieces."""
        return [(run_id, digest, len(got), next(iter(got.values())).count if got else 0)
                for (run_id, digest), got in self._open.items()]
