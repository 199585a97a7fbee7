"""The README's figures are docs/performance.md's headline table, word for word.

Figures live once, in docs/performance.md; the README shows its headline table (between the
``<!-- figures -->`` markers) as it is there, so a re-measured figure cannot be updated in one
place and left stale in the other. Every table says which commit's code it measured, and that
commit is in the repository's history.
"""

from __future__ import annotations

import re
import subprocess

from tests.paths import REPO_ROOT

FIGURES = re.compile(r"<!-- figures -->\n(.*?)<!-- /figures -->", re.S)
# "Measured at 19ea350, 2026-12-04", "at 0c36c2d", a table's "6836311, 2026-12-02".
MEASURED_AT = re.compile(r"\bat ([0-9a-f]{7,40})\b|\b([0-9a-f]{7}), \d{4}-\d{2}-\d{2}", re.I)


def _headline(name: str) -> str:
    found = FIGURES.search((REPO_ROOT / name).read_text(encoding="utf-8"))
    assert found is not None, f"{name}: no table between the figures markers"
    return found.group(1)


def test_the_readme_shows_the_performance_page_headline_table() -> None:
    assert _headline("README.md") == _headline("docs/performance.md")


def test_every_headline_row_names_its_command_and_commit() -> None:
    rows = [row for row in _headline("docs/performance.md").splitlines()[2:] if row.strip()]
    assert len(rows) >= 7
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert re.fullmatch(r"`bench/\w+\.py`", cells[2]), row
        assert (REPO_ROOT / cells[2].strip("`")).is_file(), row
        assert re.fullmatch(r"[0-9a-f]{7}, \d{4}-\d{2}-\d{2}", cells[3]), row


def test_every_commit_a_figure_was_measured_at_is_in_the_history() -> None:
    page = (REPO_ROOT / "docs/performance.md").read_text(encoding="utf-8")
    commits = {at or dated for at, dated in MEASURED_AT.findall(page)}
    assert len(commits) >= 7
    unknown = [commit for commit in sorted(commits)
               if subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"],
                                 cwd=REPO_ROOT, capture_output=True).returncode != 0]
    assert unknown == []
