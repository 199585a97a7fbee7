"""`modelevents conformance [DIR]`: replay a directory of recordings, compare with expected events.

The layout (docs/conformance.md): ``DIR/<api>/<recording>`` beside
``<recording>.expected.jsonl``; the first folder names the API (else it is detected); an expected
events file may live in a mirrored tree instead (``--expected``). Without DIR, the project's own
suite: ``tests/fixtures`` with its expected events in ``tests/expected`` (a source checkout).
The comparing is ``modelevents.adapters.conformance``; this module reads, writes and reports.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import orjson

import modelevents.adapters
from modelevents.adapters.conformance import EXPECTED_SUFFIX, Verdict, check, render_expected
from modelevents.adapters.registry import ADAPTERS, CLI_CHOICES, resolve_api
from modelevents.schemas.errors import InputError

# Notes and documentation a user keeps beside captures; never recordings.
_NOT_RECORDINGS = (".md", ".rst")
_SHOWN_DIFFERENCES = 20
_PROGRESS_SECONDS = 1.0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "conformance",
        help="replay a directory of recordings and report what differs from their expected "
             "events",
        description="Replay every recording under DIR through the adapters and compare its "
                    "neutral events (kind and payload fields) with its expected events file, "
                    f"<recording>{EXPECTED_SUFFIX} beside it. The first folder below DIR names "
                    "the API (openai-chat, anthropic-messages, ...); in any other folder the API "
                    "is detected. Reports per file which event and field differ. Exit 0 only "
                    "when every file matches; 1 when one differs, has no expected file or "
                    "cannot be replayed; 2 when DIR cannot be read. Without DIR: the project's "
                    "own suite (tests/fixtures of a source checkout).")
    p.add_argument("dir", nargs="?", help="directory of recordings (default: the project's suite)")
    p.add_argument("--expected", metavar="EDIR",
                   help="where the expected events files are, mirroring DIR (default: beside "
                        "the recordings; for the project's suite tests/expected)")
    p.add_argument("--api", action="append", choices=[c for c in CLI_CHOICES if c != "auto"],
                   help="replay only recordings of this API (repeat for several; a provider "
                        "name means all its APIs); the others are listed as skipped")
    p.add_argument("--update", action="store_true",
                   help="write or rewrite the expected events file of every recording that has "
                        "none or differs (review the diff before committing it)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON report instead of text")
    p.set_defaults(run=run)


# --- where things are ----------------------------------------------------------------------------


def _checkout_suite() -> tuple[Path, Path]:
    root = Path(next(iter(modelevents.adapters.__path__))).resolve().parent
    return root / "tests" / "fixtures", root / "tests" / "expected"


def project_suite() -> tuple[Path, Path]:
    """tests/fixtures and tests/expected of the checkout this package runs from."""
    recordings, expected = _checkout_suite()
    if not recordings.is_dir():
        raise InputError(
            f"the project's conformance suite is in a source checkout ({recordings} is not "
            "there: this is an installed package); give the directory: modelevents "
            "conformance DIR")
    return recordings, expected


def recordings_under(root: Path) -> Iterator[Path]:
    """Every recording below ``root``, sorted: not expected files, hidden files or notes."""
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if (not path.is_file() or path.name.endswith(EXPECTED_SUFFIX)
                or any(part.startswith(".") for part in relative.parts)
                or path.name.lower().endswith(_NOT_RECORDINGS)):
            continue
        yield path


def api_of_folder(relative: Path) -> str:
    """The API named by the first folder of ``relative``, else ``auto`` (detect it)."""
    if len(relative.parts) < 2:
        return "auto"
    folder = relative.parts[0]
    return folder if folder in CLI_CHOICES else "auto"


# --- one run -------------------------------------------------------------------------------------


@dataclass
class FileReport:
    path: str  # relative to DIR, with /
    status: str  # match | differ | no-expected | error | created | updated | skipped
    verdict: Verdict | None = None
    note: str | None = None

    @property
    def passed(self) -> bool:
        return self.status in ("match", "created", "updated", "skipped")

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "status": self.status}
        if self.verdict is not None:
            out["api"] = self.verdict.api
            if self.verdict.differences:
                out["differences"] = [d.as_json() for d in self.verdict.differences]
        if self.note:
            out["note"] = self.note
        return out


def _check_one(recording: Path, relative: Path, expected_path: Path, wanted: set[str] | None,
               update: bool) -> FileReport:
    name = relative.as_posix()
    folder_api = api_of_folder(relative)
    if wanted is not None and folder_api != "auto" and not set(resolve_api(folder_api)) & wanted:
        return FileReport(name, "skipped", note=f"{folder_api} is not among --api")
    try:
        body = recording.read_bytes()
        expected_text = (expected_path.read_text(encoding="utf-8")
                         if expected_path.exists() else None)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        return FileReport(name, "error", note=f"cannot read: {reason}")
    verdict = check(body, expected_text, api=folder_api, source_name=name)
    if verdict.status == "error":
        message = verdict.error or ""
        if "cannot tell which provider API" in message:
            # The registry's hint names `normalize --provider`; here the folder names the API.
            message = (message.split("; name it:")[0] + "; put it under a folder named after "
                       f"its API ({', '.join(ADAPTERS)}) or name it on a replay line")
        return FileReport(name, "error", verdict, message)
    if wanted is not None and not set(verdict.api.split("+") if verdict.api else ()) <= wanted:
        return FileReport(name, "skipped", verdict, f"{verdict.api} is not among --api")
    if verdict.status == "match" or not update:
        note = ("no expected events file; write it with --update, then "
                "review it" if verdict.status == "no-expected" else None)
        return FileReport(name, verdict.status, verdict, note)
    expected_path.parent.mkdir(parents=True, exist_ok=True)
    expected_path.write_text(render_expected(verdict.events, verdict.replay), encoding="utf-8")
    created = verdict.status == "no-expected"
    return FileReport(name, "created" if created else "updated", verdict,
                      f"{len(verdict.events)} events written to {expected_path}")


class _Progress:
    """At most one line a second on stderr, so a long run shows it is moving."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total, self.stream, self.last = total, stream, time.monotonic()

    def tick(self, done: int, name: str) -> None:
        now = time.monotonic()
        if now - self.last >= _PROGRESS_SECONDS:
            self.last = now
            print(f"conformance: {done}/{self.total} {name}", file=self.stream, flush=True)


def _print_text(report: FileReport, out: TextIO) -> None:
    print(f"{report.status:<11} {report.path}" + (f"  ({report.note})" if report.note else ""),
          file=out)
    if report.verdict is not None and report.status == "differ":
        differences = report.verdict.differences
        for difference in differences[:_SHOWN_DIFFERENCES]:
            print(f"    {difference.describe()}", file=out)
        if len(differences) > _SHOWN_DIFFERENCES:
            print(f"    ... {len(differences) - _SHOWN_DIFFERENCES} more differences "
                  "(--json lists them all)", file=out)


def run(args: argparse.Namespace) -> int:
    if args.dir is None:
        root, default_expected = project_suite()
    else:
        root = Path(args.dir)
        if not root.is_dir():
            raise InputError(f"{root}: no such directory of recordings")
        # The project's recordings named as a directory are still the project's suite.
        own_recordings, own_expected = _checkout_suite()
        default_expected = own_expected if root.resolve() == own_recordings else root
    expected_root = Path(args.expected) if args.expected else default_expected
    wanted = ({api for choice in args.api for api in resolve_api(choice)} if args.api else None)
    recordings = list(recordings_under(root))
    if not recordings:
        raise InputError(f"{root}: no recordings in it (see docs/conformance.md for the layout)")
    progress = _Progress(len(recordings), sys.stderr)
    reports = []
    for done, recording in enumerate(recordings, 1):
        relative = recording.relative_to(root)
        expected_path = expected_root / relative.parent / (relative.name + EXPECTED_SUFFIX)
        report = _check_one(recording, relative, expected_path, wanted, args.update)
        reports.append(report)
        if not args.json:
            _print_text(report, sys.stdout)
        progress.tick(done, report.path)
    failed = [r for r in reports if not r.passed]
    counts: dict[str, int] = {}
    for report in reports:
        counts[report.status] = counts.get(report.status, 0) + 1
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(
            {"dir": str(root), "expected": str(expected_root), "passed": not failed,
             "counts": counts, "files": [r.as_json() for r in reports]},
            default=str, option=orjson.OPT_INDENT_2) + b"\n")
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    print(f"conformance: {len(reports)} recordings under {root}: {summary}"
          + (f"; FAILED: {len(failed)}" if failed else "; all pass"), file=sys.stderr)
    return 1 if failed else 0
