"""The ModelEvent contract as Python types.

Mirrors ``schemas/avro/model_event.avsc`` field for field (a test keeps the two in step).
Plain slotted dataclasses, not pydantic models: adapters build hundreds of thousands of these
per second and validation belongs at the edges (decoding, the gateway), not in the hot path.

Every kind of the vocabulary (docs/vocabulary.md) maps to exactly one payload record
(``KIND_PAYLOAD``);
``ModelEvent.payload`` must be an instance of that record's class.

Fields that hold a normalized value are annotated with the closed vocabulary's ``Literal``
types (``schemas/vocabulary.py``), so a type checker rejects a wrong status, reason or tool type
where the event is built; at run time they are plain ``str`` (``schemas/annotations.py``
reads them so for the code that checks and cuts fields by type).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

# Re-exported: code that reads events finds the status tuples beside the records.
from modelevents.schemas.vocabulary import AWAITING_REASONS as AWAITING_REASONS
from modelevents.schemas.vocabulary import RUN_STATUSES as RUN_STATUSES
from modelevents.schemas.vocabulary import TERMINAL_STATUSES as TERMINAL_STATUSES
from modelevents.schemas.vocabulary import TRANSPORTS as TRANSPORTS
from modelevents.schemas.vocabulary import (
    AwaitingReason,
    ErrorType,
    Executor,
    FinishReason,
    HostedStatus,
    HostedToolType,
    PolicyViolationType,
    ReasoningForm,
    Role,
    RunStartedStatus,
    RunStatusValue,
    SourceTrust,
    SourceType,
    TerminalStatus,
    Transport,
)

# --- payload records (one per family of kinds) ----------------------------------------------


@dataclass(slots=True)
class RunStarted:
    status: RunStartedStatus
    provider_object_id: str | None = None
    # The bundle the call runs under (schemas/bundles.py): set from its frames' header
    # (frames.BUNDLE_FRAME_HEADER) by the adapter; None for runs under none.
    bundle: str | None = None


@dataclass(slots=True)
class RunStatus:
    status: RunStatusValue
    raw_status: str | None = None


@dataclass(slots=True)
class RunAwaiting:
    reason: AwaitingReason
    raw_reason: str | None = None


@dataclass(slots=True)
class RunFinished:
    status: TerminalStatus
    reason: FinishReason
    raw_reason: str | None = None


@dataclass(slots=True)
class Message:
    output_index: int
    role: Role
    item_id: str | None = None
    phase: str | None = None


@dataclass(slots=True)
class Text:
    output_index: int
    part_index: int
    text: str
    item_id: str | None = None


@dataclass(slots=True)
class Reasoning:
    output_index: int
    part_index: int
    form: ReasoningForm
    text: str
    item_id: str | None = None
    signature: str | None = None
    encrypted_content: str | None = None
    # "provider/model": opaque signatures and encrypted content are only valid there.
    valid_for: str | None = None


@dataclass(slots=True)
class Media:
    output_index: int
    mime_type: str
    item_id: str | None = None
    data: bytes | None = None
    uri: str | None = None
    partial: bool = False


@dataclass(slots=True)
class Structured:
    output_index: int
    json: str
    valid: bool
    schema_name: str | None = None
    error: str | None = None


@dataclass(slots=True)
class ToolCall:
    output_index: int
    tool_name: str
    tool_call_id: str
    arguments: str  # the fragment on tool.call.delta, the whole JSON text on tool.call
    item_id: str | None = None
    arguments_valid: bool | None = None


@dataclass(slots=True)
class ToolResult:
    tool_name: str
    tool_call_id: str
    output: str
    is_error: bool = False


@dataclass(slots=True)
class Hosted:
    output_index: int
    call_id: str
    tool_type: HostedToolType
    authority: str  # provider | mcp:<server>
    name: str | None = None
    executor: Executor = "provider"
    status: HostedStatus | None = None
    billable_unit: str | None = None
    quantity: float | None = None
    arguments: str | None = None  # JSON text
    evidence: str | None = None  # JSON text
    is_error: bool = False
    # The tenant's verdict on the evidence's sources (schema v4, stamped by the worker): the
    # worst of source_trust's values (blocked, untrusted, unknown, trusted), unknown if none.
    trust: SourceTrust = "unknown"
    source_trust: dict[str, SourceTrust] = field(default_factory=dict)  # source → verdict


@dataclass(slots=True)
class Citation:
    output_index: int
    source_type: SourceType
    part_index: int | None = None
    start: int | None = None
    end: int | None = None
    url: str | None = None
    file_id: str | None = None
    title: str | None = None
    cited_text: str | None = None
    trust: SourceTrust = "unknown"  # the tenant's verdict on url / file_id (schema v4)


@dataclass(slots=True)
class PolicyViolation:
    """What a hosted tool did against the tenant's policy, found after the fact (schema v4)."""

    violation: PolicyViolationType
    note: str
    call_id: str | None = None  # the hosted call (Hosted.call_id) it was found in
    source: str | None = None  # the offending source: URL, file:ID, mcp:LABEL


@dataclass(slots=True)
class Refusal:
    text: str
    category: str | None = None
    explanation: str | None = None
    output_index: int | None = None


@dataclass(slots=True)
class Approval:
    approval_id: str
    tool_name: str | None = None
    server: str | None = None
    arguments: str | None = None
    decision: str | None = None
    decider: str | None = None


@dataclass(slots=True)
class Usage:
    """Always an absolute snapshot for the step, whatever the provider's own semantics."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    total_tokens: int | None = None
    server_tool_units: dict[str, int] = field(default_factory=dict)
    # JSON text: the provider's per-iteration breakdown, when it bills a call as several
    # (Anthropic server-side compaction: [{type, input_tokens, output_tokens, cache_read_tokens,
    # cache_write_tokens}], meanings as above); the fields above are then their sums. (schema v3)
    iterations: str | None = None


@dataclass(slots=True)
class Error:
    error_type: ErrorType
    message: str
    code: str | None = None
    http_status: int | None = None
    retryable: bool = False


@dataclass(slots=True)
class Unknown:
    provider_type: str
    detail: str | None = None


Payload = (
    RunStarted | RunStatus | RunAwaiting | RunFinished | Message | Text | Reasoning | Media
    | Structured | ToolCall | ToolResult | Hosted | Citation | Refusal | Approval | Usage | Error
    | Unknown | PolicyViolation
)

# kind -> payload record. The vocabulary of docs/vocabulary.md, nothing more.
KIND_PAYLOAD: dict[str, type] = {
    "run.started": RunStarted,
    "run.status": RunStatus,
    "run.awaiting": RunAwaiting,
    "run.finished": RunFinished,
    "message.started": Message,
    "message.finished": Message,
    "text.delta": Text,
    "text.done": Text,
    "reasoning.delta": Reasoning,
    "reasoning.done": Reasoning,
    "media.done": Media,
    "structured.done": Structured,
    "tool.call.started": ToolCall,
    "tool.call.delta": ToolCall,
    "tool.call": ToolCall,
    "tool.result": ToolResult,
    "hosted.call": Hosted,
    "hosted.result": Hosted,
    "citation": Citation,
    "refusal": Refusal,
    "approval.requested": Approval,
    "approval.resolved": Approval,
    "usage": Usage,
    "error": Error,
    "unknown": Unknown,
    "policy.violation": PolicyViolation,
}
KINDS = frozenset(KIND_PAYLOAD)
# Payload fields the worker stamps from the tenant's policy (services/run_logic/source_trust.py),
# not translations of the provider's bytes: adapters leave them at their defaults, and what
# compares adapters' output (conformance, replay parity) leaves them out.
JUDGED_FIELDS = frozenset({"trust", "source_trust"})
PAYLOAD_TYPES: dict[str, type] = {cls.__name__: cls for cls in set(KIND_PAYLOAD.values())}


# --- the event ---------------------------------------------------------------------------------


@dataclass(slots=True)
class EventSource:
    frame_id: str
    index: int  # position among the events of its frame
    transport: Transport
    cursor: str | None = None  # provider sequence number / event id


@dataclass(slots=True)
class Envelope:
    content_type: str
    body: bytes  # the provider frame, verbatim


@dataclass(slots=True)
class Piece:
    """Where a record stands among the pieces of an event too large for one Kafka record
    (``schemas/pieces.py`` cuts and joins them)."""

    index: int  # 0 … count - 1
    count: int


@dataclass(slots=True)
class Elided:
    """On a done event whose accumulated value the run's state could not hold (see
    ``adapters/accumulate.py``): which payload field is empty, and which delta kind rebuilds it."""

    field: str  # text | arguments | json | data | …
    from_kind: str  # text.delta | tool.call.delta | …
    size: int  # UTF-8 bytes (bytes for media) of the whole value


@dataclass(slots=True)
class ModelEvent:
    event_id: str
    run_id: str
    tenant: str
    provider: str
    api: str
    model: str | None
    kind: str
    source: EventSource
    received_at: int  # epoch milliseconds
    adapter: str
    envelope: Envelope
    payload: Payload
    seq: int = -1  # assigned by the sequencer
    piece: Piece | None = None  # set on each record of an event cut into pieces
    elided: Elided | None = None  # set on a done event that refers to its deltas

    def projection(self) -> dict[str, Any]:
        """The flat JSON shape printed by `modelevents normalize` and `tail`: kind, seq, the
        payload fields at top level, and where the event came from (no envelope bytes)."""
        out: dict[str, Any] = {"kind": self.kind, "seq": self.seq}
        out.update(payload_dict(self.payload))
        out["run_id"] = self.run_id
        out["provider"] = self.provider
        out["api"] = self.api
        out["model"] = self.model
        out["event_id"] = self.event_id
        out["frame_id"] = self.source.frame_id
        out["transport"] = self.source.transport
        if self.source.cursor is not None:
            out["cursor"] = self.source.cursor
        if self.piece is not None:
            out["piece"] = {"index": self.piece.index, "count": self.piece.count}
        if self.elided is not None:
            out["elided"] = {"field": self.elided.field, "from_kind": self.elided.from_kind,
                             "size": self.elided.size}
        return out


_PAYLOAD_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in fields(cls)) for cls in set(KIND_PAYLOAD.values())
}


def payload_dict(payload: Payload) -> dict[str, Any]:
    out = {name: getattr(payload, name) for name in _PAYLOAD_FIELDS[type(payload)]}
    if type(payload) is RunStarted and payload.bundle is None:
        # Shown only when set: the projections (tail, SSE, conformance files) of runs under no
        # bundle stay what they were before runs had bundles.
        del out["bundle"]
    return out
