"""``modelevents audit run|verify|export|keygen``: the append-only audit archive
(docs/audit.md).

services/cli/main.py loads this module by its dotted path (``COMMAND_MODULES``). Exit status: 0 done
/ everything holds, 1 verify found a problem, 2 an error stopped the command.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from pathlib import Path

import orjson

from modelevents.consumers.audit import anchor, export, heads, signing, verify, writer
from modelevents.consumers.audit.format import CODECS
from modelevents.consumers.errors import AuditError
from modelevents.services.cli.kafka_options import (
    ENV_HELP,
    add_kafka_options,
    positive_float,
    positive_int,
    run_async,
    settings_from_args,
)

EXIT_OK = 0
EXIT_PROBLEMS = 1


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "audit", help="an append-only, SHA-256-chained archive of events, input packets, tool "
                      "receipts (and frames); verify and export it",
        description="`run` consumes the events, run-inputs and receipts topics (and frames) "
                    "with a consumer group into "
                    "Avro object container files under DIR, partitioned by tenant and hour, "
                    "every block chained by SHA-256 to the one before it, a manifest beside "
                    "every file; `verify` proves the chain, each run's completeness, envelopes, "
                    "input packets and tool receipts; `export` writes the archive as JSON lines or Parquet. "
                    "docs/audit.md describes the format.",
        epilog="Exit status: 0 done / verified, 1 verify found problems, 2 error. " + ENV_HELP)
    sub = parser.add_subparsers(dest="audit_command", metavar="ACTION", required=True)

    p = sub.add_parser(
        "run", help="archive events, input packets, receipts (and frames) until stopped",
        description="Consume with a consumer group and append to the archive. Offsets are "
                    "committed only after the blocks, their manifest lines and a checkpoint "
                    "line are fsynced. After a crash, what was written past the last checkpoint "
                    "(a torn block) is cut off and kept under DIR/quarantine/, and consuming "
                    "resumes at the checkpoint's offsets: nothing is lost or archived twice. "
                    "Runs until SIGTERM/SIGINT, --until-end or --idle-exit.")
    p.add_argument("--out", required=True, metavar="DIR", help="the archive directory")
    p.add_argument("--with-frames", action="store_true", help="archive the frames topic too")
    p.add_argument("--no-receipts", dest="with_receipts", action="store_false",
                   help="leave out the tool executor's receipts topic (archived by default; "
                        "verify then cannot prove the executor's tool results)")
    p.add_argument("--group", default=None,
                   help="consumer group (default: <app id>-audit, e.g. modelevents-audit)")
    p.add_argument("--codec", choices=CODECS, default="deflate",
                   help="Avro block codec (default: %(default)s)")
    p.add_argument("--until-end", action="store_true",
                   help="stop once what the topics held at the start is archived")
    p.add_argument("--idle-exit", type=positive_float, metavar="S",
                   help="stop after S seconds without a new record")
    p.add_argument("--block-records", type=positive_int, default=writer.BLOCK_RECORDS,
                   metavar="N", help="records per block at most (default: %(default)s)")
    p.add_argument("--checkpoint-seconds", type=positive_float, default=1.0, metavar="S",
                   help="a checkpoint (fsync + commit) at least this often while records "
                        "arrive (default: %(default)s)")
    p.add_argument("--signing-key", type=Path, metavar="FILE",
                   help="Ed25519 private key (PEM, or the raw 32-byte seed; `audit keygen` "
                        "makes one) that signs each checkpoint's head, published on the "
                        "audit-heads topic and as a digest file under DIR/digests/; without "
                        "it the heads are published unsigned")
    add_kafka_options(p)
    p.set_defaults(run=run_archive)

    p = sub.add_parser(
        "verify", help="prove the archive's chain, runs, envelopes, frames, input packets and "
                       "tool receipts",
        description="Check every block against its manifest and the chain across files, every "
                    "record, and per run: seq contiguous from 0, terminal runs whole, envelopes "
                    "present (close events excepted), a frame for every event when frames are "
                    "archived, an input packet for every run the gateway started, a receipt "
                    "for every tool result the executor wrote and a tool call for every "
                    "receipt. One line per problem (FAIL) and per note; runs fed without an "
                    "input packet and tool calls the application answered itself are notes.",
        epilog="Exit status: 0 everything holds, 1 a problem was found, 2 error.")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout")
    p.add_argument("--quiet", action="store_true", help="problems and the summary only")
    anchoring = p.add_argument_group(
        "anchors", "compare the archive with a head kept outside it: an archive rewritten or "
                   "cut short fails")
    anchoring.add_argument("--heads", action="store_true",
                        help="the archive's latest head on the audit-heads topic (Kafka options "
                             "below)")
    anchoring.add_argument("--expect-head", metavar="HASH",
                        help="a head hash kept elsewhere (printed by `audit verify`, the last "
                             "digest, the group's commit metadata)")
    anchoring.add_argument("--digests", type=Path, metavar="DIR2",
                        help="a copy of DIR/digests/ kept elsewhere: the digest chain and each "
                             "head it names")
    anchoring.add_argument("--public-key", type=Path, metavar="FILE",
                        help="the key the heads must be signed with (FILE.pub of `audit "
                             "keygen`); without it a signature proves only integrity")
    add_kafka_options(p)
    p.set_defaults(run=run_verify)

    p = sub.add_parser(
        "keygen", help="make an Ed25519 key pair that signs the archive's heads",
        description="Writes the private key to FILE (PEM, mode 0600, never over an existing "
                    "file) and the public key to FILE.pub, and prints the public key and its "
                    "key id. Keep FILE where only `audit run` reads it; give FILE.pub to "
                    "whoever verifies (`audit verify --public-key`).")
    p.add_argument("--out", required=True, type=Path, metavar="FILE")
    p.set_defaults(run=run_keygen)

    p = sub.add_parser(
        "export", help="write the archive as JSON lines or Parquet",
        description="Every record of every block that matches its manifest, in archive order. "
                    "jsonl is exact: key and value (the Kafka value verbatim) and every bytes "
                    "field of the decoded record in base64; parquet needs pyarrow "
                    "(pip install modelevents[audit]) and writes the tool receipts as a table "
                    "of their own beside FILE (a.parquet: a.receipts.parquet).")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--format", choices=export.FORMATS, default="jsonl")
    p.add_argument("--output", "-o", metavar="FILE",
                   help="output file (jsonl default: stdout; required for parquet)")
    p.set_defaults(run=run_export)


def _say(message: str) -> None:
    print(f"modelevents audit: {message}", file=sys.stderr, flush=True)


def run_archive(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    group = args.group or f"{settings.app_id}-audit"

    key = signing.load_signing_key(args.signing_key) if args.signing_key else None
    if key is not None:
        _say(f"signing heads with key id {signing.key_id(key.public_key())}")

    async def go() -> writer.RunResult:
        stop = asyncio.Event()
        writer.install_stop_signals(stop)
        return await writer.archive_topics(
            settings, Path(args.out), group=group, with_frames=args.with_frames,
            with_receipts=args.with_receipts,
            codec=args.codec, until_end=args.until_end, idle_exit=args.idle_exit,
            block_records=args.block_records, checkpoint_seconds=args.checkpoint_seconds,
            signing_key=key, stop=stop, progress=_say)

    topics = [settings.topic("events"), settings.topic("run-inputs")]
    topics += [settings.topic("receipts")] if args.with_receipts else []
    topics += [settings.topic("frames")] if args.with_frames else []
    _say(f"archiving {', '.join(topics)}"
         + f" into {args.out} (group {group})")
    result = run_async(go())
    _say(f"stopped: {result.records:,} records archived in {result.checkpoints} checkpoints"
         + (f", {result.skipped:,} already archived skipped" if result.skipped else ""))
    return EXIT_OK


def _anchors(args: argparse.Namespace) -> anchor.Anchors:
    """What the options ask the archive to be compared with (the topic read here)."""
    anchors = anchor.Anchors(
        expect_head=args.expect_head, digests=args.digests,
        public_key=signing.load_public_key(args.public_key) if args.public_key else None)
    if args.expect_head is not None and not re.fullmatch(r"[0-9a-fA-F]{64}",
                                                         args.expect_head.strip()):
        raise AuditError(f"--expect-head {args.expect_head!r}: give the head's 64 hex digits")
    if args.digests is not None and not args.digests.is_dir():
        raise AuditError(f"--digests {args.digests}: not a directory")
    if args.heads:
        settings = settings_from_args(args)
        anchors.heads_topic = settings.topic(heads.HEADS_TOPIC)
        archive_id = verify.archive_id(Path(args.dir))
        anchors.heads = (run_async(heads.published_heads(settings, archive_id))
                         if archive_id else [])
    return anchors


def run_verify(args: argparse.Namespace) -> int:
    report = verify.verify_archive(Path(args.dir), _anchors(args))
    # Input packets: archived with the events (run-inputs), checked by consumers/audit/inputs.py.
    summary = {**report.summary(), "input_packets": sum(map(len, report.input_packets.values())),
               "runs_with_input": len(report.input_packets)}
    if args.json:
        sys.stdout.write(orjson.dumps({
            "summary": summary,
            "problems": [f.as_dict() for f in report.problems],
            "notes": [f.as_dict() for f in report.notes]}, option=orjson.OPT_INDENT_2).decode()
            + "\n")
    else:
        for finding in report.problems:
            print(finding.line("FAIL"))
        if not args.quiet:
            for finding in report.notes:
                print(finding.line("note"))
        s = summary
        print(f"verify: {'OK' if report.ok else 'FAILED'} — {s['files']} files, {s['blocks']} "
              f"blocks, {s['events']} events, {s['frames']} frames, {s['runs']} runs "
              f"({s['terminal_runs']} terminal), {s['input_packets']} input packets, "
              f"{s['receipts']} receipts; "
              f"{s['problems']} problems, {s['notes']} notes"
              + (f"; head {s['head']}" if s["head"] else "")
              + {None: " (not compared with an anchor: --heads, --expect-head, --digests)",
                 True: " (anchored)", False: " (NOT the anchored archive)"}[s["anchored"]])
    return EXIT_OK if report.ok else EXIT_PROBLEMS


def run_keygen(args: argparse.Namespace) -> int:
    public = signing.write_keypair(args.out)
    _say(f"private key {args.out} (mode 0600), public key {args.out}.pub")
    print(f"public key {signing.public_text(public)} (key id "
          f"{signing.key_id(public)})")
    return EXIT_OK


def run_export(args: argparse.Namespace) -> int:
    root = Path(args.dir)
    if args.format == "parquet":
        if not args.output:
            raise export.AuditError("--format parquet needs --output FILE")
        count = export.export_parquet(root, Path(args.output))
        _say(f"tool receipts in {export.receipts_path(Path(args.output))}")
    elif args.output:
        with open(args.output, "w") as out:
            count = export.export_jsonl(root, out)
    else:
        count = export.export_jsonl(root, sys.stdout)
    _say(f"exported {count:,} records")
    return EXIT_OK
