"""The version as ``modelevents.schemas.__version__`` (what the wheel ships:
tests/ops/test_wheel.py)."""

from __future__ import annotations

from importlib.metadata import version

import modelevents.schemas


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
