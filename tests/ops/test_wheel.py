"""The wheel a user installs ships every package of the tree, its data files and the license.

Built from a copy of this checkout (a build in place would leave ``build/`` behind, whose stale
modules a later build ships) with the project's own build backend (setuptools, no isolation: the
test environment has it), then read as the zip it is.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOP_PACKAGES = ("schemas", "adapters", "services", "consumers")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    source = out / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "node_modules", "__pycache__", "tests", "bench"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "--quiet", "-w", str(out), str(source)], check=True, cwd=out)
    (built,) = out.glob("modelevents-*.whl")
    return zipfile.ZipFile(built)


def _tree_packages() -> set[str]:
    found = set()
    for top in TOP_PACKAGES:
        for init in (ROOT / top).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT).parts
            if "__pycache__" not in relative:
                found.add("modelevents/" + "/".join(relative))
    return found


def test_every_package_of_the_tree_is_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    shipped = {name.rsplit("/", 1)[0] for name in wheel.namelist()
               if name.endswith("/__init__.py")}
    missing = sorted(_tree_packages() - shipped)
    assert not missing, f"packages not in the wheel (add them to pyproject.toml): {missing}"


def test_every_module_of_the_tree_is_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    missing = sorted(
        "modelevents/" + str(path.relative_to(ROOT))
        for top in TOP_PACKAGES for path in (ROOT / top).rglob("*.py")
        if "__pycache__" not in path.parts
        and "modelevents/" + str(path.relative_to(ROOT)) not in names)
    assert not missing, f"modules not in the wheel: {missing}"


def test_data_files_and_license_are_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    names = wheel.namelist()
    wanted = [path for top in TOP_PACKAGES for pattern in ("*.avsc", "*.yaml", "*.js", "*.css",
                                                          "*.html", "py.typed")
              for path in (ROOT / top).rglob(pattern)]
    missing = sorted(str(p.relative_to(ROOT)) for p in wanted
                     if "modelevents/" + str(p.relative_to(ROOT)) not in names)
    assert not missing, f"data files not in the wheel (package-data): {missing}"
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names), names
