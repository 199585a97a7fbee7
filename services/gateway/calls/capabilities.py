"""The capability manifest: per provider, API and model, what a target can do.

``capabilities.yaml`` beside this module is the shipped manifest (its header explains the
format; each fact cites the protocol reference). ``load_manifest`` validates a manifest file
with pydantic and refuses it with the file, the entry and the field at fault. ``Manifest.lookup``
resolves a model to its ``Capabilities`` (API defaults, then the first matching model entry's
overrides); ``Capabilities.names()`` spells them in the request vocabulary
(``schemas/transcript.py`` CAPABILITIES: ``input.image``, ``background``,
``hosted_tools.web_search`` …), which the router compares with what a request requires.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from modelevents.schemas.transcript import APIS, FEATURES, HOSTED_TOOLS, MODALITIES
from modelevents.services.errors import ManifestError

MANIFEST_PATH = Path(__file__).with_name("capabilities.yaml")

Modality = Literal[MODALITIES]  # type: ignore[valid-type]
HostedTool = Literal[HOSTED_TOOLS]  # type: ignore[valid-type]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Capabilities(_Strict):
    """Everything a target offers; every field is required at the API level."""

    input: list[Modality]
    tools: bool
    server_state: bool
    background: bool
    webhooks: bool
    hosted_tools: list[HostedTool]
    citations: bool
    prompt_caching: bool
    parallel_tool_calls: bool
    structured_output: bool
    reasoning: bool

    def names(self) -> frozenset[str]:
        """The capabilities in the request vocabulary."""
        names = {f"input.{m}" for m in self.input}
        names.update(f for f in FEATURES if getattr(self, f))
        names.update(f"hosted_tools.{t}" for t in self.hosted_tools)
        return frozenset(names)


class CapabilityOverrides(_Strict):
    """What a model entry changes; unset fields keep the API's value."""

    input: list[Modality] | None = None
    tools: bool | None = None
    server_state: bool | None = None
    background: bool | None = None
    webhooks: bool | None = None
    hosted_tools: list[HostedTool] | None = None
    citations: bool | None = None
    prompt_caching: bool | None = None
    parallel_tool_calls: bool | None = None
    structured_output: bool | None = None
    reasoning: bool | None = None


class ModelEntry(_Strict):
    match: list[str] = Field(min_length=1)
    capabilities: CapabilityOverrides = CapabilityOverrides()

    def matches(self, model: str) -> bool:
        # fnmatchcase: model names are case-sensitive on every provider.
        return any(fnmatch.fnmatchcase(model, pattern) for pattern in self.match)


class ApiEntry(_Strict):
    provider: str = Field(min_length=1)
    api: Literal[APIS]  # type: ignore[valid-type]
    capabilities: Capabilities
    models: list[ModelEntry] = Field(min_length=1)


class ManifestFile(_Strict):
    version: Literal[1]
    apis: list[ApiEntry] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> ManifestFile:
        seen: set[tuple[str, str]] = set()
        for entry in self.apis:
            key = (entry.provider, entry.api)
            if key in seen:
                raise ValueError(f"{entry.provider}/{entry.api} is listed twice; merge the "
                                 "entries")
            seen.add(key)
        return self


@dataclass(frozen=True, slots=True)
class Resolved:
    provider: str
    api: str
    model: str
    capabilities: Capabilities


class Manifest:
    """A validated manifest; ``lookup`` answers for one provider/API/model."""

    def __init__(self, document: ManifestFile, source: str = "<memory>") -> None:
        self.document = document
        self.source = source

    def apis_of(self, provider: str) -> list[str]:
        """The provider's APIs in manifest order (the router tries them in that order)."""
        return [e.api for e in self.document.apis if e.provider == provider]

    def providers(self) -> list[str]:
        return list(dict.fromkeys(e.provider for e in self.document.apis))

    def lookup(self, provider: str, api: str, model: str) -> Resolved | None:
        for entry in self.document.apis:
            if entry.provider != provider or entry.api != api:
                continue
            for model_entry in entry.models:
                if model_entry.matches(model):
                    overrides = model_entry.capabilities.model_dump(exclude_none=True)
                    return Resolved(provider, api, model,
                                    entry.capabilities.model_copy(update=overrides))
            return None
        return None


def parse_manifest(text: str, source: str = "<memory>") -> Manifest:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ManifestError(f"capability manifest {source} is not valid YAML: {exc}") from None
    try:
        return Manifest(ManifestFile.model_validate(raw), source)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or '(top)'}: {error['msg']}"
            for error in exc.errors(include_url=False))
        raise ManifestError(
            f"capability manifest {source} does not fit its schema — {problems}. "
            "Fix the file (its header describes the format).") from None


def load_manifest(path: Path | str = MANIFEST_PATH) -> Manifest:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(f"cannot read the capability manifest {path}: {exc}") from None
    return parse_manifest(text, str(path))
