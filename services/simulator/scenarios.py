"""Which recording a simulated request is answered with, and how: scenarios and their knobs.

A scenario is a recorded file, the API it belongs to, and behaviour knobs. Scenarios come from

- the project's fixtures: every file under ``tests/fixtures/<api>/`` is ``"<api>/<stem>"``;
- ``services/simulator/scenarios.yaml``: hand-written recordings, named behaviour
  (``fail: "429:1"``, ``cut_after_frame: 5`` …) and the default scenario of each endpoint;
- extra folders (``--fixtures DIR``; the recorded corpus ``CORPUS_FIXTURES`` when present, as
  ``"corpus/…"``):
  every file is ``"<folder name>/<relative path without suffix>"``, its API detected on first
  use. A VCR cassette serves its first model call; ``name#N`` its Nth.

A request picks its scenario with the ``x-simulator-scenario`` header or a model named
``sim:<scenario>``; one that names none is matched against the ``by_request`` rules of
``scenarios.yaml`` (API, model glob, strings its compact JSON body contains; first match wins —
how a real model name gets the answer that shows a capability or its absence), else gets the
endpoint's default. Knobs come from the scenario and from ``x-simulator-*`` headers (headers
win), see ``Knobs.from_headers``. A gateway pointed at the simulator routes such models with
``manifest_with_scenarios`` of ``modelevents demo`` (services/cli/commands/demo.py; the shipped
capability manifest knows real model names only).
"""

from __future__ import annotations

import fnmatch
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import orjson
import yaml

from modelevents.schemas.errors import ConfigError
from modelevents.services.errors import UnknownScenario
from modelevents.services.simulator.recordings import STREAM_APIS, Recording, load_recording

REPO_ROOT = Path(__file__).resolve().parents[2]
PROJECT_FIXTURES = REPO_ROOT / "tests" / "fixtures"
CORPUS_FIXTURES = (REPO_ROOT.parent / "shared" / "fixtures").resolve()
# Beside the code: every file under tests/fixtures is a recording (tests walk them all).
SCENARIO_FILE = Path(__file__).resolve().parent / "scenarios.yaml"

HEADER_PREFIX = "x-simulator-"
SCENARIO_MODEL_PREFIX = "sim:"
_NOT_RECORDINGS = {"SOURCES.md", "README.md"}


@dataclass(frozen=True)
class Knobs:
    """How a recording is served. Header form: ``x-simulator-<name with dashes>``."""

    cut_after_frame: int | None = None  # close the connection after this many frames
    fail_status: int | None = None  # answer this status (429, 500, 503, 529 …) …
    fail_count: int = 0  # … for the first this many attempts (per scenario and session)
    delay_ms: float = 0.0  # pause before each frame
    chunk_seed: int | None = None  # random chunking seed; None: a fresh seed per request
    chunking: bool = True  # False: one write per frame
    retry_after_ms: int = 20  # what 429/5xx answers ask the client to wait
    poll_steps: int = 1  # polls that answer in_progress before a background run is terminal
    poll_delay_ms: float = 0.0  # pause before answering a poll (GET of a stored object)
    cancel_polls: int = 0  # polls after a cancel that still answer in_progress (and the cancel)
    resume_overlap: int = 0  # frames before the cursor that a resumed stream sends again
    # One write per frame on a fixed cadence: frame i at the stream's start + i × interval_ms
    # (a late write does not push the ones after it back, unlike delay_ms).
    interval_ms: float = 0.0
    # Each frame's STAMP_MARKER replaced by the time of its write (CLOCK_MONOTONIC, ns): what a
    # client on the same machine subtracts from its arrival time (bench/proxy.py).
    stamp: bool = False
    # The model every frame and object reports as the one that answered (its snapshot), in
    # place of the recorded one: a provider that moved its alias to another snapshot.
    model: str | None = None

    @classmethod
    def parse(cls, values: Mapping[str, Any], where: str) -> dict[str, Any]:
        """Knob overrides from a scenario entry or request headers (names with - or _)."""
        out: dict[str, Any] = {}
        for key, value in values.items():
            name = key.replace("-", "_")
            try:
                if name == "fail":
                    status, _, count = str(value).partition(":")
                    out["fail_status"], out["fail_count"] = int(status), int(count or 1)
                elif name == "chunk_seed" and str(value).lower() in ("off", "none", "frames"):
                    out["chunking"] = False
                elif name in ("cut_after_frame", "fail_status", "fail_count", "chunk_seed",
                              "retry_after_ms", "poll_steps", "cancel_polls", "resume_overlap"):
                    out[name] = int(value)
                elif name in ("delay_ms", "poll_delay_ms", "interval_ms"):
                    out[name] = float(value)
                elif name == "model":
                    out[name] = str(value) or None
                elif name in ("chunking", "stamp"):
                    out[name] = str(value).lower() not in ("0", "false", "off", "no")
                else:
                    raise ConfigError(f"{where}: unknown simulator knob {key!r}; known: fail, "
                                      + ", ".join(f.name for f in fields(cls)))
            except ValueError as exc:
                raise ConfigError(f"{where}: knob {key}={value!r} is not a number: {exc}") from exc
        return out

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> dict[str, Any]:
        values = {name[len(HEADER_PREFIX):]: value for name, value in headers.items()
                  if name.lower().startswith(HEADER_PREFIX)
                  and name.lower() not in (HEADER_PREFIX + "scenario", HEADER_PREFIX + "session")}
        return cls.parse(values, "request headers")


@dataclass
class Scenario:
    name: str
    path: Path
    api: str | None  # None: detected when the recording is first loaded
    knobs: Knobs = field(default_factory=Knobs)
    call: int = 0  # which model call of a cassette
    description: str = ""


@dataclass(frozen=True)
class RequestRule:
    """A scenario for requests that name none: of ``api``, a model matching one of ``models``
    (globs; empty: any), whose compact JSON body contains every string of ``contains``."""

    api: str
    scenario: str
    models: tuple[str, ...] = ()
    contains: tuple[str, ...] = ()

    def matches(self, api: str, model: str | None, body: str) -> bool:
        return (api == self.api
                and (not self.models or (model is not None and any(
                    fnmatch.fnmatchcase(model, glob) for glob in self.models)))
                and all(text in body for text in self.contains))


class ScenarioRegistry:
    """Scenarios by name, their recordings loaded on first use, the request rules and the
    endpoint defaults."""

    def __init__(self) -> None:
        self.scenarios: dict[str, Scenario] = {}
        self.defaults: dict[str, str] = {}
        self.rules: list[RequestRule] = []
        self._recordings: dict[str, Recording] = {}
        self._lock = threading.Lock()

    @classmethod
    def default(cls, extra_dirs: list[Path] | None = None, *,
                with_corpus: bool = True) -> ScenarioRegistry:
        """The project's fixtures and scenario file, the recorded corpus if present, extras."""
        registry = cls()
        registry.add_api_folders(PROJECT_FIXTURES)
        if SCENARIO_FILE.is_file():
            registry.add_scenario_file(SCENARIO_FILE, PROJECT_FIXTURES)
        if with_corpus and CORPUS_FIXTURES.is_dir():
            registry.add_folder(CORPUS_FIXTURES, "corpus")
        for folder in extra_dirs or ():
            registry.add_folder(Path(folder))
        return registry

    def add_api_folders(self, root: Path) -> None:
        """``root/<api>/<file>`` → scenario ``"<api>/<stem>"`` of that API."""
        for api in STREAM_APIS:
            for path in sorted((root / api).glob("*")) if (root / api).is_dir() else ():
                if path.is_file() and path.name not in _NOT_RECORDINGS:
                    self.scenarios[f"{api}/{path.stem}"] = Scenario(f"{api}/{path.stem}", path, api)

    def add_folder(self, root: Path, prefix: str | None = None) -> None:
        """Every recording below ``root`` as ``"<prefix>/<relative path without suffix>"``."""
        if not root.is_dir():
            raise ConfigError(f"fixtures folder {root} does not exist; pass a folder of "
                              "recorded provider streams (.sse, .jsonl, .json, VCR .yaml)")
        if any((root / api).is_dir() for api in STREAM_APIS):
            self.add_api_folders(root)
            return
        prefix = prefix or root.resolve().name
        for path in sorted(root.rglob("*")):
            if (path.is_file() and path.name not in _NOT_RECORDINGS
                    and not path.name.startswith(".")):
                name = f"{prefix}/{path.relative_to(root).with_suffix('').as_posix()}"
                self.scenarios[name] = Scenario(name, path, None)

    def add_scenario_file(self, path: Path, fixtures_root: Path) -> None:
        try:
            doc = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"cannot read simulator scenarios {path}: {exc}") from exc
        for api, name in (doc.get("defaults") or {}).items():
            if api not in STREAM_APIS:
                raise ConfigError(f"{path}: defaults names unknown API {api!r}; "
                                  f"use one of {', '.join(STREAM_APIS)}")
            self.defaults[api] = name
        for name, entry in (doc.get("scenarios") or {}).items():
            entry = dict(entry)
            file = fixtures_root / entry.pop("file")
            api = entry.pop("api", None)
            call = int(entry.pop("call", 0))
            description = entry.pop("description", "")
            knobs = Knobs(**Knobs.parse(entry, f"{path}: scenario {name}"))
            self.scenarios[name] = Scenario(name, file, api, knobs, call, description)
        for index, rule in enumerate(doc.get("by_request") or ()):
            self.rules.append(self._rule(rule, f"{path}: by_request[{index}]"))
        for api, name in self.defaults.items():
            if name not in self.scenarios:
                raise ConfigError(f"{path}: the default for {api} is {name!r}, "
                                  "which is no scenario")

    def _rule(self, entry: Any, where: str) -> RequestRule:
        if not isinstance(entry, dict) or set(entry) - {"api", "model", "contains", "scenario"}:
            raise ConfigError(f"{where}: a rule has api, scenario and optionally model (globs) "
                              f"and contains (strings); got {entry!r}")
        if entry.get("api") not in STREAM_APIS:
            raise ConfigError(f"{where}: unknown API {entry.get('api')!r}; use one of "
                              f"{', '.join(STREAM_APIS)}")
        if entry.get("scenario") not in self.scenarios:
            raise ConfigError(f"{where}: {entry.get('scenario')!r} is no scenario")

        def strings(value: Any) -> tuple[str, ...]:
            return tuple(str(v) for v in ([value] if isinstance(value, str) else value or ()))
        return RequestRule(entry["api"], entry["scenario"], strings(entry.get("model")),
                           strings(entry.get("contains")))

    def match(self, api: str, model: str | None, body: Any) -> str | None:
        """The scenario of the first request rule the request matches, if any."""
        if not self.rules:
            return None
        text = orjson.dumps(body).decode() if body is not None else ""
        return next((r.scenario for r in self.rules if r.matches(api, model, text)), None)

    def resolve(self, name: str | None, api: str) -> Scenario:
        """The scenario ``name`` (or the endpoint's default); UnknownScenario if none."""
        if name is None:
            name = self.defaults.get(api)
            if name is None:
                raise UnknownScenario(f"no scenario named in the request and no default for "
                                      f"{api}; send the x-simulator-scenario header")
        base, _, call = name.partition("#")
        scenario = self.scenarios.get(base)
        if scenario is None:
            close = [n for n in self.scenarios if n.startswith(base.split("/")[0] + "/")][:8]
            raise UnknownScenario(
                f"no simulator scenario named {base!r}; GET /_simulator/scenarios lists them "
                f"({len(self.scenarios)} known{', e.g. ' + ', '.join(close) if close else ''})")
        if call:
            scenario = replace(scenario, name=name, call=int(call))
        return scenario

    def recording(self, scenario: Scenario) -> Recording:
        with self._lock:
            cached = self._recordings.get(scenario.name)
        if cached is None:
            cached = load_recording(scenario.name, scenario.path, scenario.api, scenario.call)
            with self._lock:
                self._recordings[scenario.name] = cached
        return cached

    def listing(self) -> list[dict[str, Any]]:
        return [{"name": s.name, "api": s.api, "file": str(s.path), "description": s.description,
                 "knobs": {f.name: getattr(s.knobs, f.name) for f in fields(Knobs)
                           if getattr(s.knobs, f.name) != getattr(Knobs(), f.name)}}
                for s in self.scenarios.values()]
