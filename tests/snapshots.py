"""Reviewed snapshots of full event sequences.

A snapshot is ``tests/snapshots/<name>.jsonl``: one JSON object per event, ``{"kind": ...,
**payload fields}`` — no ids, envelopes or sources, so it changes only when the meaning of the
output changes. Media bytes are summarised (length + sha256) to keep snapshots small.

Write or rewrite with ``UPDATE_SNAPSHOTS=1 pytest ...``, then REVIEW the diff: a snapshot is the
reviewed truth, not a recording of whatever the code does today.
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from modelevents.schemas.events import ModelEvent, payload_dict

SNAPSHOT_DIR = Path(__file__).resolve().parent / "snapshots"
_MAX_DIFF_LINES = 60


def _plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return value


def event_projection(event: ModelEvent) -> dict[str, Any]:
    """kind + payload fields, nothing that identifies the delivery."""
    out: dict[str, Any] = {"kind": event.kind}
    for key, value in payload_dict(event.payload).items():
        out[key] = _plain(value)
    return out


def render(events: Iterable[ModelEvent]) -> str:
    lines = [orjson.dumps(event_projection(e)).decode() for e in events]
    return "".join(line + "\n" for line in lines)


def _update_requested() -> bool:
    return os.environ.get("UPDATE_SNAPSHOTS", "").lower() not in ("", "0", "false", "no")


def snapshot_path(name: str) -> Path:
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise ValueError(f"snapshot name must be a plain file stem, got {name!r}")
    return SNAPSHOT_DIR / f"{name}.jsonl"


def assert_matches_snapshot(name: str, events: list[ModelEvent]) -> None:
    """Compare ``events`` with ``tests/snapshots/<name>.jsonl``; UPDATE_SNAPSHOTS=1 writes it."""
    path = snapshot_path(name)
    actual = render(events)
    if _update_requested():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != actual:
            path.write_text(actual, encoding="utf-8")
        return
    if not path.exists():
        raise AssertionError(
            f"snapshot {path} does not exist. Create it with\n"
            f"    UPDATE_SNAPSHOTS=1 .venv/bin/pytest <this test>\n"
            f"and review the file before committing it ({len(events)} events).")
    expected = path.read_text(encoding="utf-8")
    if expected == actual:
        return
    diff = list(difflib.unified_diff(
        expected.splitlines(), actual.splitlines(),
        fromfile=f"{path.name} (reviewed)", tofile=f"{name} (actual)", lineterm="", n=2))
    shown = diff[:_MAX_DIFF_LINES]
    more = len(diff) - len(shown)
    raise AssertionError(
        f"events differ from snapshot {path} "
        f"({len(expected.splitlines())} expected lines, {len(actual.splitlines())} actual):\n"
        + "\n".join(shown)
        + (f"\n... {more} more diff lines" if more > 0 else "")
        + "\nIf the change is intended: UPDATE_SNAPSHOTS=1, then review the snapshot diff.")
