"""Reviewed snapshots of full event sequences.

A snapshot is JSON lines of neutral events (``modelevents.adapters.conformance``: kind + payload
fields, no ids, envelopes or sources, media summarised), so it changes only when the meaning of
the output changes. One naming scheme, ``<api>/<what>``, and the test names the file itself
(``assert_matches_snapshot(path, events)``; the folders are in tests/paths.py):

- the snapshot of one of the project's recordings, ``tests/fixtures/<api>/<file>``, is that
  recording's expected events file in the conformance suite, ``expected_of(recording)`` =
  ``tests/expected/<api>/<file>.expected.jsonl`` — the one copy both the adapter tests and
  ``modelevents conformance`` read (the command reads it there, so it stays there);
- any other snapshot lives beside the tests that own it, ``<tests folder>/snapshots/<api>/``
  ``<what>.jsonl``: a corpus recording's in tests/conformance/snapshots/ (``<what>`` named for
  the corpus file), an inline stream's in tests/adapters/snapshots/ (named for what it shows).

Both are compared as the conformance command compares (differences named by event and field;
minted ``mev_`` ids up to a consistent renaming). Write or rewrite with
``UPDATE_SNAPSHOTS=1 pytest ...``, then REVIEW the diff: a snapshot is the reviewed truth, not a
recording of whatever the code does today.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from modelevents.adapters.conformance import (
    EXPECTED_SUFFIX,
    compare,
    neutral_event,
    parse_expected,
    render_expected,
)
from modelevents.schemas.events import ModelEvent
from tests.paths import EXPECTED, FIXTURES

SNAPSHOT_SUFFIX = ".jsonl"
_MAX_DIFFERENCES = 30


def event_projection(event: ModelEvent) -> dict[str, Any]:
    """kind + payload fields, nothing that identifies the delivery."""
    return neutral_event(event)


def render(events: Iterable[ModelEvent]) -> str:
    return render_expected(neutral_event(e) for e in events)


def _update_requested() -> bool:
    return os.environ.get("UPDATE_SNAPSHOTS", "").lower() not in ("", "0", "false", "no")


def expected_of(recording: Path) -> Path:
    """The snapshot of ``tests/fixtures/<api>/<file>``: its conformance expected events file."""
    relative = recording.resolve().relative_to(FIXTURES)
    return EXPECTED / relative.parent / (relative.name + EXPECTED_SUFFIX)


def assert_matches_snapshot(path: Path, events: list[ModelEvent]) -> None:
    """Compare ``events`` with the snapshot file ``path`` (see above); UPDATE_SNAPSHOTS=1 writes it."""
    if not path.name.endswith(SNAPSHOT_SUFFIX) or path.name.startswith("."):
        raise ValueError(f"a snapshot is a {SNAPSHOT_SUFFIX} file, got {path}")
    actual = [neutral_event(e) for e in events]
    expected = parse_expected(path.read_text(encoding="utf-8"), str(path)) if path.exists() else None
    differences = compare(expected.events, actual) if expected is not None else None
    if _update_requested():
        if differences is None or differences:
            path.parent.mkdir(parents=True, exist_ok=True)
            replay = expected.replay if expected is not None else None
            path.write_text(render_expected(actual, replay), encoding="utf-8")
        return
    if expected is None or differences is None:
        raise AssertionError(
            f"snapshot {path} does not exist. Create it with\n"
            f"    UPDATE_SNAPSHOTS=1 .venv/bin/pytest <this test>\n"
            f"and review the file before committing it ({len(events)} events).")
    if not differences:
        return
    shown = [d.describe() for d in differences[:_MAX_DIFFERENCES]]
    more = len(differences) - len(shown)
    raise AssertionError(
        f"events differ from snapshot {path} "
        f"({len(expected.events)} expected events, {len(actual)} produced):\n  "
        + "\n  ".join(shown)
        + (f"\n  ... {more} more differences" if more > 0 else "")
        + "\nIf the change is intended: UPDATE_SNAPSHOTS=1, then review the snapshot diff.")
