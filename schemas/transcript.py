"""The neutral request: the body of ``POST /v1/runs`` and the stored history of a session.

History is kept in this provider-neutral form and rendered to a provider's
wire format only when a request leaves (``adapters/requests/``), so switching provider
mid-session converts nothing. Pydantic models, because this is an edge: every field is checked,
unknown fields are refused, and an error names the message and part at fault.

    NeutralRequest
    ├── instructions                 system prompt (system messages may also open the transcript)
    ├── transcript: [Message]        role user | assistant | system | tool, parts:
    │     text | image | file                       (user; system: text only)
    │     text | tool_call | reasoning              (assistant)
    │     tool_result                               (tool)
    ├── tools: [ToolDeclaration]     application tools (name, description, JSON-schema parameters)
    ├── hosted_tools: [HostedTool]   provider-hosted tools it enables (schemas/hosted_tools.py)
    ├── target | preferences         one Target (provider, api?, model) or a ranked list
    ├── required_capabilities / preferred_capabilities   names from CAPABILITIES
    ├── background, stream           run as a provider background job; stream or poll it
    ├── run_id, tenant, session_id   optional: client-chosen run id, tenant, conversation
    └── max_output_tokens, temperature, structured_output

Tool calls and results carry both ``tool_name`` and ``tool_call_id``: Gemini keys results by
name, the others by id (Gemini Function calling guide, Claude Tool use guide). Reasoning parts keep
opaque signatures and encrypted content together with their ``origin`` (provider, api, model): the
renderers send them back only to that origin (``Origin.accepts``).

``messages_from_events`` turns a finished run's ModelEvents into neutral messages so that a
session can go on, on any provider.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from modelevents.schemas.events import (
    ModelEvent,
    Reasoning,
    Refusal,
    RunFinished,
    Text,
    ToolCall,
    ToolResult,
)
from modelevents.schemas.hosted_tools import HostedTool, check_hosted_tools

# --- the capability vocabulary (shared by requests, the manifest and the router) -------------

MODALITIES = ("text", "image", "file", "audio")
# The vocabulary's hosted.call tool types, plus Gemini's url_context and google_maps (Gemini
# Interactions API reference, tools).
HOSTED_TOOLS = ("web_search", "file_search", "code_execution", "web_fetch", "image_generation",
                "mcp", "shell", "computer", "tool_search", "url_context", "google_maps")
FEATURES = ("tools", "server_state", "background", "webhooks", "citations", "prompt_caching",
            "parallel_tool_calls", "structured_output", "reasoning")
CAPABILITIES: tuple[str, ...] = (
    *(f"input.{m}" for m in MODALITIES),
    *FEATURES,
    *(f"hosted_tools.{t}" for t in HOSTED_TOOLS),
)

# Provider API names: the adapters' names (adapters/registry.py ADAPTERS), also ModelEvent.api.
APIS = ("openai-responses", "openai-chat", "anthropic-messages", "gemini-interactions",
        "gemini-generate")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --- parts -------------------------------------------------------------------------------------


def _check_base64(value: str | None) -> str | None:
    if value is not None:
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"data is not valid base64 ({exc}); send the bytes base64-encoded "
                             "or give a url instead") from None
    return value


class TextPart(_Strict):
    type: Literal["text"] = "text"
    text: str


class ImagePart(_Strict):
    """An input image: a URL, or base64 bytes with their media type."""

    type: Literal["image"] = "image"
    url: str | None = None
    data: str | None = None
    media_type: str | None = None
    detail: Literal["low", "high", "auto"] | None = None

    _b64 = field_validator("data")(_check_base64)

    @model_validator(mode="after")
    def _one_source(self) -> ImagePart:
        if (self.url is None) == (self.data is None):
            raise ValueError("an image part needs exactly one of url or data (base64)")
        if self.data is not None and not self.media_type:
            raise ValueError("an image part with data needs its media_type (e.g. image/png)")
        return self


class FilePart(_Strict):
    """An input document: a URL, a provider file id, or base64 bytes with media type."""

    type: Literal["file"] = "file"
    url: str | None = None
    file_id: str | None = None
    data: str | None = None
    media_type: str | None = None
    filename: str | None = None

    _b64 = field_validator("data")(_check_base64)

    @model_validator(mode="after")
    def _one_source(self) -> FilePart:
        sources = [s for s in (self.url, self.file_id, self.data) if s is not None]
        if len(sources) != 1:
            raise ValueError("a file part needs exactly one of url, file_id or data (base64)")
        if self.data is not None and not self.media_type:
            raise ValueError("a file part with data needs its media_type (e.g. application/pdf)")
        return self

    @property
    def modality(self) -> str:
        return "audio" if (self.media_type or "").startswith("audio/") else "file"


class Origin(_Strict):
    """Where an opaque signature or encrypted blob was produced; only there is it valid."""

    provider: str
    api: str
    model: str | None = None

    def accepts(self, provider: str, api: str, model: str) -> bool:
        """True when a request to ``provider``/``api``/``model`` may carry the blob back.

        Same provider and API, and the same model — where a dated snapshot the provider echoed
        (``gpt-5-2025-08-07``, ``claude-3-haiku-20240307``) counts as the alias it was asked for
        (OpenAI Responses API reference: the response echoes the dated snapshot). An unknown model
        never matches.
        """
        if self.provider != provider or self.api != api or not self.model:
            return False
        return _undated(self.model) == _undated(model)


_DATED = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


def _undated(model: str) -> str:
    return _DATED.sub("", model.removeprefix("models/"))


class Signature(_Strict):
    """An opaque signature attached to a part, e.g. Gemini's thoughtSignature on a functionCall."""

    value: str
    origin: Origin


class ToolCallPart(_Strict):
    type: Literal["tool_call"] = "tool_call"
    tool_name: str = Field(min_length=1)
    tool_call_id: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    # The model's argument text when it was not a JSON object (then ``arguments`` is {}): kept
    # so nothing the model said is lost; renderers that take a string send it as it was.
    raw_arguments: str | None = None
    # Gemini 3 signs function calls; the signature must go back on the same part
    # (Gemini Thought signatures guide).
    signature: Signature | None = None


class ToolResultPart(_Strict):
    type: Literal["tool_result"] = "tool_result"
    tool_name: str = Field(min_length=1)
    tool_call_id: str = Field(min_length=1)
    output: str
    is_error: bool = False


class ReasoningPart(_Strict):
    """The model's reasoning: readable summary/raw text and the opaque blobs that carry it.

    ``item_id`` is the provider's id of the reasoning item (OpenAI ``rs_…``; required when an
    OpenAI reasoning item is sent back, OpenAI Reasoning guide).
    """

    type: Literal["reasoning"] = "reasoning"
    summary: list[str] = Field(default_factory=list)
    text: str | None = None
    signature: str | None = None
    encrypted_content: str | None = None
    item_id: str | None = None
    origin: Origin | None = None

    @model_validator(mode="after")
    def _opaque_needs_origin(self) -> ReasoningPart:
        if (self.signature or self.encrypted_content) and self.origin is None:
            raise ValueError("a reasoning part with a signature or encrypted_content needs its "
                             "origin (provider, api, model): it is only valid there")
        return self

    @property
    def readable(self) -> str:
        return self.text if self.text is not None else "".join(self.summary)


Part = Annotated[TextPart | ImagePart | FilePart | ToolCallPart | ToolResultPart | ReasoningPart,
                 Field(discriminator="type")]

# Which parts each role may hold.
_ROLE_PARTS: dict[str, tuple[str, ...]] = {
    "system": ("text",),
    "user": ("text", "image", "file"),
    "assistant": ("text", "tool_call", "reasoning"),
    "tool": ("tool_result",),
}


class Message(_Strict):
    role: Literal["system", "user", "assistant", "tool"]
    parts: list[Part] = Field(min_length=1)

    @model_validator(mode="after")
    def _parts_fit_role(self) -> Message:
        allowed = _ROLE_PARTS[self.role]
        for index, part in enumerate(self.parts):
            if part.type not in allowed:
                raise ValueError(f"parts[{index}] is {part.type!r}, which a {self.role} message "
                                 f"cannot hold (allowed: {', '.join(allowed)})"
                                 + ("; put tool results in a message with role 'tool'"
                                    if part.type == "tool_result" else ""))
        return self


# --- declarations, targets, options ------------------------------------------------------------


class ToolDeclaration(_Strict):
    """An application tool the model may call (executed by the application, not the provider)."""

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")
    description: str | None = None
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}})

    @field_validator("parameters")
    @classmethod
    def _object_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise ValueError('parameters must be a JSON schema with "type": "object" '
                             "(every provider takes tool arguments as one object)")
        return value


class Target(_Strict):
    """Where a run goes. Without ``api`` the router picks among the provider's APIs."""

    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)
    api: str | None = None

    @field_validator("api")
    @classmethod
    def _known_api(cls, value: str | None) -> str | None:
        if value is not None and value not in APIS:
            raise ValueError(f"unknown api {value!r}; expected one of {', '.join(APIS)}")
        return value

    def label(self) -> str:
        return f"{self.provider}/{self.api or '*'}/{self.model}"


class StructuredOutput(_Strict):
    """Ask for JSON that fits ``json_schema`` (OpenAI text.format / response_format, Claude
    output_format, Gemini responseJsonSchema)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_\-]{1,64}$")
    json_schema: dict[str, Any] = Field(alias="schema")
    strict: bool = True

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _check_capabilities(values: list[str]) -> list[str]:
    unknown = [v for v in values if v not in CAPABILITIES]
    if unknown:
        raise ValueError(f"unknown capabilities {unknown}; known: {', '.join(CAPABILITIES)}")
    return values


class NeutralRequest(_Strict):
    transcript: list[Message] = Field(min_length=1)
    instructions: str | None = None
    tools: list[ToolDeclaration] = Field(default_factory=list)
    # Each one is required as ``hosted_tools.<type>`` by the router. Left out of the JSON form
    # when empty: a request without hosted tools keeps the input-packet fingerprint and the
    # idempotency digest it had before the field existed (a retry across an upgrade).
    hosted_tools: list[HostedTool] = Field(default_factory=list, exclude_if=lambda v: not v)
    target: Target | None = None
    preferences: list[Target] = Field(default_factory=list)
    required_capabilities: list[str] = Field(default_factory=list)
    preferred_capabilities: list[str] = Field(default_factory=list)
    background: bool = False
    # None: stream, unless background (then poll). background + stream: a background call
    # whose stream can be resumed after a cut (OpenAI Responses, Interactions).
    stream: bool | None = None
    # Who and which run: a client-chosen run id makes a retried POST land on the same run;
    # the tenant defaults to the gateway's. The session id ties runs of one conversation.
    run_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:\-]{1,128}$")
    tenant: str | None = Field(default=None, min_length=1, max_length=128)
    session_id: str | None = None
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    structured_output: StructuredOutput | None = None
    # The bundle the run is started under (schemas/bundles.py). Left out of the JSON form when
    # None, as hosted_tools is, so requests without one keep their fingerprints.
    bundle: str | None = Field(default=None, pattern=r"^bnd-[0-9a-f]{64}$",
                               exclude_if=lambda v: v is None)

    _caps = field_validator("required_capabilities", "preferred_capabilities")(
        _check_capabilities)

    @model_validator(mode="after")
    def _whole(self) -> NeutralRequest:
        if self.target is not None and self.preferences:
            raise ValueError("give exactly one of target (one provider/model) or preferences "
                             "(a ranked list of them)")
        # A request run under a bundle may leave the target to it: the gateway fills it from
        # the bundle before routing (services/gateway/calls/bundled.py).
        if self.target is None and not self.preferences and self.bundle is None:
            raise ValueError("give exactly one of target (one provider/model) or preferences "
                             "(a ranked list of them), or a bundle that names the target")
        names = [t.name for t in self.tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"tools declares {duplicates} more than once; tool names must be "
                             "unique")
        check_hosted_tools(self.hosted_tools)
        _check_transcript(self.transcript)
        return self

    @property
    def streams(self) -> bool:
        """Whether the call streams (``stream``, or by default: unless background)."""
        return self.stream if self.stream is not None else not self.background

    @property
    def targets(self) -> list[Target]:
        return [self.target] if self.target is not None else list(self.preferences)

    def system_text(self) -> str | None:
        """``instructions`` and the opening system messages, joined by blank lines."""
        texts = [self.instructions] if self.instructions else []
        for message in self.transcript:
            if message.role != "system":
                break
            texts.extend(p.text for p in message.parts if isinstance(p, TextPart))
        return "\n\n".join(texts) if texts else None

    def conversation(self) -> list[Message]:
        """The transcript without its opening system messages (see ``system_text``)."""
        return [m for m in self.transcript if m.role != "system"]


def _check_transcript(transcript: list[Message]) -> None:
    """Order rules every provider enforces, checked once here with the index at fault.

    - system messages only open the transcript (Claude and Gemini take one system prompt);
    - a tool_result answers an earlier tool_call with the same id and name;
    - tool_call ids are unique;
    - every tool call is answered before the next user or assistant message (all providers
      reject an unanswered call, Claude Tool use guide); only the last assistant turn may be
      pending.
    """
    calls: dict[str, tuple[str, int]] = {}
    answered: set[str] = set()
    pending: list[str] = []
    seen_other = False
    for m_index, message in enumerate(transcript):
        where = f"transcript[{m_index}]"
        if message.role == "system":
            if seen_other:
                raise ValueError(f"{where}: system messages must come before the first user or "
                                 "assistant message; move it to instructions or make it a user "
                                 "message")
            continue
        seen_other = True
        if message.role in ("user", "assistant") and pending:
            raise ValueError(f"{where}: tool calls {pending} have no tool_result before this "
                             f"{message.role} message; add a tool message with their results")
        for p_index, part in enumerate(message.parts):
            at = f"{where}.parts[{p_index}]"
            if isinstance(part, ToolCallPart):
                if part.tool_call_id in calls:
                    raise ValueError(f"{at}: tool_call_id {part.tool_call_id!r} is used by an "
                                     f"earlier call (transcript[{calls[part.tool_call_id][1]}]); "
                                     "ids must be unique")
                calls[part.tool_call_id] = (part.tool_name, m_index)
                pending.append(part.tool_call_id)
            elif isinstance(part, ToolResultPart):
                call = calls.get(part.tool_call_id)
                if call is None:
                    raise ValueError(f"{at}: tool_result names tool_call_id "
                                     f"{part.tool_call_id!r}, which no earlier tool_call has")
                if call[0] != part.tool_name:
                    raise ValueError(f"{at}: tool_result for {part.tool_call_id!r} names tool "
                                     f"{part.tool_name!r}, but the call was to {call[0]!r}")
                if part.tool_call_id in answered:
                    raise ValueError(f"{at}: tool_call_id {part.tool_call_id!r} is answered "
                                     "twice")
                answered.add(part.tool_call_id)
                pending.remove(part.tool_call_id)


# --- from a finished run's events to neutral messages ------------------------------------------

# A provider call counts as history once it ended: asked for tool results or a continuation, or
# finished with text worth keeping. A failed or cut-off call (no terminal signal, e.g. Claude's
# interrupted message) is not history: the provider never completed it.
_KEPT_FINISH = ("completed", "incomplete")


def messages_from_events(events: Iterable[ModelEvent]) -> list[Message]:
    """The neutral messages of a run: one assistant message per provider call, tool messages
    for the ``tool.result`` events the executor produced.

    Kept: final text (``text.done``), refusals (as text), whole tool calls (``tool.call``),
    reasoning (``reasoning.done``: summary/raw text, signature and encrypted content with their
    origin). A signature whose ``item_id`` is a tool call's id goes on that call (Gemini
    signs calls). Not kept: hosted tools and citations (the provider ran them; their outcome is
    in the text), media, and calls that never reached a terminal signal.
    """
    messages: list[Message] = []
    call: list[Any] | None = None  # parts of the provider call being read
    results: list[ToolResultPart] = []

    def flush_results() -> None:
        if results:
            messages.append(Message(role="tool", parts=list(results)))
            results.clear()

    for event in events:
        kind, payload = event.kind, event.payload
        if kind == "run.started":
            flush_results()
            call = []
        elif kind == "tool.result" and isinstance(payload, ToolResult):
            results.append(ToolResultPart(tool_name=payload.tool_name,
                                          tool_call_id=payload.tool_call_id,
                                          output=payload.output, is_error=payload.is_error))
        elif call is None:
            continue
        elif kind == "text.done" and isinstance(payload, Text) and payload.text:
            call.append(TextPart(text=payload.text))
        elif kind == "refusal" and isinstance(payload, Refusal) and payload.text:
            call.append(TextPart(text=payload.text))
        elif kind == "tool.call" and isinstance(payload, ToolCall):
            call.append(_tool_call_part(payload))
        elif kind == "reasoning.done" and isinstance(payload, Reasoning):
            _add_reasoning(call, payload, Origin(provider=event.provider, api=event.api,
                                                 model=event.model))
        elif kind == "run.awaiting" or (kind == "run.finished" and isinstance(payload, RunFinished)
                                        and payload.status in _KEPT_FINISH):
            # The call's message first, then its results: the executor runs a tool as soon as
            # its call is on ``events``, so a result can be numbered before the call's end.
            if call:
                messages.append(Message(role="assistant", parts=call))
            flush_results()
            call = None
        elif kind == "run.finished":
            call = None
    flush_results()
    return messages


def _tool_call_part(payload: ToolCall) -> ToolCallPart:
    try:
        arguments = orjson.loads(payload.arguments or "{}")
    except orjson.JSONDecodeError:
        arguments = None
    if isinstance(arguments, dict):
        return ToolCallPart(tool_name=payload.tool_name, tool_call_id=payload.tool_call_id,
                            arguments=arguments)
    return ToolCallPart(tool_name=payload.tool_name, tool_call_id=payload.tool_call_id,
                        arguments={}, raw_arguments=payload.arguments)


def _add_reasoning(parts: list[Any], payload: Reasoning, origin: Origin) -> None:
    opaque = bool(payload.signature or payload.encrypted_content)
    # A signature on a call (Gemini generateContent/Interactions tag it with the call's id).
    if payload.signature and not payload.text:
        for index, part in enumerate(parts):
            if isinstance(part, ToolCallPart) and part.tool_call_id == payload.item_id:
                parts[index] = part.model_copy(update={
                    "signature": Signature(value=payload.signature, origin=origin)})
                return
    summary = [payload.text] if payload.form == "summary" and payload.text else []
    raw = payload.text if payload.form == "raw" and payload.text else None
    last = parts[-1] if parts else None
    # OpenAI sends one reasoning item as several events (summary parts, then the encrypted
    # blob) under one item id: they are one part again. Two signed blocks never merge.
    if (isinstance(last, ReasoningPart) and payload.item_id and last.item_id == payload.item_id
            and not (payload.signature and last.signature)
            and not (payload.encrypted_content and last.encrypted_content)
            and last.origin == origin):
        parts[-1] = last.model_copy(update={
            "summary": last.summary + summary,
            "text": (last.text or "") + raw if raw else last.text,
            "signature": last.signature or payload.signature,
            "encrypted_content": last.encrypted_content or payload.encrypted_content,
        })
        return
    if not (summary or raw or opaque):
        return
    parts.append(ReasoningPart(summary=summary, text=raw, signature=payload.signature,
                               encrypted_content=payload.encrypted_content,
                               item_id=payload.item_id, origin=origin))
