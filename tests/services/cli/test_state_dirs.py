"""The default state directories (services/settings/tree.py ``state_dir``): the worker's and the
demo's come from one place, ``$XDG_STATE_HOME/modelevents/NAME``, and a relative or empty
variable is ignored as the XDG Base Directory spec says (``~/.local/state``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelevents.services.settings.tree import WorkerConfig, state_dir


def test_the_worker_and_the_demo_share_the_xdg_state_home(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert WorkerConfig().workdir == tmp_path / "modelevents" / "worker"
    assert state_dir("demo") == tmp_path / "modelevents" / "demo"
    # An explicit state_dir wins over the default.
    assert WorkerConfig(state_dir=tmp_path / "own").workdir == tmp_path / "own"


@pytest.mark.parametrize("value", ["", "  ", "relative/state"])
def test_an_unset_empty_or_relative_xdg_state_home_is_the_home_directorys(
        monkeypatch, tmp_path: Path, value: str) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", value)
    assert state_dir("demo") == tmp_path / ".local" / "state" / "modelevents" / "demo"
    assert WorkerConfig().workdir == tmp_path / ".local" / "state" / "modelevents" / "worker"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert state_dir("demo") == tmp_path / ".local" / "state" / "modelevents" / "demo"
