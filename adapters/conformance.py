"""Conformance: a recording's neutral events against the expected ones, and what differs.

Pure: bytes and text in, results out; reading and writing files is the caller's job
(``modelevents conformance``, ``tests/snapshots.py``).

- ``neutral_event``: the part of a ModelEvent a conformance suite pins down — its kind and its
  payload fields. No ids, envelopes or sources (those say how an event was delivered, not what it
  means); media bytes are summarised (length + sha256) so that expected files stay small.
- An *expected events file* is JSON lines, one neutral event per line, optionally preceded by
  one ``{"replay": {...}}`` line saying what the recording alone cannot: the API (``api``) and
  the HTTP status its body came with (``http_status``).
- ``compare``: aligns the two sequences (an inserted or lost event is reported once, not as a
  shift of every later event) and names each difference by event index, kind and field.
  Ids that an adapter mints where the provider named nothing (``mev_`` + 24 hex digits, derived
  from the run id) are compared up to a consistent renaming: another run id, or another
  implementation, mints other ids, and what must hold is that the same call keeps the same id.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from modelevents.adapters.cassette import looks_like_cassette
from modelevents.adapters.framing import detect_framing, frames_from_bytes
from modelevents.adapters.registry import (
    ADAPTERS,
    CLI_CHOICES,
    decoded_docs,
    detect_api,
    normalize_bytes,
    resolve_api,
    translate,
)
from modelevents.schemas.errors import InputError
from modelevents.schemas.events import JUDGED_FIELDS, ModelEvent, payload_dict

EXPECTED_SUFFIX = ".expected.jsonl"
REPLAY_KEYS = ("api", "http_status")
MINTED_ID = re.compile(r"mev_[0-9a-f]{24}")
_MASK = "mev_*"
_SHOWN_CHARS = 160


# --- the neutral form ----------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return value


def neutral_event(event: ModelEvent) -> dict[str, Any]:
    """kind + payload fields, nothing that identifies the delivery nor a policy's verdict
    (``JUDGED_FIELDS``: an adapter leaves them at their defaults)."""
    out: dict[str, Any] = {"kind": event.kind}
    for key, value in payload_dict(event.payload).items():
        if key not in JUDGED_FIELDS:
            out[key] = _plain(value)
    return out


@dataclass(frozen=True)
class Replay:
    """How to replay a recording: what the bytes alone do not say."""

    api: str | None = None
    http_status: int | None = None

    def header(self) -> dict[str, Any] | None:
        fields = {k: v for k, v in (("api", self.api), ("http_status", self.http_status))
                  if v is not None}
        return {"replay": fields} if fields else None


@dataclass
class Expected:
    replay: Replay
    events: list[dict[str, Any]]


def render_expected(events: Iterable[Mapping[str, Any]], replay: Replay | None = None) -> str:
    """The text of an expected events file: the replay line if any, then one event per line."""
    header = replay.header() if replay else None
    lines = [orjson.dumps(header).decode()] if header else []
    lines += [orjson.dumps(dict(e)).decode() for e in events]
    return "".join(line + "\n" for line in lines)


def parse_expected(text: str, name: str = "expected events") -> Expected:
    """Read an expected events file; InputError naming the line for anything else."""
    replay = Replay()
    events: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise InputError(f"{name}, line {number}: not JSON ({exc})") from exc
        if not isinstance(doc, dict):
            raise InputError(f"{name}, line {number}: an event is a JSON object, "
                             f"got {type(doc).__name__}")
        if "replay" in doc and not events and number == 1:
            replay = _replay_of(doc, name)
            continue
        if not isinstance(doc.get("kind"), str):
            raise InputError(f"{name}, line {number}: an event needs a \"kind\" "
                             "(a replay line may only be the first line)")
        events.append(doc)
    return Expected(replay, events)


def _replay_of(doc: dict[str, Any], name: str) -> Replay:
    fields = doc["replay"]
    if set(doc) != {"replay"} or not isinstance(fields, dict):
        raise InputError(f"{name}, line 1: the replay line is {{\"replay\": {{...}}}} alone")
    unknown = sorted(set(fields) - set(REPLAY_KEYS))
    if unknown:
        raise InputError(f"{name}, line 1: unknown replay field(s) {', '.join(unknown)}; "
                         f"known: {', '.join(REPLAY_KEYS)}")
    api, status = fields.get("api"), fields.get("http_status")
    if api is not None:
        if not isinstance(api, str):
            raise InputError(f"{name}, line 1: replay api must be a string")
        try:
            resolve_api(api)
        except InputError:
            raise InputError(f"{name}, line 1: unknown replay api {api!r}; known: "
                             f"{', '.join(c for c in CLI_CHOICES if c != 'auto')}") from None
    if status is not None and (not isinstance(status, int) or isinstance(status, bool)
                               or not 100 <= status <= 599):
        raise InputError(f"{name}, line 1: replay http_status must be an HTTP status, "
                         f"got {status!r}")
    return Replay(api, status)


# --- replaying a recording -----------------------------------------------------------------------


@dataclass
class Replayed:
    api: str
    events: list[ModelEvent]


def replay_recording(body: bytes, *, api: str = "auto", http_status: int | None = None,
                     source_name: str | None = None) -> Replayed:
    """A recording's events, as ``modelevents normalize`` makes them; an HTTP status given is on
    every frame, as if the body had come over HTTP with it. Raises InputError subclasses."""
    if http_status is None:
        result = normalize_bytes(body, api=api, source_name=source_name)
        return Replayed(result.api, result.events)
    if looks_like_cassette(body):
        raise InputError("a cassette records its own HTTP statuses; drop the replay http_status")
    framing = detect_framing(body)
    run_id = "conformance"
    frames = frames_from_bytes(body, run_key=run_id, provider="", api="", framing=framing,
                               http_status=http_status)
    candidates = resolve_api(api)
    chosen = candidates[0] if len(candidates) == 1 else detect_api(
        decoded_docs(frames), candidates=candidates)
    provider = ADAPTERS[chosen].default_provider
    for frame in frames:
        frame.api, frame.provider = chosen, provider
    return Replayed(chosen, translate(frames, chosen, run_id, provider=provider))


# --- comparing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    """One difference. ``field`` None: a whole event expected and not produced (``got`` None) or
    produced and not expected (``expected`` None). Indexes count events from 0."""

    expected_index: int | None
    actual_index: int | None
    kind: str
    field: str | None
    expected: Any = None
    got: Any = None

    def describe(self) -> str:
        if self.field is None and self.actual_index is None:
            return (f"event {self.expected_index} ({self.kind}): expected, not produced: "
                    f"{_shown(self.expected)}")
        if self.field is None:
            return (f"event {self.actual_index} ({self.kind}): produced, not expected: "
                    f"{_shown(self.got)}")
        where = (f"event {self.expected_index}" if self.expected_index == self.actual_index
                 else f"event {self.expected_index} (produced as {self.actual_index})")
        return (f"{where} ({self.kind}) {self.field}: expected {_shown(self.expected)}, "
                f"got {_shown(self.got)}")

    def as_json(self) -> dict[str, Any]:
        return {"expected_index": self.expected_index, "actual_index": self.actual_index,
                "kind": self.kind, "field": self.field, "expected": self.expected,
                "got": self.got}


_ABSENT = object()


def _shown(value: Any) -> str:
    if value is _ABSENT:
        return "(no such field)"
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"


def _masked(value: Any) -> Any:
    if isinstance(value, str):
        return MINTED_ID.sub(_MASK, value)
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _signature(event: Mapping[str, Any]) -> bytes:
    return orjson.dumps(_masked(dict(event)), option=orjson.OPT_SORT_KEYS)


@dataclass
class _Renaming:
    """Minted ids seen so far, both ways: expected → actual and back must stay one-to-one."""

    forward: dict[str, str] = field(default_factory=dict)
    backward: dict[str, str] = field(default_factory=dict)

    def consistent(self, expected: str, got: str) -> bool:
        if self.forward.setdefault(expected, got) != got:
            return False
        return self.backward.setdefault(got, expected) == expected


def _same_text(expected: str, got: str, ids: _Renaming) -> bool:
    exp_ids, got_ids = MINTED_ID.findall(expected), MINTED_ID.findall(got)
    if not exp_ids and not got_ids:
        return expected == got
    if (len(exp_ids) != len(got_ids)
            or MINTED_ID.sub(_MASK, expected) != MINTED_ID.sub(_MASK, got)):
        return False
    return all(ids.consistent(e, g) for e, g in zip(exp_ids, got_ids))


def _value_diffs(expected: Any, got: Any, path: str, ids: _Renaming) -> list[tuple[str, Any, Any]]:
    if isinstance(expected, str) and isinstance(got, str):
        return [] if _same_text(expected, got, ids) else [(path, expected, got)]
    if isinstance(expected, dict) and isinstance(got, dict):
        out = []
        for key in [*expected, *(k for k in got if k not in expected)]:
            sub = f"{path}.{key}" if path else key
            if key not in got:
                out.append((sub, expected[key], _ABSENT))
            elif key not in expected:
                out.append((sub, _ABSENT, got[key]))
            else:
                out += _value_diffs(expected[key], got[key], sub, ids)
        return out
    if isinstance(expected, list) and isinstance(got, list) and len(expected) == len(got):
        out = []
        for index, (e, g) in enumerate(zip(expected, got)):
            out += _value_diffs(e, g, f"{path}[{index}]", ids)
        return out
    # bool is an int in Python; true and 1 are not the same JSON.
    same = type(expected) is type(got) and expected == got
    return [] if same else [(path, expected, got)]


def compare(expected: list[dict[str, Any]], actual: list[dict[str, Any]]) -> list[Difference]:
    """Every difference between the expected and the produced neutral events, in order."""
    ids = _Renaming()
    out: list[Difference] = []

    def pair(i: int, j: int) -> None:
        for path, exp, got in _value_diffs(expected[i], actual[j], "", ids):
            kind = str(expected[i].get("kind"))
            out.append(Difference(i, j, kind, path, exp, got))

    matcher = difflib.SequenceMatcher(None, [_signature(e) for e in expected],
                                      [_signature(a) for a in actual], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        paired = min(i2 - i1, j2 - j1) if op in ("equal", "replace") else 0
        for offset in range(paired):
            pair(i1 + offset, j1 + offset)  # equal blocks: only minted ids can still differ
        for i in range(i1 + paired, i2):
            out.append(Difference(i, None, str(expected[i].get("kind")), None, expected[i]))
        for j in range(j1 + paired, j2):
            out.append(Difference(None, j, str(actual[j].get("kind")), None, None, actual[j]))
    return out


# --- one recording -------------------------------------------------------------------------------

Status = Literal["match", "differ", "no-expected", "error"]


@dataclass
class Verdict:
    """One recording checked: ``events`` are what the adapters produced (neutral form)."""

    status: Status
    api: str | None = None
    differences: list[Difference] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    replay: Replay = field(default_factory=Replay)
    error: str | None = None


def check(body: bytes, expected_text: str | None, *, api: str = "auto",
          source_name: str | None = None) -> Verdict:
    """Replay ``body`` (the expected file's replay line overrides ``api``) and compare."""
    try:
        expected = (parse_expected(expected_text, f"{source_name or 'recording'}{EXPECTED_SUFFIX}")
                    if expected_text is not None else None)
        replay = expected.replay if expected else Replay()
        replayed = replay_recording(body, api=replay.api or api, http_status=replay.http_status,
                                    source_name=source_name)
    except InputError as exc:
        return Verdict("error", error=str(exc))
    events = [neutral_event(e) for e in replayed.events]
    if expected is None:
        return Verdict("no-expected", replayed.api, events=events)
    differences = compare(expected.events, events)
    return Verdict("differ" if differences else "match", replayed.api, differences, events,
                   expected.replay)
