"""``modelevents tail``: print the records of a pipeline topic as JSON lines."""

from __future__ import annotations

import argparse
import base64
import math
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any, BinaryIO

import orjson

from modelevents.consumers.tools.receipts import decode_receipt
from modelevents.schemas import bundle_record
from modelevents.schemas.errors import ConfigError, SchemaError
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.run_input_pieces import (
    PacketAssembler,
    decode_piece,
    is_packet_key,
    is_piece,
)
from modelevents.schemas.run_state import TERMINAL_RUN_STATES, DeadLetter, RunState
from modelevents.services.cli.kafka_options import (
    ENV_HELP,
    add_kafka_options,
    run_async,
    settings_from_args,
)
from modelevents.services.gateway.calls.records import decode_record
from modelevents.services.gateway.events.owners import claim_document
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import TOPICS, PipelineSettings

DEFAULT_TIMEOUT = 10.0
# Topics whose records say when a run is over: a RunState with a terminal status, or the
# run.finished event (a tool loop's calls end in run.awaiting, so run.finished ends the run).
_TERMINAL_TOPICS = ("events", "ingest", "runs")

EXIT_NOT_TERMINAL = 1  # --until-terminal, but the topic went idle first


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tail",
        help="print the records of a pipeline topic (events, runs, dlq, frames, ingest, run-owners, "
             "run-inputs, receipts, calls, capability-probes) as JSON lines",
        description="Read a pipeline topic and print one JSON object per record: a ModelEvent as "
                    "`modelevents normalize` prints it (kind, seq, payload fields, run_id, "
                    "event_id, frame_id, ...), a RunState with all its fields, a DeadLetter with "
                    "the failed record's bytes in base64, a ProviderFrame with its body as text "
                    "(base64 in body_base64 when it is not UTF-8), a run-id claim on run-owners "
                    "as the JSON object the gateway wrote (v, run_id, tenant, claimed_at), an input packet on "
                    "run-inputs with all its fields (one cut into pieces once, at its last "
                    "piece, with _pieces; a piece before it as {\"piece\": ...}), a gateway's "
                    "calls record (a run's latest call, or an Idempotency-Key's answer) as the "
                    "JSON object it wrote, a capability probe as `capabilities probe --json` "
                    "prints it. Stops "
                    "after --timeout seconds without a record, or with --until-terminal when the "
                    "run's terminal state is reached.",
        epilog=ENV_HELP + f" Exit status: 0 ok, {EXIT_NOT_TERMINAL} --until-terminal timed out "
                          "before the run ended, 2 error (Kafka unreachable, topic missing).")
    p.add_argument("--topic", required=True, choices=tuple(TOPICS), help="the topic to read")
    p.add_argument("--run-id", help="only this run's records (its run key on frames and dlq); "
                                    "reads only the partition the run is on")
    p.add_argument("--until-terminal", action="store_true",
                   help="stop when the run is over: on runs a terminal status (completed, "
                        "incomplete, failed, cancelled), on events/ingest its run.finished "
                        "event; needs --run-id")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                   help=f"stop after S seconds without a record (default {DEFAULT_TIMEOUT:g}; "
                        "0 waits for ever)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--from-beginning", dest="from_beginning", action="store_true", default=True,
                       help="start at the earliest record (default)")
    where.add_argument("--latest", dest="from_beginning", action="store_false",
                       help="print only records that arrive from now on")
    p.add_argument("--meta", action="store_true",
                   help="add _topic, _partition, _offset and _key to each line")
    add_kafka_options(p)
    p.set_defaults(run=run)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _json_default(value: object) -> object:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _b64(bytes(value))
    raise TypeError(type(value).__name__)


def record_projection(obj: Any) -> dict[str, Any]:
    """The JSON shape of a contract record, as tail prints it."""
    if isinstance(obj, ModelEvent):
        return obj.projection()
    if isinstance(obj, DeadLetter):
        out = {name: getattr(obj, name) for name in obj.__dataclass_fields__}
        out["record"] = _b64(obj.record)
        return out
    if isinstance(obj, ProviderFrame):
        out = {name: getattr(obj, name) for name in obj.__dataclass_fields__}
        try:
            out["body"] = obj.body.decode("utf-8")
        except UnicodeDecodeError:
            del out["body"]
            out["body_base64"] = _b64(obj.body)
        return out
    if isinstance(obj, RunState):
        out = {name: getattr(obj, name) for name in obj.__dataclass_fields__}
        for name in ("usage", "prior_calls_usage"):
            if out[name] is not None:
                value = out[name]
                out[name] = {f: getattr(value, f) for f in value.__dataclass_fields__}
        return out
    raise TypeError(f"no JSON shape for {type(obj).__name__}")


def claim_projection(rec: clients.Record) -> tuple[dict[str, Any], str | None]:
    """A ``run-owners`` record: the claim's JSON object as written (services/gateway/events/owners.py),
    or why it is not a claim (the gateways skip it: it owns nothing)."""
    doc = claim_document(rec.raw)
    if doc is None:
        return {}, ("not a run-id claim (a JSON object with run_id and tenant); the gateways "
                    "skip it")
    if rec.key != doc["run_id"].encode():
        return {}, (f"a claim of {doc['run_id']!r} keyed {rec.key_text!r}, not by its run id; "
                    "the gateways skip it")
    return doc, None


def calls_projection(rec: clients.Record) -> tuple[dict[str, Any], str | None]:
    """A ``calls`` record: the JSON object the gateway wrote (services/gateway/calls/records.py), or why
    it is not one (the gateways skip it)."""
    try:
        decode_record(rec.key, rec.raw)
    except ValueError as exc:
        return {}, f"not a calls record: {exc}; the gateways skip it"
    return orjson.loads(rec.raw or b""), None


def input_projection(assembler: PacketAssembler, rec: clients.Record
                     ) -> tuple[dict[str, Any], str | None]:
    """A ``run-inputs`` record: its packet (RunInput) with all its fields — a packet cut into
    pieces (``schemas/run_input_pieces.py``) at its last piece, with ``_pieces`` — or, for a
    piece before it, ``{"piece": {...}}`` without its bytes; else why it is neither."""
    raw = rec.raw
    if raw is None or not assembler.accepts(raw):
        return {}, ("tombstone (null value)" if raw is None
                    else "not an input packet (RunInput) nor a piece of one")
    try:
        packet = assembler.feed(raw)
        piece = decode_piece(raw) if is_piece(raw) else None
    except SchemaError as exc:
        return {}, str(exc)
    if packet is not None:
        return {**asdict(packet), **({"_pieces": piece.count} if piece else {})}, None
    assert piece is not None  # a whole packet always gives its packet
    return {"piece": {"run_id": piece.run_id, "tenant": piece.tenant, "packet": piece.packet,
                      "index": piece.index, "count": piece.count,
                      "bytes": len(piece.data)}}, None


def receipt_projection(rec: clients.Record) -> tuple[dict[str, Any], str | None]:
    """A ``receipts`` record: the ToolReceipt's fields (consumers/tools/receipts.py)."""
    try:
        return asdict(decode_receipt(rec.raw or b"")), None
    except (SchemaError, ValueError, EOFError) as exc:
        return {}, f"not a ToolReceipt: {exc}"


def probe_projection(rec: clients.Record) -> tuple[dict[str, Any], str | None]:
    """A ``capability-probes`` record: the CapabilityProbe as ``--json`` prints it."""
    from modelevents.services.migration.probes.record import decode

    try:
        return decode(rec.raw or b"").as_json(), None
    except SchemaError as exc:
        return {}, str(exc)
def bundle_projection(rec: clients.Record) -> tuple[dict[str, Any], str | None]:
    """A ``bundles`` record: the Bundle's record (schemas/bundle_record.py), its free-form JSON
    parts as JSON strings, or why it is not one."""
    try:
        stored = bundle_record.decode(rec.raw or b"")
    except SchemaError as exc:
        return {}, str(exc)
    return bundle_record.record_of(stored.bundle, stored.created_at), None


def terminal_predicate(topic: str, run_id: str) -> Callable[[Any], bool]:
    """True for the record that ends ``run_id`` on ``topic`` (events, ingest or runs)."""
    if topic == "runs":
        return lambda v: isinstance(v, RunState) and v.run_id == run_id and v.status in TERMINAL_RUN_STATES
    if topic in ("events", "ingest"):
        return lambda v: isinstance(v, ModelEvent) and v.run_id == run_id and v.kind == "run.finished"
    raise ConfigError(f"--until-terminal works with --topic {', '.join(_TERMINAL_TOPICS)}; "
                      f"{topic} records do not say when a run is over")


async def tail(settings: PipelineSettings, topic: str, out: BinaryIO, *, run_id: str | None = None,
               until_terminal: bool = False, timeout: float = DEFAULT_TIMEOUT,
               from_beginning: bool = True, meta: bool = False) -> tuple[int, bool]:
    """Write the topic's records to ``out`` as JSON lines; (records written, terminal reached)."""
    until = None
    if until_terminal:
        if run_id is None:
            raise ConfigError("--until-terminal needs --run-id: it stops when that run is over")
        until = terminal_predicate(topic, run_id)
    reached = False
    count = 0
    idle = math.inf if timeout <= 0 else timeout
    full = clients.topic_name(settings, topic)
    claims = full == settings.topic("run-owners")
    # Input packets: pieces joined as read; with --run-id the pieces' keys too (run_id#i).
    inputs = PacketAssembler() if full == settings.topic("run-inputs") else None
    keys = ((lambda key: is_packet_key(key, run_id)) if inputs is not None and run_id is not None
            else None)
    receipts = full == settings.topic("receipts")
    calls = full == settings.topic("calls")
    probes = full == settings.topic("capability-probes")
    bundles = full == settings.topic("bundles")
    async for rec in clients.read_records(settings, topic, run_id=run_id, timeout=idle,
                                           until=until, from_beginning=from_beginning, keys=keys):
        if rec is None:
            continue  # None is an idle tick, which comes only with idle_tick (not asked for here)
        if claims:
            line, error = claim_projection(rec)
        elif inputs is not None:
            line, error = input_projection(inputs, rec)
        elif receipts:
            line, error = receipt_projection(rec)
        elif calls:
            line, error = calls_projection(rec)
        elif probes:
            line, error = probe_projection(rec)
        elif bundles:
            line, error = bundle_projection(rec)
        elif rec.error is not None:
            line, error = {}, rec.error
        else:
            line, error = record_projection(rec.value), None
        meta_too = meta
        if error is not None:
            line = {"error": error, "record": _b64(rec.raw)}
            meta_too = True
        if meta_too:
            line.update(_topic=rec.topic, _partition=rec.partition, _offset=rec.offset,
                        _key=rec.key_text)
        out.write(orjson.dumps(line, default=_json_default) + b"\n")
        out.flush()
        count += 1
        if until is not None and rec.error is None and until(rec.value):
            reached = True
    return count, reached


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    if args.until_terminal and args.run_id is None:
        raise ConfigError("--until-terminal needs --run-id: it stops when that run is over")
    if args.until_terminal:
        terminal_predicate(args.topic, args.run_id)  # refuse frames/dlq before connecting
    count, reached = run_async(tail(settings, args.topic, sys.stdout.buffer, run_id=args.run_id,
                                    until_terminal=args.until_terminal, timeout=args.timeout,
                                    from_beginning=args.from_beginning, meta=args.meta))
    what = f"{count} records from {settings.topic(args.topic)}"
    if args.until_terminal and not reached:
        print(f"{what}; run {args.run_id} did not reach a terminal state before {args.timeout:g} s "
              f"without records", file=sys.stderr)
        return EXIT_NOT_TERMINAL
    reason = "run ended" if reached else f"idle for {args.timeout:g} s"
    print(f"{what} ({reason})", file=sys.stderr)
    return 0
