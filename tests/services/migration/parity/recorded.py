"""Recorded runs for the parity tests: every project fixture (and the recorded provider corpus
when it is beside the checkout) cut into frames as the feeder cuts them, end-of-input markers
included, each its own run; and the revisions the tests compare."""

from __future__ import annotations

import json
import shutil
from functools import cache
from pathlib import Path

from modelevents.schemas.end_of_input import with_end_markers
from modelevents.schemas.errors import InputError
from modelevents.schemas.frames import ProviderFrame
from modelevents.services.local.feeder import frames_for_file
from tests.corpus import corpus_available, corpus_files
from tests.paths import FIXTURES, REPO_ROOT

ADAPTERS_DIR = REPO_ROOT / "adapters"
# The Chat Completions adapter before the compatible-server fixes of issue #29 (revision 3):
# the parent of the commit that made them (`git log adapters/openai_chat.py`).
BEFORE_CHAT_FIXES = "git:d0fbb6ea76b18e9fae57a808d559b7062444e343^"
# The recordings that commit added, each showing one of the fixes.
CHAT_FIXES = {"finish-repeated-new-id.sse", "no-finish-reason-usage-then-done.sse",
              "openrouter-reasoning-summary-encrypted.sse",
              "openrouter-reasoning-text-signature.sse", "tool-call-header-repeated.sse"}


def run_id_of(path: Path) -> str:
    return f"run-{path.parent.name}-{path.name}"


def fixture_paths() -> list[Path]:
    return sorted(p for p in FIXTURES.glob("*/*") if p.is_file())


def corpus_paths() -> list[Path]:
    return corpus_files("") if corpus_available() else []


def recorded_frames(path: Path, run_id: str | None = None,
                    received_at: int = 1_000) -> list[ProviderFrame] | None:
    """The frames of one recording, or None for a file that is not a stream (notes, requests)."""
    try:
        feed = frames_for_file(path, run_id=run_id or run_id_of(path), received_at=received_at)
    except InputError:
        return None
    return with_end_markers(feed.frames)


def recorded_runs(paths: list[Path]) -> dict[str, list[ProviderFrame]]:
    runs = {}
    for path in paths:
        frames = recorded_frames(path)
        if frames:
            runs[run_id_of(path)] = frames
    return runs


def adapters_copy(tmp: Path) -> Path:
    """A checkout-like directory holding a copy of this checkout's adapters/ package."""
    shutil.copytree(ADAPTERS_DIR, tmp / "adapters",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path}: {old!r} is not there once"
    path.write_text(text.replace(old, new))


@cache
def fixture_runs() -> dict[str, list[ProviderFrame]]:
    """Every project fixture as a run (the tests only read it)."""
    return recorded_runs(fixture_paths())


CHAT_FIX_RUNS = {run_id_of(FIXTURES / "openai-chat" / name) for name in CHAT_FIXES}


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]
