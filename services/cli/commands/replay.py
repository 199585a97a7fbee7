"""``modelevents replay state|parity|export|import``: check and move the pipeline's log.

services/cli/main.py loads this module by its dotted path (``COMMAND_MODULES``). Reports go to stdout
(``--json`` for JSON lines), progress and warnings to stderr. Exit status: 0 when everything
compared equal (or the export/import is complete), 1 when something differs or a record could
not be read, 2 for an error that stopped the command (no such run, empty range, unreadable
file, unreachable broker).
"""

from __future__ import annotations

import argparse
import base64
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from modelevents.consumers.replay import checks, export
from modelevents.consumers.replay.topic_snapshot import Start, format_ms
from modelevents.schemas.errors import ConfigError, InputError
from modelevents.schemas.events import Usage, payload_dict
from modelevents.services.cli.kafka_options import (
    ENV_HELP,
    add_kafka_options,
    run_async,
    settings_from_args,
)

EXIT_OK = 0
EXIT_DIFFERS = 1
_MAX_VALUE = 160  # characters of a value shown in a text report


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "replay",
        help="rebuild run state and re-normalize frames to check what the pipeline published; "
             "export and import archives",
        description="Check the pipeline's log against itself and move it between clusters. "
                    "`state` rebuilds run state from the events topic and compares it with the "
                    "runs topic; `parity` re-normalizes the frames topic through the current "
                    "adapters and compares with the events topic; `export` writes a run or a time "
                    "range to an Avro object container file; `import` produces such a file's "
                    "records again.",
        epilog="Exit status: 0 equal / done, 1 something differs or could not be read, 2 error. "
               + ENV_HELP)
    sub = parser.add_subparsers(dest="replay_command", metavar="ACTION", required=True)

    p = sub.add_parser(
        "state", help="rebuild run state from events and compare it with the runs topic",
        description="Read the events topic (from the beginning, an offset or a time), dedupe by "
                    "(run_id, seq), fold each run's events through the run state machine into a "
                    "fresh view, and compare it field by field with the latest RunState on the "
                    "runs topic. Per run: equal, differs (which fields), missing (no record on "
                    "one side) or partial (the range starts inside the run: not compared).",
        epilog="Exit status: 0 every run equal (or partial), 1 a run differs or is missing, or a "
               "record could not be read, 2 error.")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--from-offset", type=int, metavar="N",
                       help="start at offset N of every partition of the events topic")
    where.add_argument("--from-time", metavar="ISO",
                       help="start at the first event written at or after this time "
                            "(2026-11-30T10:00:00Z; no offset means UTC; or epoch milliseconds)")
    where.add_argument("--archive", metavar="DIR", type=Path,
                       help="rebuild from the events of an audit archive (modelevents audit "
                            "run) instead of the events topic")
    p.add_argument("--run-id", help="check only this run")
    p.add_argument("--ignore", action="append", default=[], metavar="FIELD[,FIELD]",
                   help="RunState fields not to compare (repeatable), e.g. updated_at")
    _report_options(p)
    add_kafka_options(p)
    p.set_defaults(run=run_state)

    p = sub.add_parser(
        "parity", help="re-normalize frames through the current adapters and diff with events",
        description="Read the frames topic, group the frames per run in log order (frames the "
                    "processor re-keyed to a run, such as a webhook or poll keyed by a provider "
                    "object id, join that run), translate them with the current adapters through "
                    "the processor's own per-run normalizer, dedupe by event id, and compare the "
                    "sequence with the run's events on the events topic after dedupe by seq: "
                    "event id, kind, payload and source at every position. Reports the first "
                    "differing event and counts — adapter parity after a fix.",
        epilog="Exit status: 0 every run equal, 1 a run differs or has only frames or only "
               "events, 2 error.")
    p.add_argument("--run-id", help="check only this run")
    _report_options(p)
    add_kafka_options(p)
    p.set_defaults(run=run_parity)

    p = sub.add_parser(
        "export", help="write a run or a time range of events (and frames) to an Avro file",
        description="Write the events of a run, or those written to Kafka in a time range, to "
                    "an Avro object container file (deflate; the ModelEvent schema, or the union "
                    "[ModelEvent, ProviderFrame] with --with-frames) that any Avro reader reads. "
                    "Progress goes to stderr. The file appears only when the export is complete.",
        epilog="Time range: [--from-time, --to-time) on the records' log timestamps; either end "
               "may be left open. Exit status: 0 done, 1 written but records were skipped "
               "because they could not be decoded, 2 error (nothing written).")
    p.add_argument("out", metavar="OUT.avro", help="the file to write (replaced if it exists)")
    p.add_argument("--run-id", help="export this run")
    p.add_argument("--from-time", metavar="ISO", help="first time of the range (inclusive)")
    p.add_argument("--to-time", metavar="ISO", help="end of the range (exclusive)")
    p.add_argument("--with-frames", action="store_true",
                   help="also export the frames of the selection (frames topic)")
    add_kafka_options(p)
    p.set_defaults(run=run_export)

    p = sub.add_parser(
        "import", help="produce the records of an exported Avro file again",
        description="Read a file written by `modelevents replay export` and produce its records "
                    "with the same keys and byte-identical values: events (keyed by run id) to "
                    "--topic, frames (keyed by run key) to the frames topic. The whole file is "
                    "read and checked before anything is produced. Importing twice only repeats "
                    "records that consumers dedupe by (run_id, seq).",
        epilog="Exit status: 0 done, 2 error (unreadable file, missing topic, broker).")
    p.add_argument("file", metavar="IN.avro", help="the archive to import")
    p.add_argument("--topic", default="events",
                   help="topic for the events: a pipeline topic name (events, ingest) or a full "
                        "topic name (default: %(default)s)")
    p.add_argument("--frames-topic", default="frames",
                   help="topic for the frames of the archive (default: %(default)s)")
    p.add_argument("--no-frames", action="store_true", help="leave the archive's frames out")
    add_kafka_options(p)
    p.set_defaults(run=run_import)


def _report_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--show-equal", action="store_true",
                   help="list the runs that compare equal too (default: only the others)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object per run and a final summary object")


# --- helpers -----------------------------------------------------------------------------------


def parse_time(text: str, option: str) -> int:
    """ISO 8601 (a time without offset is UTC; a bare date is its midnight) or epoch ms."""
    raw = text.strip()
    if raw.isdigit():
        return int(raw)
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise InputError(f"{option} {text!r} is not a time; write it as ISO 8601, e.g. "
                         "2026-11-30T10:00:00Z, or as epoch milliseconds") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _say(message: str) -> None:
    print(f"modelevents replay: {message}", file=sys.stderr, flush=True)


def _plain(value: Any) -> Any:
    if isinstance(value, Usage):
        return payload_dict(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if hasattr(value, "__dataclass_fields__"):
        return {k: _plain(getattr(value, k)) for k in value.__dataclass_fields__}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _show(value: Any) -> str:
    text = orjson.dumps(_plain(value)).decode()
    return text if len(text) <= _MAX_VALUE else text[:_MAX_VALUE - 1] + "…"


def _emit_json(obj: dict[str, Any]) -> None:
    sys.stdout.write(orjson.dumps(obj, default=_plain).decode() + "\n")


def _unreadable(items: list[checks.Unreadable], as_json: bool) -> None:
    for u in items:
        if as_json:
            _emit_json({"unreadable": f"{u.topic}/{u.partition}@{u.offset}", "reason": u.reason})
        else:
            print(f"unreadable  {u.topic} partition {u.partition} offset {u.offset}: {u.reason}")


# --- state -------------------------------------------------------------------------------------


def run_state(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    if args.from_offset is not None:
        start = Start.at_offset(args.from_offset)
    elif args.from_time is not None:
        start = Start.at_time(parse_time(args.from_time, "--from-time"))
    else:
        start = Start.beginning()
    ignore = [name.strip() for item in args.ignore for name in item.split(",") if name.strip()]
    if args.archive is not None and not args.archive.is_dir():
        raise ConfigError(f"--archive {args.archive}: no such directory (an audit archive is the "
                          "--out directory of modelevents audit run)")
    report = run_async(checks.check_state(settings, start=start, run_id=args.run_id,
                                          ignore=ignore, archive=args.archive))
    for check in report.runs:
        if check.verdict == "equal" and not args.show_equal:
            continue
        if args.json:
            _emit_json({"run_id": check.run_id, "verdict": check.verdict, "events": check.events,
                        "first_seq": check.first_seq, "note": check.note or None,
                        "diffs": [{"field": d.field, "rebuilt": d.rebuilt,
                                   "published": d.published} for d in check.diffs]})
            continue
        status = (check.rebuilt or check.published).status  # type: ignore[union-attr]
        line = f"{check.verdict:<8} {check.run_id}"
        if check.verdict == "equal":
            print(f"{line}  {status} after {check.events} events")
        elif check.verdict == "differs":
            print(f"{line}  {len(check.diffs)} field(s) differ:")
            for d in check.diffs:
                print(f"           {d.field}: rebuilt {_show(d.rebuilt)}, "
                      f"published {_show(d.published)}")
        else:
            print(f"{line}  {check.note} ({status})")
    _unreadable(report.unreadable, args.json)
    counts = {v: report.count(v) for v in ("equal", "differs", "missing", "partial")}
    if args.json:
        _emit_json({"summary": {"runs": len(report.runs), **counts,
                                "events_read": report.events_read,
                                "unreadable": len(report.unreadable),
                                "start": report.start.describe(), "ok": report.ok}})
    else:
        print(f"state: {len(report.runs)} runs {report.start.describe()} "
              f"({report.events_read} events read): "
              + ", ".join(f"{n} {v}" for v, n in counts.items())
              + (f", {len(report.unreadable)} unreadable records" if report.unreadable else ""))
    return EXIT_OK if report.ok else EXIT_DIFFERS


# --- parity ------------------------------------------------------------------------------------


def _event_line(label: str, event: Any) -> str:
    if event is None:
        return f"           {label:<9}  (no event)"
    return (f"           {label:<9}  {event.kind}  {event.event_id}  "
            f"{_show(payload_dict(event.payload))}")


def _event_json(event: Any) -> Any:
    if event is None:
        return None
    return {"event_id": event.event_id, "kind": event.kind, "seq": event.seq,
            "adapter": event.adapter, "source": _plain(event.source),
            "payload": payload_dict(event.payload)}


def run_parity(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    report = run_async(checks.check_parity(settings, run_id=args.run_id))
    return print_parity(report, show_equal=args.show_equal, as_json=args.json)


def print_parity(report: checks.ParityReport, *, show_equal: bool, as_json: bool,
                 now: str = "now") -> int:
    """Print a parity report (text or JSON lines); the exit status it means. ``now`` names the
    re-normalization in the text (the current adapters, or a candidate revision)."""
    for r in report.runs:
        if r.verdict == "equal" and not show_equal:
            continue
        if as_json:
            diff = r.first_diff
            _emit_json({
                "run_id": r.run_id, "verdict": r.verdict, "frames": r.frames,
                "expected": r.expected, "published": r.published,
                "only_expected": r.only_expected, "only_published": r.only_published,
                "changed": r.changed, "prefix_only": r.prefix_only,
                "published_adapters": r.published_adapters,
                "current_adapters": r.current_adapters, "notes": r.notes,
                "first_diff": None if diff is None else {
                    "seq": diff.position, "fields": diff.fields,
                    "expected": _event_json(diff.expected),
                    "published": _event_json(diff.published)}})
            continue
        print(f"{r.verdict:<8} {r.run_id}  {r.frames} frames → {r.expected} events {now}, "
              f"{r.published} published")
        if r.first_diff is not None:
            d = r.first_diff
            print(f"           first difference at seq {d.position}: {', '.join(d.fields)}")
            print(_event_line("published", d.published))
            print(_event_line(now, d.expected))
            print(f"           {r.only_expected} only {now}, {r.only_published} only published, "
                  f"{r.changed} changed")
            if r.prefix_only:
                print("           what is published matches; its tail is missing (the processor "
                      "may not have caught up)")
        if r.published_adapters != r.current_adapters and r.published_adapters:
            print(f"           adapters: published {', '.join(r.published_adapters)}; "
                  f"{now} {', '.join(r.current_adapters) or '-'}")
        for note in r.notes:
            print(f"           {note}")
    _unreadable(report.unreadable, as_json)
    counts = {v: report.count(v) for v in ("equal", "differs", "missing", "no_frames")}
    if as_json:
        _emit_json({"summary": {"runs": len(report.runs), **counts,
                                "frames_read": report.frames_read,
                                "events_read": report.events_read,
                                "unreadable": len(report.unreadable),
                                "runs_from": report.runs_from, "ok": report.ok}})
    else:
        print(f"parity: {len(report.runs)} runs ({report.frames_read} frames, "
              f"{report.events_read} events read): "
              + ", ".join(f"{n} {v.replace('_', ' ')}" for v, n in counts.items())
              + (f", {len(report.unreadable)} unreadable records" if report.unreadable else ""))
    return EXIT_OK if report.ok else EXIT_DIFFERS


# --- export / import ---------------------------------------------------------------------------


def run_export(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    sel = export.Selection(
        run_id=args.run_id,
        from_ms=None if args.from_time is None else parse_time(args.from_time, "--from-time"),
        to_ms=None if args.to_time is None else parse_time(args.to_time, "--to-time"))
    _say(f"exporting {sel.describe()} from {settings.topic('events')}"
         + (f" and {settings.topic('frames')}" if args.with_frames else "") + f" to {args.out}")
    result = run_async(export.export_archive(settings, args.out, sel,
                                             with_frames=args.with_frames, progress=_say))
    for u in result.skipped:
        _say(f"warning: skipped {u.topic} partition {u.partition} offset {u.offset}: {u.reason}")
    return EXIT_DIFFERS if result.skipped else EXIT_OK


def run_import(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    _say(f"importing {args.file}")
    run_async(export.import_archive(settings, args.file, topic=args.topic,
                                    frames_topic=args.frames_topic,
                                    with_frames=not args.no_frames, progress=_say))
    return EXIT_OK


__all__ = ["register", "parse_time", "format_ms", "print_parity"]
