"""Where the recorded provider corpus lives and how tests reach it.

The corpus (real provider streams copied from public repositories, see SOURCES.md in each
folder) sits beside the repository in ``../shared/fixtures`` and is never copied into it. A
developer checkout without it skips corpus tests loudly; CI must have it, so there a missing
corpus is a failure, not a skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.paths import CORPUS_DIR

# Documentation, not recordings.
_NOT_RECORDINGS = {"SOURCES.md", "README.md"}


def corpus_available() -> bool:
    return CORPUS_DIR.is_dir()


def require_corpus() -> None:
    """Skip (loudly) when the corpus is absent on a developer machine; fail when CI=true."""
    if corpus_available():
        return
    reason = (f"recorded provider corpus not found at {CORPUS_DIR} "
              "(expected ../shared/fixtures beside the repository); corpus tests NOT run")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(reason + " — CI must have the corpus", pytrace=False)
    pytest.skip(reason)


def corpus_files(provider_subdir: str) -> list[Path]:
    """Every recorded file under ``CORPUS_DIR/provider_subdir`` (recursively), sorted.

    ``provider_subdir`` may be a provider (``"anthropic"``) or a deeper folder
    (``"gemini/vercel-ai/interactions"``). Returns [] when the corpus is absent, so it can feed
    ``pytest.mark.parametrize`` at collection time; tests call ``require_corpus()`` themselves.
    """
    root = CORPUS_DIR / provider_subdir
    if not root.is_dir():
        return []
    return sorted(p for p in root.rglob("*") if p.is_file() and p.name not in _NOT_RECORDINGS)


def corpus_id(path: Path) -> str:
    """A readable pytest id for a corpus file: its path below CORPUS_DIR."""
    try:
        return path.relative_to(CORPUS_DIR).as_posix()
    except ValueError:
        return path.name
