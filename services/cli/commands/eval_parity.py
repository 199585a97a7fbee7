"""``modelevents eval parity``: what a candidate revision of the adapters would publish differently.

Recorded frames — the frames topic, or an audit archive (``--from-archive``) — are grouped per
run as ``replay parity`` groups them, translated by the baseline revision (the installed
adapters unless ``--baseline`` names another) and by the candidate (``--adapters``), and the two
event sequences compared per run and per provider API (services/migration/parity/).
``--against published`` compares the candidate with the published events instead (``replay
parity`` with the candidate's adapters); ``both`` does both. Reports go to stdout (``--json``
for JSON lines). Exit status: 0 no difference, 1 a difference (or an unreadable record), 2 an
error that stopped the command (a revision that does not load, no frames, no such run).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from modelevents.consumers.errors import NoSuchRun
from modelevents.consumers.replay import checks
from modelevents.schemas.errors import ConfigError
from modelevents.schemas.events import payload_dict
from modelevents.services.cli.commands.replay import (
    EXIT_DIFFERS,
    EXIT_OK,
    _emit_json,
    _event_json,
    _show,
    _unreadable,
    print_parity,
)
from modelevents.services.cli.kafka_options import (
    ENV_HELP,
    add_kafka_options,
    run_async,
    settings_from_args,
)
from modelevents.services.migration.parity.compare import (
    Counts,
    ParityDiff,
    RunDelta,
    api_names,
    compare_run,
)
from modelevents.services.migration.parity.revision import (
    INSTALLED,
    AdapterRevision,
    load_revision,
)

AGAINST = ("baseline", "published", "both")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "parity", help="re-normalize recorded frames with a candidate adapter revision and diff "
                       "the events",
        description="Read recorded frames (the frames topic, or an audit archive's), group them "
                    "per run as `replay parity` does, translate them with the baseline revision "
                    "of the adapters and with the candidate, and compare the two event sequences "
                    "of every run: events added (only the candidate makes them), removed, "
                    "changed (same event id, other kind, payload or source), the first differing "
                    "event, and the counts per provider API. A revision is `installed`, a "
                    "directory (another checkout holding adapters/, or an adapters package), or "
                    "git:REV (the adapters/ of that revision of the repository in the current "
                    "directory); it is loaded under a private name beside the installed adapters. "
                    "A revision compared with itself differs in nothing.",
        epilog="Exit status: 0 no difference, 1 a difference or an unreadable record, 2 error "
               "(a revision that does not load, no frames, no such run). " + ENV_HELP)
    p.add_argument("--adapters", required=True, metavar="CANDIDATE",
                   help="the candidate revision: DIR, git:REV or installed")
    p.add_argument("--baseline", default=INSTALLED, metavar="REVISION",
                   help="the revision to compare with (default: %(default)s)")
    p.add_argument("--from-archive", type=Path, metavar="DIR",
                   help="read the frames (and, for --against published, the events) of an audit "
                        "archive (modelevents audit run --with-frames) instead of the topics")
    p.add_argument("--against", choices=AGAINST, default="baseline",
                   help="what the candidate's events are compared with: the baseline revision's "
                        "(default), the published events, or both")
    p.add_argument("--run-id", help="compare only this run")
    p.add_argument("--show-equal", action="store_true",
                   help="list the runs that compare equal too (default: only the others)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object per run, per API, and a final summary object")
    add_kafka_options(p)
    p.set_defaults(run=run_eval_parity)


# --- comparing two revisions -------------------------------------------------------------------


def revision_parity(baseline: AdapterRevision, candidate: AdapterRevision,
                    runs: dict[str, checks.Renormalized]) -> ParityDiff:
    """Every run (already translated by ``baseline``) through ``candidate`` too, compared.
    Each run's translations are dropped once compared."""
    diff = ParityDiff(baseline, candidate)
    names = api_names(baseline, candidate)
    for run_id in sorted(runs):
        run = runs.pop(run_id)
        diff.add(compare_run(run_id, run.frames, baseline, candidate, baseline_run=run,
                             api_of_adapter=names))
    return diff


def _counts(c: Counts) -> dict[str, int]:
    return {"baseline_events": c.baseline, "candidate_events": c.candidate, "added": c.added,
            "removed": c.removed, "changed": c.changed}


def _counts_text(c: Counts) -> str:
    return (f"{c.baseline} → {c.candidate} events, {c.added} added, {c.removed} removed, "
            f"{c.changed} changed")


def _event_text(label: str, event: Any) -> str:
    if event is None:
        return f"           {label:<9}  (no event)"
    return (f"           {label:<9}  {event.kind}  {event.event_id}  "
            f"{_show(payload_dict(event.payload))}")


def _print_run(r: RunDelta, as_json: bool) -> None:
    d = r.first_diff
    if as_json:
        _emit_json({
            "run_id": r.run_id, "verdict": r.verdict, "frames": r.frames, **_counts(r.counts),
            "per_api": {api: _counts(c) for api, c in sorted(r.per_api.items())},
            "first_diff": None if d is None else {
                "seq": d.position, "fields": d.fields, "api": r.first_diff_api,
                "baseline": _event_json(d.baseline), "candidate": _event_json(d.candidate)},
            "dead_letters_only_baseline": r.dead_letters_baseline,
            "dead_letters_only_candidate": r.dead_letters_candidate})
        return
    print(f"{r.verdict:<8} {r.run_id}  {r.frames} frames → {_counts_text(r.counts)}")
    if d is not None:
        print(f"           first difference at seq {d.position} ({r.first_diff_api}): "
              f"{', '.join(d.fields)}")
        print(_event_text("baseline", d.baseline))
        print(_event_text("candidate", d.candidate))
    for note in r.dead_letters_baseline:
        print(f"           only the baseline: {note}")
    for note in r.dead_letters_candidate:
        print(f"           only the candidate: {note}")


def print_revision_parity(diff: ParityDiff, unreadable: list[checks.Unreadable], *,
                          show_equal: bool, as_json: bool) -> int:
    for r in diff.runs:
        if r.verdict != "equal" or show_equal:
            _print_run(r, as_json)
    for api, s in sorted(diff.per_api.items()):
        if as_json:
            _emit_json({"api": api, "runs": s.runs, "runs_differing": s.runs_differing,
                        **_counts(s.counts)})
        else:
            print(f"api      {api}  {s.runs} runs, {s.runs_differing} differ: "
                  f"{_counts_text(s.counts)}")
    _unreadable(unreadable, as_json)
    totals = diff.totals()
    ok = diff.ok and not unreadable
    revisions = {"baseline": {"revision": diff.baseline.label,
                              "adapters": diff.baseline.revisions()},
                 "candidate": {"revision": diff.candidate.label,
                               "adapters": diff.candidate.revisions()}}
    if as_json:
        _emit_json({"summary": {"runs": len(diff.runs), "equal": diff.count("equal"),
                                "differs": diff.count("differs"), "frames": diff.frames,
                                **_counts(totals), "unreadable": len(unreadable), **revisions,
                                "ok": ok}})
    else:
        print(f"parity: {len(diff.runs)} runs ({diff.frames} frames): {diff.count('equal')} "
              f"equal, {diff.count('differs')} differ; {_counts_text(totals)}"
              + (f", {len(unreadable)} unreadable records" if unreadable else ""))
        for side, rev in (("baseline", diff.baseline), ("candidate", diff.candidate)):
            print(f"  {side:<9} {rev.label}: {', '.join(sorted(rev.revisions().values()))}")
    return EXIT_OK if ok else EXIT_DIFFERS


# --- the command -------------------------------------------------------------------------------


def run_eval_parity(args: argparse.Namespace) -> int:
    archive: Path | None = args.from_archive
    if archive is not None and not archive.is_dir():
        raise ConfigError(f"--from-archive {archive}: no such directory (an audit archive is the "
                          "--out directory of modelevents audit run --with-frames)")
    candidate = load_revision(args.adapters)
    status = EXIT_OK
    settings = settings_from_args(args)
    if args.against in ("baseline", "both"):
        baseline = load_revision(args.baseline)
        unreadable: list[checks.Unreadable] = []
        if archive is not None:
            runs = checks.archived_frames_by_run(archive, unreadable, args.run_id,
                                                 baseline.normalizer)
        else:
            runs, _ = run_async(checks.frames_by_run(settings, unreadable, args.run_id,
                                                     baseline.normalizer))
        if args.run_id is not None and args.run_id not in runs:
            where = archive or settings.topic("frames")
            raise NoSuchRun(f"no run {args.run_id}: no frames in {where}; check the run id")
        if not runs:
            raise checks.EmptyRange(f"no frames in {archive or settings.topic('frames')}: "
                                    "nothing to re-normalize")
        diff = revision_parity(baseline, candidate, runs)
        status = max(status, print_revision_parity(diff, unreadable, show_equal=args.show_equal,
                                                   as_json=args.json))
    if args.against in ("published", "both"):
        report = run_async(checks.check_parity(settings, run_id=args.run_id,
                                               normalizer=candidate.normalizer, archive=archive))
        status = max(status, print_parity(report, show_equal=args.show_equal, as_json=args.json,
                                          now="candidate"))
    return status


__all__ = ["register", "revision_parity", "print_revision_parity"]
