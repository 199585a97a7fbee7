"""The default per-user directories of modelevents, after the XDG Base Directory spec: one home
for each, so that every part that keeps state (the worker, the demo, the local Kafka broker) or
a cache (the broker's jars) finds the same place.

    state_dir(NAME)   $XDG_STATE_HOME/modelevents/NAME   (~/.local/state/modelevents/NAME)
    cache_dir(NAME)   $XDG_CACHE_HOME/modelevents/NAME   (~/.cache/modelevents/NAME)

A variable unset, empty or relative is ignored, as the spec says ("If an implementation
encounters a relative path in any of these variables it should consider the path invalid").
Nothing else is imported here: the broker's module uses it without the settings tree's models.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir", "state_dir"]


def _base(variable: str, fallback: str) -> Path:
    # ``fallback`` is relative to the home directory, as the spec's defaults are.
    root = os.environ.get(variable, "").strip()
    return Path(root) if root and os.path.isabs(root) else Path.home() / fallback


def state_dir(name: str) -> Path:
    """The default state directory of ``name`` (the worker's, the demo's, the local broker's
    ``kafka``): ``$XDG_STATE_HOME/modelevents/NAME``, or ``~/.local/state/modelevents/NAME``
    when the variable is unset, empty or relative."""
    return _base("XDG_STATE_HOME", ".local/state") / "modelevents" / name


def cache_dir(name: str) -> Path:
    """The default cache directory of ``name`` (the local broker's jars: ``kafka``):
    ``$XDG_CACHE_HOME/modelevents/NAME``, or ``~/.cache/modelevents/NAME`` when the variable is
    unset, empty or relative."""
    return _base("XDG_CACHE_HOME", ".cache") / "modelevents" / name
