"""Every path the documentation cites is in the repository.

A reader of README.md or a docs/ page follows the paths it names in backticks
(`services/gateway/calls/runner.py`, `tests/integration/`) and the pages it links. A span is a
path when it is one word of path characters holding a `/` and it either starts at the
repository's root (its first part is a top-level entry: `schemas/…`, `bench/…`, `tests/…`) or
names a file (`calls/host.py` names a file from somewhere unsaid: write it from the root).
`DIR/…` is the user's folder, not the repository's. Such a path must exist; a `::test_name`
after a file is the file's. The broker-backed tests under `tests/integration/` are cited by
folder, never by file: they move between that folder's package folders. Links are relative to
the page, as a Markdown viewer follows them. Spans inside fenced code blocks are commands and
output, not citations."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path, PurePosixPath

import pytest

from tests.paths import REPO_ROOT

FENCE = re.compile(r"^ *(```|~~~).*?^ *\1 *$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH_WORD = re.compile(r"[\w.-]+(?:/[\w.-]+)*/?")
# What the documentation names as files: source, pages, recordings, settings, schemas.
FILE_SUFFIXES = {".py", ".md", ".sh", ".js", ".mjs", ".json", ".yaml", ".yml", ".toml",
                 ".avsc", ".sse", ".jsonl", ".txt", ".html", ".css", ".png", ".tpl", ".cfg"}
INTEGRATION = "tests/integration/"


def _pages() -> list[Path]:
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


@cache
def _top_level() -> frozenset[str]:
    # What a checkout holds at its root; hidden entries and the install's metadata are not cited.
    return frozenset(entry.name for entry in REPO_ROOT.iterdir()
                     if not entry.name.startswith(".") and not entry.name.endswith(".egg-info"))


def _is_cited_path(span: str) -> bool:
    if "/" not in span or not PATH_WORD.fullmatch(span) or span.startswith("."):
        return False
    first = span.split("/", 1)[0]
    if first.isupper():  # a placeholder for the user's own folder: `DIR/checkpoints.jsonl`
        return False
    return first in _top_level() or PurePosixPath(span.rstrip("/")).suffix in FILE_SUFFIXES


def cited_paths(text: str) -> list[str]:
    """The repository paths a page names in its inline code spans, in order."""
    prose = FENCE.sub("", text)
    found = []
    for match in CODE_SPAN.finditer(prose):
        span = match.group(2).strip().split("::", 1)[0]
        if _is_cited_path(span):
            found.append(span)
    return found


def problems_of(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    problems = []
    for path in cited_paths(text):
        target = REPO_ROOT / path
        if not target.exists():
            problems.append(f"`{path}` does not exist")
        elif path.startswith(INTEGRATION) and not target.is_dir():
            problems.append(f"`{path}`: cite the folder under {INTEGRATION}, not a test file")
    for link in LINK.findall(FENCE.sub("", text)):
        if re.match(r"[a-z]+:", link) or link.startswith("#"):
            continue
        if not (page.parent / link.split("#", 1)[0]).exists():
            problems.append(f"link ({link}) does not exist")
    return problems


@pytest.mark.parametrize("page", _pages(), ids=lambda page: page.name)
def test_every_path_a_page_cites_exists(page: Path) -> None:
    assert problems_of(page) == []


def test_what_counts_as_a_cited_path() -> None:
    text = ("`services/gateway/calls/runner.py`, `calls/host.py`, `tests/integration/`, "
            "`tests/x.py::test_y`, `text/event-stream`, `DIR/quarantine/`, `runs.py`, "
            "`.venv/bin/python`, `DIR/quarantine/x.avro`, ``GET /v1/runs``\n```\nbench/nowhere.py\n```\n")
    assert cited_paths(text) == ["services/gateway/calls/runner.py", "calls/host.py",
                                 "tests/integration/", "tests/x.py"]


def test_a_missing_path_and_an_integration_test_file_are_reported(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("`schemas/nowhere.py` and `tests/integration/conftest.py`, "
                    "[gone](gone.md)\n", encoding="utf-8")
    assert problems_of(page) == [
        "`schemas/nowhere.py` does not exist",
        f"`tests/integration/conftest.py`: cite the folder under {INTEGRATION}, not a test file",
        "link (gone.md) does not exist"]
