"""`modelevents normalize`: a recorded provider stream or object in, ModelEvents out."""

from __future__ import annotations

import argparse
import base64
import sys
from pathlib import Path

import orjson

from modelevents.adapters.limits import using_limits
from modelevents.adapters.registry import CLI_CHOICES, normalize_bytes
from modelevents.schemas.errors import InputError
from modelevents.services.cli.digest import digest, render
from modelevents.services.cli.input_limits import (
    add_input_limit_options,
    limits_from_args,
)
from modelevents.services.run_logic.run_machine import run_state_of

FORMATS = ("auto", "sse", "jsonl", "json-array", "json", "cassette")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "normalize",
        help="translate a recorded provider stream, object or VCR cassette into ModelEvents",
        description="Read provider output (an SSE stream, JSON lines of SSE payloads, a streamed "
                    "JSON array, one JSON object such as a polled response or an HTTP error body, "
                    "or a VCR cassette) and print one JSON object per ModelEvent: kind, seq and the "
                    "payload fields (text, tool_name, tool_call_id, arguments, status, reason, url, "
                    "...). Provider API and framing are detected unless given. What one input may "
                    "expand to is bounded (see input limits): a gzip or YAML alias bomb, a "
                    "truncated gzip body or an endless event ends in one error line, exit 2.")
    p.add_argument("file", help="the input file, or - for standard input")
    p.add_argument("--provider", default="auto", choices=CLI_CHOICES,
                   help="provider API of the input (default: detect)")
    p.add_argument("--format", default="auto", choices=FORMATS,
                   help="framing of the input (default: detect)")
    p.add_argument("--run-id", help="run id to assign (default: derived from the input)")
    p.add_argument("--tenant", default="default", help="tenant to assign (default: %(default)s)")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--summary", action="store_true",
                      help="print a readable digest: final status and reason, text, tool calls, "
                           "hosted tools, citations, usage")
    view.add_argument("--state", action="store_true", help="print the final RunState as JSON")
    add_input_limit_options(p)
    p.set_defaults(run=run)


def _read(path: str) -> tuple[bytes, str]:
    if path == "-":
        return sys.stdin.buffer.read(), "stdin"
    try:
        return Path(path).read_bytes(), path
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _json_default(value: object) -> object:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(type(value).__name__)


def run(args: argparse.Namespace) -> int:
    body, name = _read(args.file)
    with using_limits(limits_from_args(args), source=name):
        result = normalize_bytes(body, api=args.provider, framing=args.format,
                                 run_id=args.run_id, tenant=args.tenant, source_name=name)
    out = sys.stdout.buffer
    if args.summary:
        out.write(render(digest(result.events)).encode() + b"\n")
    elif args.state:
        state = run_state_of(result.events, run_id=result.run_id, tenant=args.tenant)
        out.write(orjson.dumps(state, default=_json_default, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        for event in result.events:
            out.write(orjson.dumps(event.projection(), default=_json_default) + b"\n")
    out.flush()
    print(f"{name}: {result.api}, {result.framing}, {result.frame_count} frames → "
          f"{len(result.events)} events", file=sys.stderr)
    for skipped in result.skipped:
        print(f"  skipped {skipped}", file=sys.stderr)
    return 0
