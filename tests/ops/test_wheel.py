"""What the wheel a user installs ships: every package and module of the tree, its data files
(the Avro schemas with their history, the gateway's static files and manifests), ``py.typed``
where users type against the package (PEP 561: without it a type checker ignores the
annotations, the vocabulary's Literals included) and the license.

Built once with the project's own build backend from a copy of what setuptools reads, so the
build leaves the checkout untouched (an in-place ``build/`` would ship stale modules later).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT

TOP_PACKAGES = ("schemas", "adapters", "services", "consumers")
DATA_FILES = ("*.avsc", "*.yaml", "*.js", "*.css", "*.html", "py.typed")


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    out = tmp_path_factory.mktemp("wheel")
    tree = out / "src"
    for name in TOP_PACKAGES:
        shutil.copytree(REPO_ROOT / name, tree / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO_ROOT / name, tree / name)
    built = subprocess.run(
        [sys.executable, "-c",
         "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))",
         str(out)], cwd=tree, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    with zipfile.ZipFile(out / built.stdout.strip().splitlines()[-1]) as wheel:
        return set(wheel.namelist())


def _in_tree(pattern: str) -> list[Path]:
    return [path for top in TOP_PACKAGES for path in (REPO_ROOT / top).rglob(pattern)
            if "__pycache__" not in path.parts]


def _missing(paths: list[Path], shipped: set[str]) -> list[str]:
    return sorted(str(p.relative_to(REPO_ROOT)) for p in paths
                  if f"modelevents/{p.relative_to(REPO_ROOT)}" not in shipped)


def test_every_package_and_module_of_the_tree_is_in_the_wheel(shipped: set[str]) -> None:
    missing = _missing(_in_tree("*.py"), shipped)
    assert not missing, f"not in the wheel (add the package to pyproject.toml): {missing}"


def test_data_files_are_in_the_wheel(shipped: set[str]) -> None:
    missing = _missing([p for pattern in DATA_FILES for p in _in_tree(pattern)], shipped)
    assert not missing, f"data files not in the wheel (package-data): {missing}"
    # The history is what decodes records older producers wrote (legacy fingerprints).
    assert _in_tree("history/*.avsc"), "no historical schemas in the checkout"


def test_typed_packages_and_the_license_are_in_the_wheel(shipped: set[str]) -> None:
    for package in ("schemas", "adapters", "consumers"):
        assert f"modelevents/{package}/py.typed" in shipped, package
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in shipped)
