"""The version as ``modelevents.schemas.__version__`` (what the wheel ships:
tests/ops/test_wheel.py)."""

from __future__ import annotations

from importlib.metadata import version

import modelevents.schemas


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
