"""A bundle: the immutable, content-addressed record of everything that shapes a run.

The instruction contract (neutral system text and its version), the target with the exact model
snapshot the provider reports back, the provider rendering (request adapter revision), the tool
contracts and their schema versions, the event adapters' revisions, the capability manifest
entry and the sampling settings. Its id is the SHA-256 of its canonical JSON, so two bundles with
the same content have the same id and a bundle cannot change without changing its id. Runs name
their bundle (``NeutralRequest.bundle``, the input packet, ``run.started``); migration compares
bundles, records decisions about them and demotes a decision when live traffic stops matching it.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from modelevents.schemas.transcript import (
    Message,
    NeutralRequest,
    StructuredOutput,
    Target,
    ToolDeclaration,
)

BUNDLE_ID_PREFIX = "bnd-"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InstructionContract(_Frozen):
    """The neutral system text every rendering of the bundle sends, and its version."""

    text: str
    version: str = Field(min_length=1, max_length=64)


class BundleTarget(_Frozen):
    """Where runs go, and the model snapshot the provider must report back in its events."""

    provider: str
    api: str
    model: str
    snapshot: str | None = None


class ToolContractRef(_Frozen):
    """One tool the bundle grants, with the version of its contract (schema and class)."""

    declaration: ToolDeclaration
    schema_version: str = Field(min_length=1, max_length=64)


class Sampling(_Frozen):
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_output_tokens: int | None = Field(default=None, ge=1)
    structured_output: StructuredOutput | None = None


class Bundle(_Frozen):
    """Everything that shapes a run. ``name`` and ``description`` are labels, yet part of the
    content: renaming a bundle makes a new one, as any other change does."""

    name: str = Field(min_length=1, max_length=128)
    description: str | None = None
    instruction: InstructionContract
    target: BundleTarget
    request_adapter: str = Field(description="name@revision of the request adapter that renders "
                                             "the neutral request for target.api")
    event_adapters: dict[str, str] = Field(description="api -> name@revision of each event "
                                                       "adapter that reads the target's frames")
    event_schema: str = Field(description="name@version of the ModelEvent schema the runs' "
                                          "events are written with")
    tools: list[ToolContractRef] = Field(default_factory=list)
    capabilities: dict[str, Any] = Field(description="The capability manifest entry resolved "
                                                     "for target (manifest version included)")
    sampling: Sampling = Field(default_factory=Sampling)

    def canonical_json(self) -> bytes:
        """Keys sorted, no whitespace, UTF-8: the bytes the id is the hash of."""
        return orjson.dumps(self.model_dump(mode="json", by_alias=True),
                            option=orjson.OPT_SORT_KEYS)

    @property
    def bundle_id(self) -> str:
        return BUNDLE_ID_PREFIX + hashlib.sha256(self.canonical_json()).hexdigest()

    def render(self, transcript: list[Message], **request: Any) -> NeutralRequest:
        """The neutral request that runs ``transcript`` under this bundle (``request`` adds
        run_id, tenant, session_id, stream, background)."""
        return NeutralRequest(
            bundle=self.bundle_id,
            transcript=transcript,
            instructions=self.instruction.text,
            tools=[t.declaration for t in self.tools],
            target=Target(provider=self.target.provider, api=self.target.api,
                          model=self.target.model),
            temperature=self.sampling.temperature,
            max_output_tokens=self.sampling.max_output_tokens,
            structured_output=self.sampling.structured_output,
            **request,
        )
