"""Docs in code stay short and point where a reader can follow.

Every module docstring of the source tree says what the module is for in at most 30 lines
(longer explanations belong on the docs/ page of that area), and no source file outside tests
cites a file a user does not have: the design card (``DESIGN.md``), the protocol notes
(``reference/<x>.md``) or anything under ``../shared``. A citation names the provider's official
documentation page or a docs/ page of this repository instead.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from tests.paths import REPO_ROOT

MAX_DOCSTRING_LINES = 30

# Folders of the source tree; tests/ may name anything it checks (this file names the patterns).
SOURCE_DIRS = ("schemas", "adapters", "services", "consumers", "bench", "scripts", "docs", "helm")
SOURCE_TOP_FILES = ("README.md", "pyproject.toml", "Dockerfile", "docker-compose.yml",
                    "docker-compose.sasl.yml")
# Released schema versions are kept exactly as they were released (their docs included).
FROZEN = ("schemas/avro/history/", "schemas/avro/tools/history/")
TEXT_SUFFIXES = {".py", ".md", ".sh", ".yaml", ".yml", ".js", ".html", ".css", ".toml", ".tpl",
                 ".txt", ".json", ".avsc"}

# A citation of a file that is not in the repository: the design card, the protocol notes (by
# folder or by name) and the sibling folder of the checkout (``../shared/…``; a module named
# ``../shared.js`` is the UI's own).
UNFOLLOWABLE = re.compile(
    r"DESIGN\.md|reference/[\w*.-]+\.md|\b(?:openai|anthropic|gemini)\.md\b|\.\./shared/")

def _source_files() -> list[Path]:
    files = [REPO_ROOT / name for name in SOURCE_TOP_FILES if (REPO_ROOT / name).is_file()]
    for folder in SOURCE_DIRS:
        files += [path for path in (REPO_ROOT / folder).rglob("*")
                  if path.is_file() and path.suffix in TEXT_SUFFIXES
                  and "__pycache__" not in path.parts
                  and not _relative(path).startswith(FROZEN)]
    return sorted(files)


def _relative(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


def _long_docstring(path: Path) -> str | None:
    if path.suffix != ".py":
        return None
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
    lines = len(docstring.splitlines()) if docstring else 0
    return f"module docstring of {lines} lines" if lines > MAX_DOCSTRING_LINES else None


def _citations(path: Path) -> str | None:
    found = [f"line {number}: {match.group(0)}"
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             for match in UNFOLLOWABLE.finditer(line)]
    return "cites " + ", ".join(found) if found else None


@cache
def _problems() -> dict[str, list[str]]:
    problems: dict[str, list[str]] = {}
    for path in _source_files():
        found = [problem for problem in (_long_docstring(path), _citations(path)) if problem]
        if found:
            problems[_relative(path)] = found
    return problems


def test_the_checks_see_what_they_look_for(tmp_path: Path) -> None:
    long = tmp_path / "long.py"
    long.write_text('"""' + "line\n" * (MAX_DOCSTRING_LINES + 1) + '"""\n', encoding="utf-8")
    short = tmp_path / "short.py"
    short.write_text('"""' + "line\n" * MAX_DOCSTRING_LINES + '"""\n', encoding="utf-8")
    assert _long_docstring(long) == f"module docstring of {MAX_DOCSTRING_LINES + 1} lines"
    assert _long_docstring(short) is None
    for citation in ("see DESIGN.md", "reference/openai.md §2", "(anthropic.md §7)",
                     "../shared/fixtures"):
        cited = tmp_path / "cites.py"
        cited.write_text(f"# {citation}\n", encoding="utf-8")
        assert _citations(cited) is not None, citation
    plain = tmp_path / "plain.py"
    plain.write_text("# OpenAI Responses streaming events reference; docs/architecture.md\n"
                     'import { sharedStreams } from "../shared.js";\n', encoding="utf-8")
    assert _citations(plain) is None


def test_the_tree_is_scanned() -> None:
    scanned = {_relative(path) for path in _source_files()}
    assert {"schemas/events.py", "services/gateway/app.py", "consumers/tools/executor.py",
            "docs/architecture.md", "pyproject.toml"} <= scanned


def test_module_docstrings_are_short_and_cite_what_a_user_has() -> None:
    problems = _problems()
    assert problems == {}, "\n".join(f"{path}: {'; '.join(found)}"
                                     for path, found in sorted(problems.items()))
