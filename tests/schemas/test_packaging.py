"""What the built wheel ships for typed users: py.typed in schemas/, adapters/ and consumers/
(PEP 561: without it a type checker ignores the package's annotations, the vocabulary's
Literals included), the Avro schemas with their history, and the version as
``modelevents.schemas.__version__``."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path

import modelevents.schemas
from tests.paths import REPO_ROOT

# What setuptools reads to build the wheel; copied so the build leaves the checkout untouched.
SOURCES = ("schemas", "adapters", "services", "consumers")


def _build_wheel(out: Path) -> zipfile.ZipFile:
    tree = out / "src"
    tree.mkdir()
    for name in SOURCES:
        shutil.copytree(REPO_ROOT / name, tree / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, tree / name)
    built = subprocess.run(
        [sys.executable, "-c",
         "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))",
         str(out)], cwd=tree, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    return zipfile.ZipFile(out / built.stdout.strip().splitlines()[-1])


def test_the_wheel_ships_py_typed_schemas_and_history(tmp_path: Path) -> None:
    names = set(_build_wheel(tmp_path).namelist())
    for package in ("schemas", "adapters", "consumers"):
        assert f"modelevents/{package}/py.typed" in names, package
    assert "modelevents/schemas/avro/model_event.avsc" in names
    # The history is what decodes records older producers wrote (legacy fingerprints).
    history = sorted(p.name for p in (REPO_ROOT / "schemas/avro/history").glob("*.avsc"))
    assert history, "no historical schemas in the checkout"
    for name in history:
        assert f"modelevents/schemas/avro/history/{name}" in names, name


def test_the_wheel_ships_every_package_of_the_checkout(tmp_path: Path) -> None:
    """pyproject.toml lists the packages one by one: a new one left out would be missing from an
    installed modelevents (services/policy was, at first)."""
    names = set(_build_wheel(tmp_path).namelist())
    packages = [p.parent.relative_to(REPO_ROOT).as_posix()
                for top in ("schemas", "adapters", "services", "consumers")
                for p in (REPO_ROOT / top).rglob("__init__.py")]
    assert "services/policy" in packages
    assert [p for p in packages if f"modelevents/{p}/__init__.py" not in names] == []


def test_version_is_the_installed_distributions() -> None:
    assert modelevents.schemas.__version__ == version("modelevents")
    assert modelevents.schemas.__version__[0].isdigit()


def test_other_missing_attributes_still_raise() -> None:
    try:
        modelevents.schemas.not_an_attribute  # noqa: B018
    except AttributeError as exc:
        assert "not_an_attribute" in str(exc)
    else:
        raise AssertionError("a missing attribute of modelevents.schemas did not raise")
