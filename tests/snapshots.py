"""Reviewed snapshots of full event sequences.

A snapshot is JSON lines of neutral events (``modelevents.adapters.conformance``: kind + payload
fields, no ids, envelopes or sources, media summarised), so it changes only when the meaning of
the output changes. Where it lives:

- a snapshot of one of the project's recordings, ``tests/fixtures/<api>/<file>``, is that
  recording's expected events file in the conformance suite, ``tests/expected/<api>/<file>``
  ``.expected.jsonl`` — the one copy both these tests and ``modelevents conformance`` read. Its
  name is ``<prefix><stem of file>`` with the prefix of ``_API_PREFIXES``.
- any other snapshot (an inline stream, a corpus file) is ``tests/snapshots/<name>.jsonl``.

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

TESTS_DIR = Path(__file__).resolve().parent
SNAPSHOT_DIR = TESTS_DIR / "snapshots"
FIXTURE_DIR = TESTS_DIR / "fixtures"
EXPECTED_DIR = TESTS_DIR / "expected"
_MAX_DIFFERENCES = 30

# How the adapter tests name the snapshot of a recording in tests/fixtures/<api>/.
_API_PREFIXES = {
    "anthropic_messages-": "anthropic-messages",
    "gemini_generate.": "gemini-generate",
    "gemini_interactions-": "gemini-interactions",
    "openai_chat__": "openai-chat",
    "openai_responses__": "openai-responses",
}


def event_projection(event: ModelEvent) -> dict[str, Any]:
    """kind + payload fields, nothing that identifies the delivery."""
    return neutral_event(event)


def render(events: Iterable[ModelEvent]) -> str:
    return render_expected(neutral_event(e) for e in events)


def _update_requested() -> bool:
    return os.environ.get("UPDATE_SNAPSHOTS", "").lower() not in ("", "0", "false", "no")


def _recording_of(name: str) -> Path | None:
    for prefix, api in _API_PREFIXES.items():
        if name.startswith(prefix):
            stem = name[len(prefix):]
            folder = FIXTURE_DIR / api
            matches = sorted(folder.glob(f"{stem}.*")) if folder.is_dir() else []
            matches = [p for p in matches if p.stem == stem and p.is_file()]
            if len(matches) == 1:
                return matches[0]
    return None


def snapshot_path(name: str) -> Path:
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"snapshot name must be a plain file stem, got {name!r}")
    recording = _recording_of(name)
    if recording is not None:
        relative = recording.relative_to(FIXTURE_DIR)
        return EXPECTED_DIR / relative.parent / (relative.name + EXPECTED_SUFFIX)
    return SNAPSHOT_DIR / f"{name}.jsonl"


def assert_matches_snapshot(name: str, events: list[ModelEvent]) -> None:
    """Compare ``events`` with the snapshot ``name`` (see above); UPDATE_SNAPSHOTS=1 writes it."""
    path = snapshot_path(name)
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
