"""The default per-user directories (services/settings/xdg.py ``state_dir`` and ``cache_dir``):
the worker's, the demo's and the local Kafka broker's state, and the broker's jar cache, come
from one place each, ``$XDG_STATE_HOME/modelevents/NAME`` and ``$XDG_CACHE_HOME/modelevents/NAME``,
and a relative or empty variable is ignored as the XDG Base Directory spec says
(``~/.local/state``, ``~/.cache``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelevents.services.cli.settings_tree import WorkerConfig, cache_dir, state_dir
from modelevents.services.local.kafka_broker import LocalBrokerSettings


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


def test_the_local_broker_keeps_its_state_and_jars_where_it_always_did(
        monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    broker = LocalBrokerSettings(port=19092, version="4.1.0")
    assert broker.state_root == state_dir("kafka") == tmp_path / "state" / "modelevents" / "kafka"
    assert broker.state_dir == tmp_path / "state" / "modelevents" / "kafka" / "19092"
    assert broker.data_dir == tmp_path / "state" / "modelevents" / "kafka" / "19092" / "data"
    assert broker.cache_root == cache_dir("kafka") == tmp_path / "cache" / "modelevents" / "kafka"
    assert broker.libs_dir == tmp_path / "cache" / "modelevents" / "kafka" / "4.1.0" / "libs"
    # Explicit roots win over the defaults.
    own = LocalBrokerSettings(port=19092, state_root=tmp_path / "s", cache_root=tmp_path / "c")
    assert (own.state_dir, own.version_dir.parent) == (tmp_path / "s" / "19092", tmp_path / "c")


@pytest.mark.parametrize("value", ["", "  ", "relative/dir"])
def test_the_broker_ignores_an_unset_empty_or_relative_xdg_home(
        monkeypatch, tmp_path: Path, value: str) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_STATE_HOME", value)
    monkeypatch.setenv("XDG_CACHE_HOME", value)
    broker = LocalBrokerSettings(port=19092)
    assert broker.state_root == tmp_path / ".local" / "state" / "modelevents" / "kafka"
    assert broker.cache_root == tmp_path / ".cache" / "modelevents" / "kafka"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert cache_dir("avro") == tmp_path / ".cache" / "modelevents" / "avro"
