"""A bundle file (YAML) → a Bundle, resolved against the installed code and the manifest.

The file says what a person chooses: name, description, instruction (text and version), target
(provider, api, model, snapshot), tools (each a declaration and its schema version) and
sampling. What follows from the installed modelevents is filled in, never written by hand:

    request_adapter   requests/<api>@<revision> of the renderer of target.api
    event_adapters    {api: <adapter name>@<revision>} of the event adapter of target.api
    event_schema      modelevents.ModelEvent@<fingerprint of the current schema>
    capabilities      the manifest's entry for target (its version, provider, api, model and
                      every capability resolved)

A file that does not fit is refused with the file and each field at fault (InputError: the
CLI exits 2). ``example.yaml`` beside this module is a complete file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from modelevents.adapters.registry import ADAPTERS
from modelevents.adapters.requests import request_adapter_id
from modelevents.schemas import codec
from modelevents.schemas.bundles import (
    Bundle,
    BundleTarget,
    InstructionContract,
    Sampling,
    ToolContractRef,
)
from modelevents.schemas.errors import InputError
from modelevents.schemas.transcript import APIS, ToolDeclaration
from modelevents.services.gateway.calls.capabilities import Manifest, load_manifest

__all__ = ["EXAMPLE_PATH", "BundleFile", "read_bundle_file", "parse_bundle_file", "resolve",
           "event_schema_id"]

EXAMPLE_PATH = Path(__file__).with_name("example.yaml")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FileTool(_Strict):
    name: str
    schema_version: str = Field(min_length=1, max_length=64)
    description: str | None = None
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}})


class BundleFile(_Strict):
    name: str = Field(min_length=1, max_length=128)
    description: str | None = None
    instruction: InstructionContract
    target: BundleTarget
    tools: list[FileTool] = Field(default_factory=list)
    sampling: Sampling = Field(default_factory=Sampling)


def event_schema_id() -> str:
    """The ModelEvent schema events are written with now, by its fingerprint."""
    fingerprint = codec.schemas().current_fingerprint["modelevents.ModelEvent"].hex()
    return f"modelevents.ModelEvent@{fingerprint}"


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in error['loc']) or '(top)'}: {error['msg']}"
                     for error in exc.errors(include_url=False))


def parse_bundle_file(text: str, source: str) -> BundleFile:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"bundle file {source} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise InputError(f"bundle file {source} must be a YAML mapping (name, instruction, "
                         f"target, tools, sampling); it holds {type(raw).__name__}")
    try:
        return BundleFile.model_validate(raw)
    except ValidationError as exc:
        raise InputError(f"bundle file {source} does not fit — {_problems(exc)}. See "
                         f"`modelevents bundle example` for a complete file.") from None


def read_bundle_file(path: Path | str, manifest: Manifest | None = None) -> Bundle:
    """The bundle ``path`` describes, resolved (module docstring)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read bundle file {path}: {exc.strerror or exc}") from None
    return resolve(parse_bundle_file(text, str(path)), str(path), manifest)


def resolve(file: BundleFile, source: str, manifest: Manifest | None = None) -> Bundle:
    target = file.target
    if target.api not in APIS:
        raise InputError(f"bundle file {source} — target.api: unknown api {target.api!r}; "
                         f"expected one of {', '.join(APIS)}")
    manifest = manifest or load_manifest()
    resolved = manifest.lookup(target.provider, target.api, target.model)
    if resolved is None:
        raise InputError(f"bundle file {source} — target: {target.provider}/{target.api}/"
                         f"{target.model} is not in the capability manifest {manifest.source}; "
                         "choose a target it lists (or add the model to the manifest)")
    tools = []
    for index, tool in enumerate(file.tools):
        try:
            declaration = ToolDeclaration(name=tool.name, description=tool.description,
                                          parameters=tool.parameters)
        except ValidationError as exc:
            raise InputError(f"bundle file {source} — tools.{index} ({tool.name!r}): "
                             f"{_problems(exc)}") from None
        tools.append(ToolContractRef(declaration=declaration,
                                     schema_version=tool.schema_version))
    names = [t.declaration.name for t in tools]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"bundle file {source} — tools: {twice} declared more than once")
    capabilities = {"manifest_version": manifest.document.version,
                    "provider": resolved.provider, "api": resolved.api,
                    "model": resolved.model,
                    **resolved.capabilities.model_dump(mode="json")}
    return Bundle(
        name=file.name, description=file.description, instruction=file.instruction,
        target=target, request_adapter=request_adapter_id(target.api),
        event_adapters={target.api: f"{ADAPTERS[target.api].name}@{ADAPTERS[target.api].revision}"},
        event_schema=event_schema_id(), tools=tools, capabilities=capabilities,
        sampling=file.sampling)
