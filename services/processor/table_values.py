"""The worker's table values — a run's state, an alias's claim — as they are stored on the changelogs.

A value is 16 bytes of release times, then a JSON document::

    <expires_at: f64 LE> <part_expires_at: f64 LE> {"format": 1, ...}

- the release times (epoch seconds, ``inf`` = never) come first, so the release timer reads them
  without decoding the rest: when the whole value may go, and when its adapters may go;
- ``format`` names the layout of the document; this version writes 1 and reads 1:
  a run's value ``{"format": 1, "normalizer": <tree>|null, "sequence": <tree>|null}``
  (``services/run_logic/normalizer.py``'s RunNormalizer: the run's adapters; ``services/run_logic/sequencer.py``'s
  RunSequence: its numbering and RunState), an alias's ``{"format": 1, "run_id": "<run id>"}``.
  Trees are plain data naming only the project's own classes (``services/processor/plain_state.py``).

Reading what other versions wrote:

- Values of versions before format 1 are pickles (the byte after the release times is 0x80).
  They are read through an unpickler that resolves only the classes a state may hold
  (``plain_state.state_classes``) and ``collections.deque``: a pickle that names anything else
  (``os.system``, ``builtins.eval`` …) is refused unread, never run. Such a value is rewritten in
  format 1 the next time its run changes.
- A run whose adapters cannot be rebuilt (a class this version does not have, a field without a
  default) keeps its numbering and RunState: :func:`unpack_run` drops the adapters and says why in
  ``RunWork.dropped`` — the worker flags the run and frames after it start afresh, as after an
  idle release. A value whose numbering cannot be read raises :class:`UnreadableState`: the
  worker then dead-letters the run's records rather than number them from 0 again.
- A format number this version does not know raises UnreadableState (written by a newer
  version: run that version, or a new app id).
"""

from __future__ import annotations

import io
import math
import pickle
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from modelevents.adapters.base import Adapter
from modelevents.schemas import codec
from modelevents.schemas.errors import SchemaError
from modelevents.services.errors import UnreadableState
from modelevents.services.processor import plain_state
from modelevents.services.run_logic.normalizer import RunNormalizer
from modelevents.services.run_logic.sequencer import RunSequence

__all__ = ["FORMAT", "RunWork", "UnreadableState", "expiries", "pack_alias", "unpack_alias",
           "unpack_run", "run_status"]

FORMAT = 1
_EXPIRY = struct.Struct("<dd")
HEADER_BYTES = _EXPIRY.size
_PICKLE_PROTO = 0x80  # the first byte of every pickle of protocol 2 and later


@dataclass
class RunWork:
    """One run's state in the ``run`` table: its adapters and its numbering, in one value so that
    one changelog record writes both (a crash cannot keep one and lose the other)."""

    normalizer: RunNormalizer | None = None
    sequence: RunSequence | None = None
    # Not stored. Set by unpack_run when the stored adapters could not be read (why) …
    dropped: str | None = None
    # … and by the worker when the whole value could not be (why).
    unreadable: str | None = None

    def pack(self, retention: float) -> bytes:
        """The table value: released whole when every part is due, the adapters when idle."""
        adapters = (self.normalizer.last_active + retention if self.normalizer is not None
                    else -math.inf)
        if self.sequence is None:
            numbering = -math.inf
        elif self.sequence.terminal_since is None:
            numbering = math.inf  # a live run's numbering must outlive any pause
        else:
            numbering = self.sequence.terminal_since + retention
        return _EXPIRY.pack(max(adapters, numbering),
                            adapters if self.normalizer is not None else math.inf) + orjson.dumps(
            {"format": FORMAT,
             "normalizer": None if self.normalizer is None else plain_state.to_tree(self.normalizer),
             "sequence": None if self.sequence is None else plain_state.to_tree(self.sequence)})


def expiries(value: bytes) -> tuple[float, float]:
    """(when the whole value may be released, when its adapters may be)."""
    return _EXPIRY.unpack_from(value)


def unpack_run(value: bytes | None) -> RunWork | None:
    """A run's state from its table value (None: no value). Raises UnreadableState."""
    if value is None:
        return None
    doc = _document(value)
    if doc is None:
        # An earlier version's pickle (a RunWork of services/processor/app.py then). Its objects are
        # taken through plain data, so that what this version's classes lack is found here, as
        # for a value of format 1 — not later, in the middle of a frame.
        legacy = _legacy(value)
        sequence = _tree_of(getattr(legacy, "sequence", None))
        work = RunWork(sequence=None if sequence is None else _checked_sequence(sequence))
        _restore_adapters(work, lambda: _tree_of(getattr(legacy, "normalizer", None)))
        return work
    sequence = doc.get("sequence")
    work = RunWork(sequence=None if sequence is None else _checked_sequence(sequence))
    _restore_adapters(work, lambda: doc.get("normalizer"))
    return work


def run_status(value: bytes) -> str | None:
    """The RunState status a run's table value holds (None: no numbering yet), without
    rebuilding its adapters. Raises UnreadableState."""
    doc = _document(value)
    if doc is None:  # an earlier version's pickle: read as the worker reads it
        work = unpack_run(value)
        sequence = None if work is None else work.sequence
    else:
        tree = doc.get("sequence")
        sequence = None if tree is None else _checked_sequence(tree)
    return None if sequence is None else sequence.state.status


def _restore_adapters(work: RunWork, tree: Callable[[], Any]) -> None:
    """The run's adapters, or none and why (``work.dropped``): the numbering goes on without."""
    try:
        normalizer = tree()
        if normalizer is not None:
            work.normalizer = _checked_normalizer(normalizer)
    except UnreadableState as exc:
        work.dropped = f"its stored adapter state could not be read ({exc})"


def pack_alias(run_id: str, expires_at: float) -> bytes:
    return _EXPIRY.pack(expires_at, math.inf) + orjson.dumps({"format": FORMAT, "run_id": run_id})


def unpack_alias(value: bytes | None) -> str | None:
    """The run id an alias names (None: no value). Raises UnreadableState."""
    if value is None:
        return None
    doc = _document(value)
    run_id = _legacy(value) if doc is None else doc.get("run_id")
    if not isinstance(run_id, str):
        raise UnreadableState(f"an alias value names no run id: {str(run_id)[:80]!r}")
    return run_id


def _document(value: bytes) -> dict[str, Any] | None:
    """The JSON document of a value, or None when the value is an earlier version's pickle."""
    if len(value) <= HEADER_BYTES:
        raise UnreadableState(f"a table value of {len(value)} bytes: shorter than its header")
    if value[HEADER_BYTES] == _PICKLE_PROTO:
        return None
    try:
        doc = orjson.loads(memoryview(value)[HEADER_BYTES:])
    except orjson.JSONDecodeError as exc:
        raise UnreadableState(f"a table value is neither format {FORMAT} nor a pickle of an "
                              f"earlier version: {exc}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise UnreadableState(f"a table value of format {str(found)[:40]!r}; this version reads "
                              f"format {FORMAT} (written by a newer version? run that one, or "
                              "start a new app id)")
    return doc


def _tree_of(value: Any) -> Any:
    try:
        return None if value is None else plain_state.to_tree(value)
    except (TypeError, RecursionError) as exc:
        raise UnreadableState(f"an earlier version's pickled state cannot be carried over: "
                              f"{exc}") from None


def _typed(tree: Any, expected: type) -> Any:
    value = plain_state.from_tree(tree)
    if not isinstance(value, expected):
        raise UnreadableState(f"expected a {expected.__name__}, the value holds a "
                              f"{type(value).__name__}")
    return value


# What the worker computes with straight away is checked here, so that a value of the right
# classes but wrong types (hand-written onto the changelog) is refused, not a crash later in a
# batch. The adapters need no such check: the normalizer contains whatever an adapter raises.


def _checked_sequence(tree: Any) -> RunSequence:
    sequence: RunSequence = _typed(tree, RunSequence)
    try:
        codec.encode(sequence.state)  # the RunState against its Avro schema
    except (SchemaError, AttributeError, TypeError) as exc:
        raise UnreadableState(f"its RunState does not fit the schema: {exc}") from None
    if not (type(sequence.applied_offset) is int
            and isinstance(sequence.recent, deque) and all(type(h) is int for h in sequence.recent)
            and (sequence.terminal_since is None or type(sequence.terminal_since) in (int, float))
            and sequence.state.last_seq >= -1):
        raise UnreadableState("its numbering holds values of the wrong types")
    return sequence


def _checked_normalizer(tree: Any) -> RunNormalizer:
    run: RunNormalizer = _typed(tree, RunNormalizer)
    if not (type(run.run_id) is str and type(run.last_active) in (int, float)
            and isinstance(run.applied, dict)
            and all(type(k) is str and type(v) is int for k, v in run.applied.items())
            and isinstance(run.claimed, list) and all(type(c) is str for c in run.claimed)
            and isinstance(run.adapters, dict)
            and all(type(k) is str and isinstance(a, Adapter) for k, a in run.adapters.items())):
        raise UnreadableState("its adapters' bookkeeping holds values of the wrong types")
    return run


class _Vanished:
    """Stands for a class of modelevents that an earlier version's state held and this version
    no longer has: taken in without running anything, then refused where it is carried over
    (the adapters it was part of are dropped; numbering that held one is unreadable)."""

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        pass

    def __setstate__(self, _state: Any) -> None:
        pass


class _StateUnpickler(pickle.Unpickler):
    """Resolves only what a state of an earlier version held: never a callable of its choice."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == ("collections", "deque"):
            return deque
        if (module, name) == ("modelevents.services.processor", "RunWork"):
            return RunWork  # where earlier versions defined it
        cls = plain_state.state_class(f"{module.removeprefix('modelevents.')}.{name}")
        if cls is not None:
            return cls
        short = module.removeprefix("modelevents.")
        if module.startswith("modelevents.") and short.startswith(("adapters.", "schemas.")):
            return type(name, (_Vanished,), {"__module__": module})
        raise UnreadableState(f"an earlier version's pickled state names {module}.{name}, "
                              "which a run's state never holds: refused unread")


def _legacy(value: bytes) -> Any:
    try:
        return _StateUnpickler(io.BytesIO(memoryview(value)[HEADER_BYTES:])).load()
    except UnreadableState:
        raise
    except Exception as exc:
        raise UnreadableState(f"an earlier version's pickled state cannot be read: {exc!r}") from None
