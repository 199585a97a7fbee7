"""The UI's JavaScript unit tests (``tests/ui/*.test.mjs``: the SSE reader, the formatters, the
link allow-list, the run state folding), run by node's own test runner against the modules the
gateway serves (``services/gateway/static/``), so the suite fails when one of them fails."""

from __future__ import annotations

import shutil
import subprocess

from tests.paths import REPO_ROOT

UI_TESTS = REPO_ROOT / "tests" / "ui"


def test_the_ui_modules_pass_their_node_unit_tests() -> None:
    node = shutil.which("node")
    assert node, "the UI's unit tests need node >= 20 on PATH"
    files = sorted(str(path.relative_to(REPO_ROOT)) for path in UI_TESTS.glob("*.test.mjs"))
    assert len(files) >= 4, files
    ran = subprocess.run([node, "--test", "--test-reporter=tap", *files], cwd=REPO_ROOT,
                         capture_output=True, text=True, timeout=300)
    report = ran.stdout + ran.stderr
    assert ran.returncode == 0, report[-6000:]
    assert "# fail 0" in report and "# pass 0" not in report, report[-2000:]
