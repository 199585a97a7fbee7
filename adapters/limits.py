"""Bounds on what reading one user file may cost, whatever the file holds.

A recording is small on disk but may say "expand me": a gzip body of zeros (1 MB → 1 GB), a YAML
alias bomb ("billion laughs", 500 bytes → 10⁹ nodes once serialized), or an SSE "event" that
never ends. Each reader checks the bound of its own amplification as it goes, so that hostile
input ends in one :class:`~modelevents.adapters.errors.InputLimitError` — naming the file, the limit and the option that
raises it — before the memory is spent, never in a MemoryError or the OOM killer.

    max_body_bytes        one cassette response body, decompressed            (cassette.py)
    max_cassette_bytes    all response bodies of one cassette together        (cassette.py)
    max_ratio             decompressed / compressed bytes of one body         (cassette.py)
    max_yaml_alias_nodes  YAML nodes a cassette's aliases add when expanded   (cassette.py)
    max_event_bytes       one SSE event, JSON line, JSON array element or     (sse.py, framing.py)
                          JSON object: one frame

The defaults are far above every recording of the corpus (largest body 190 KB, compression
ratio ≤ 3, no aliases) and far below what would exhaust a machine. ``using_limits`` sets the
limits and the name of the file for everything read inside it (the CLI commands do); readers
called without it apply :data:`DEFAULT_LIMITS`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class InputLimits:
    max_body_bytes: int = 64 * MiB
    max_cassette_bytes: int = 256 * MiB
    max_ratio: int = 100
    max_yaml_alias_nodes: int = 1_000_000
    max_event_bytes: int = 64 * MiB


DEFAULT_LIMITS = InputLimits()

# The CLI option that raises each limit: what an error tells the user to do.
OPTIONS = {
    "max_body_bytes": "--max-body-bytes",
    "max_cassette_bytes": "--max-cassette-bytes",
    "max_ratio": "--max-ratio",
    "max_yaml_alias_nodes": "--max-yaml-alias-nodes",
    "max_event_bytes": "--max-event-bytes",
}


@dataclass(frozen=True, slots=True)
class _Reading:
    limits: InputLimits
    source: str | None


_current: ContextVar[_Reading] = ContextVar(
    "modelevents_input_limits", default=_Reading(DEFAULT_LIMITS, None))  # noqa: B039 (frozen)


def current_limits() -> InputLimits:
    return _current.get().limits


def current_source() -> str | None:
    """The name of the file being read under :func:`using_limits`, if any."""
    return _current.get().source


@contextmanager
def using_limits(limits: InputLimits, source: str | None = None) -> Iterator[None]:
    """Read everything inside under ``limits``; errors name ``source``."""
    token = _current.set(_Reading(limits, source))
    try:
        yield
    finally:
        _current.reset(token)


def parse_size(text: str) -> int:
    """``1048576``, ``64M``, ``64MiB``, ``2G``, ``512k`` → bytes (binary units). ValueError."""
    cleaned = text.strip().lower().removesuffix("ib").removesuffix("b")
    scale = 1
    if cleaned[-1:] in _UNITS:
        scale, cleaned = _UNITS[cleaned[-1]], cleaned[:-1]
    value = int(cleaned.strip().replace("_", ""))
    if value <= 0:
        raise ValueError(f"{text!r} is not a positive size")
    return value * scale


_UNITS = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
