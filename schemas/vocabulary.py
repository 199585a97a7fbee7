"""The closed, typed neutral vocabulary: every normalized value a ModelEvent may carry.

Each vocabulary is a ``Literal`` (for annotations and type checkers) and a tuple of its values
(for code and tests), kept in step by ``_values``. Values an adapter reads from a provider are
*normalized* into these; an adapter never makes a "normalized" value out of a raw string. A raw
value it does not know maps to the vocabulary's named fallback, and the raw value is kept in the
payload's raw field:

=====================  =======================  ==========================================
vocabulary             fallback                 where the raw value stays
=====================  =======================  ==========================================
FinishReason           ``other``                RunFinished.raw_reason
AwaitingReason         (none: closed)           RunAwaiting.raw_reason
RunStatus              (none: closed)           RunStatus.raw_status
HostedToolType         ``other``                Hosted.name (the provider's tool name)
SourceType             ``other``                the envelope (Citation has no raw field)
SourceTrust            ``unknown``              (none: a verdict of the tenant's policy)
PolicyViolationType    (none: closed)           PolicyViolation.note
ProviderErrorType      ``provider_error``       Error.code (the provider's code or type)
=====================  =======================  ==========================================

``FinishReason`` has two non-answers: ``other`` — the provider named a reason this revision
does not map (raw_reason holds it) — and ``unknown`` — the provider gave none (a stream that
ended without a finish reason, FINISH_REASON_UNSPECIFIED).

``ErrorType`` is the union of what adapters detect themselves (``AdapterErrorType``: hostile
input — adapters/base.py's taxonomy — truncation, size, sequencing, damaged media or arguments)
and the normalized class of an error the provider reported (``ProviderErrorType``).

``schemas/vocabulary_check.py`` checks one ModelEvent against these vocabularies.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar, get_args

__all__ = [
    "ADAPTER_ERROR_TYPES", "AWAITING_REASONS", "ERROR_TYPES", "EXECUTORS", "FINISH_REASONS",
    "HOSTED_STATUSES", "HOSTED_TOOL_TYPES", "HOSTILE_INPUT_ERRORS", "POLICY_VIOLATIONS",
    "PROVIDER_ERROR_TYPES", "REASONING_FORMS", "ROLES", "RUN_STARTED_STATUSES", "RUN_STATUSES",
    "SOURCE_TRUSTS", "SOURCE_TYPES", "TERMINAL_STATUSES", "TRANSPORTS", "AdapterErrorType",
    "AwaitingReason", "ErrorType", "Executor", "FinishReason", "HostedStatus", "HostedToolType",
    "HostileInputError", "PolicyViolationType", "ProviderErrorType", "ReasoningForm", "Role",
    "RunStartedStatus", "RunStatusValue", "SourceTrust", "SourceType", "TerminalStatus",
    "Transport", "normalized",
]


_V = TypeVar("_V", bound=str)
_F = TypeVar("_F")


def _values(literal: Any) -> tuple[Any, ...]:
    return tuple(get_args(literal))


def normalized(value: object, values: tuple[_V, ...], fallback: _F) -> _V | _F:
    """``value`` as the vocabulary's when it is one of ``values``, else ``fallback`` (the caller
    keeps the raw value where the vocabulary's table says)."""
    return values[values.index(value)] if value in values else fallback


# --- the run ------------------------------------------------------------------------------------

RunStartedStatus = Literal["queued", "in_progress"]
RunStatusValue = Literal["queued", "in_progress", "requires_action"]
TerminalStatus = Literal["completed", "incomplete", "failed", "cancelled"]

# Why a provider call ended (RunFinished.reason).
FinishReason = Literal[
    "end_turn",  # the model finished its answer
    "stop_sequence",  # a caller's stop sequence matched
    "max_tokens",  # the output token limit cut it
    "context_window_exceeded",  # the context window filled up
    "content_filter",  # a safety/recitation/policy filter withheld or cut the output
    "refusal",  # the model declined
    "error",  # the call failed (the error event says how)
    "cancelled",  # the caller cancelled it
    "budget_exceeded",  # a spending/compute budget ran out (Interactions)
    "unsupported_language",  # Gemini LANGUAGE
    "no_image",  # Gemini NO_IMAGE: an image model produced none
    "other",  # FALLBACK: a raw reason this revision does not map (raw_reason keeps it)
    "unknown",  # no reason given
]

# Why a provider call ended without ending the run (RunAwaiting.reason).
AwaitingReason = Literal["tool_results", "approval", "continuation"]

# --- output -------------------------------------------------------------------------------------

Role = Literal["assistant"]
ReasoningForm = Literal["summary", "raw", "redacted"]

# What a provider-run tool is (Hosted.tool_type), whichever provider runs it.
HostedToolType = Literal[
    "web_search", "web_fetch", "file_search", "code_execution", "image_generation",
    "image_search", "maps_search",  # Google Maps grounding (both Gemini APIs)
    "mcp", "shell", "tool_search", "advisor", "compaction", "retrieval", "media_processing",
    "other",  # FALLBACK: a tool this revision does not name (Hosted.name keeps the raw name)
]
Executor = Literal["provider", "client"]
HostedStatus = Literal["in_progress", "completed", "failed", "incomplete", "cancelled"]

# What a citation points at (Citation.source_type).
SourceType = Literal[
    "url",  # a web page
    "document",  # a document of the request (Anthropic char/page/block locations, Vertex RAG)
    "file",  # a stored file (file search, Interactions file_citation)
    "container_file",  # a file a code container wrote (OpenAI)
    "search_result",  # a search result block of the request (Anthropic)
    "image",  # an image search result (Gemini)
    "place",  # a Google Maps place (Gemini maps grounding chunk, Interactions place_citation)
    "other",  # FALLBACK: a source this revision does not name
]

# The tenant's verdict on a source (Citation.trust, Hosted.trust and Hosted.source_trust's
# values), stamped by the worker from its policy file (services/policy/hosted.py): ``unknown``
# when no policy names the source, or no policy is configured.
SourceTrust = Literal["trusted", "untrusted", "blocked", "unknown"]

# What a policy.violation found in what a hosted tool did (PolicyViolation.violation).
PolicyViolationType = Literal[
    "blocked_source",  # evidence or a citation from a blocked source
    "mcp_server_not_allowed",  # an MCP call to a server the tenant's list does not name
    "code_network_forbidden",  # code execution used the network where the tenant forbids it
    "injection_in_hosted_content",  # content a hosted tool returned reads like an injection
]

# --- errors -------------------------------------------------------------------------------------

# adapters/base.py's taxonomy for hostile input.
HostileInputError = Literal["malformed_frame", "unexpected_shape", "invalid_utf8",
                            "protocol_violation"]
# What an adapter detects itself, beyond hostile input.
AdapterErrorType = Literal[
    "malformed_frame", "unexpected_shape", "invalid_utf8", "protocol_violation",
    "stream_truncated",  # input ended before the provider's terminal signal
    "value_too_large",  # a value too large to hold, in the envelopes only
    "sequence_gap",  # sequence numbers skipped (OpenAI Responses)
    "malformed_media",  # media data that is not base64
    "malformed_tool_arguments",  # streamed arguments that cannot be placed
    "message_interrupted",  # a message started again before it ended (Anthropic)
    "record_too_large",  # the stream processor's stand-in for an event no record holds
]
# The class of an error the provider reported (Error.code keeps the provider's own word).
ProviderErrorType = Literal[
    "invalid_request", "authentication", "permission", "not_found", "request_too_large",
    "rate_limited", "quota_exceeded", "billing", "server_error", "overloaded", "timeout",
    "cancelled", "content_filter", "context_length_exceeded",
    "tool_call_error",  # the model's tool calling failed (Gemini MALFORMED_FUNCTION_CALL, ...)
    "provider_error",  # FALLBACK: an error the provider did not classify, or not in this list
]
ErrorType = Literal[AdapterErrorType, ProviderErrorType]

# --- delivery -----------------------------------------------------------------------------------

Transport = Literal["sse", "webhook", "poll", "executor"]

RUN_STARTED_STATUSES: tuple[RunStartedStatus, ...] = _values(RunStartedStatus)
RUN_STATUSES: tuple[RunStatusValue, ...] = _values(RunStatusValue)
TERMINAL_STATUSES: tuple[TerminalStatus, ...] = _values(TerminalStatus)
FINISH_REASONS: tuple[FinishReason, ...] = _values(FinishReason)
AWAITING_REASONS: tuple[AwaitingReason, ...] = _values(AwaitingReason)
ROLES: tuple[Role, ...] = _values(Role)
REASONING_FORMS: tuple[ReasoningForm, ...] = _values(ReasoningForm)
HOSTED_TOOL_TYPES: tuple[HostedToolType, ...] = _values(HostedToolType)
EXECUTORS: tuple[Executor, ...] = _values(Executor)
HOSTED_STATUSES: tuple[HostedStatus, ...] = _values(HostedStatus)
SOURCE_TYPES: tuple[SourceType, ...] = _values(SourceType)
SOURCE_TRUSTS: tuple[SourceTrust, ...] = _values(SourceTrust)
POLICY_VIOLATIONS: tuple[PolicyViolationType, ...] = _values(PolicyViolationType)
HOSTILE_INPUT_ERRORS: tuple[HostileInputError, ...] = _values(HostileInputError)
ADAPTER_ERROR_TYPES: tuple[AdapterErrorType, ...] = _values(AdapterErrorType)
PROVIDER_ERROR_TYPES: tuple[ProviderErrorType, ...] = _values(ProviderErrorType)
ERROR_TYPES: tuple[ErrorType, ...] = ADAPTER_ERROR_TYPES + PROVIDER_ERROR_TYPES
TRANSPORTS: tuple[Transport, ...] = _values(Transport)
