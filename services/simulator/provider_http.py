"""What each provider's HTTP answers look like around the body: headers and error bodies.

The simulator's imitation of each provider's envelope, one :class:`Envelope` per provider (the
API's provider is its fact, ``adapters.registry.api_facts(api).provider``). Shapes from the
references (no secrets, no real organisation ids):

- OpenAI (OpenAI Error codes guide): ``x-request-id: req_…``, ``openai-version``,
  ``openai-processing-ms``, ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (reset as
  Go durations); errors ``{"error": {"message", "type", "param", "code"}}``; the SDK honours
  ``retry-after-ms`` then ``retry-after``.
- Anthropic (Claude Errors reference): ``request-id``, ``anthropic-ratelimit-*``;
  errors ``{"type": "error", "error": {"type", "message"}, "request_id"}``; 529 is
  ``overloaded_error``.
- Google (Google API errors): errors ``{"error": {"code", "message", "status",
  "details"}}`` with ``google.rpc.RetryInfo{retryDelay}`` on 429; ``server-timing`` and ``vary``
  as recorded.

The SSE content type of each API is its fact too (``ApiFacts.sse_content_type``).
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelevents.adapters.registry import api_facts

_OPENAI_TYPES = {400: "invalid_request_error", 401: "invalid_request_error",
                 404: "invalid_request_error", 429: "requests", 500: "server_error",
                 502: "server_error", 503: "server_error"}
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                    403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                    429: "rate_limit_error", 500: "api_error", 504: "timeout_error",
                    529: "overloaded_error"}
_GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                  404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                  503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}

# A provider's error word → the HTTP status it comes with (what a recorded error body was
# answered with). Anthropic: error.type (Claude Errors reference).
ANTHROPIC_ERROR_STATUS = {
    "invalid_request_error": 400, "authentication_error": 401, "billing_error": 402,
    "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
    "rate_limit_error": 429, "api_error": 500, "timeout_error": 504, "overloaded_error": 529,
}
# OpenAI error types/codes → HTTP status (OpenAI Error codes guide).
OPENAI_ERROR_STATUS = {
    "invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
    "not_found_error": 404, "rate_limit_exceeded": 429, "insufficient_quota": 429,
    "requests": 429, "tokens": 429, "server_error": 500, "service_unavailable": 503,
}


def _openai_ratelimit(remaining: int, reset_ms: int = 120) -> dict[str, str]:
    return {"x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": str(remaining),
            "x-ratelimit-reset-requests": f"{reset_ms}ms", "x-ratelimit-limit-tokens": "200000",
            "x-ratelimit-remaining-tokens": "199000" if remaining else "0",
            "x-ratelimit-reset-tokens": f"{reset_ms}ms"}


def _anthropic_ratelimit(remaining: int) -> dict[str, str]:
    return {"anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": str(remaining),
            "anthropic-ratelimit-requests-reset": "2026-01-01T00:00:01Z",
            "anthropic-ratelimit-tokens-limit": "40000",
            "anthropic-ratelimit-tokens-remaining": "39000" if remaining else "0",
            "anthropic-ratelimit-tokens-reset": "2026-01-01T00:00:01Z"}


def _openai_error(status: int, message: str, rid: str, param: str | None,
                  retry_after_ms: int | None, problems: list[str] | None) -> dict:
    code = {429: "rate_limit_exceeded", 404: "not_found"}.get(status)
    return {"error": {"message": message, "type": _OPENAI_TYPES.get(status, "server_error"),
                      "param": param, "code": code}}


def _anthropic_error(status: int, message: str, rid: str, param: str | None,
                     retry_after_ms: int | None, problems: list[str] | None) -> dict:
    return {"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"),
                                       "message": message}, "request_id": rid}


def _google_error(status: int, message: str, rid: str, param: str | None,
                  retry_after_ms: int | None, problems: list[str] | None) -> dict:
    details: list[dict[str, Any]] = []
    if problems:
        details.append({"@type": "type.googleapis.com/google.rpc.BadRequest",
                        "fieldViolations": [{"field": p.split(":", 1)[0],
                                             "description": p.split(":", 1)[-1].strip()}
                                            for p in problems]})
    if status == 429 and retry_after_ms is not None:
        details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo",
                        "retryDelay": f"{retry_after_ms / 1000:g}s"})
    return {"error": {"code": status, "message": message,
                      "status": _GOOGLE_STATUS.get(status, "UNKNOWN"), "details": details}}


def _word_status(table: dict[str, int], *fields: str) -> Callable[[dict], int]:
    """The status of the first of ``fields`` of an error object that ``table`` knows (500)."""
    def status(error: dict) -> int:
        for name in fields:
            word = error.get(name)
            if isinstance(word, str) and word in table:
                return table[word]
        return 500
    return status


@dataclass(frozen=True)
class Envelope:
    """A provider's HTTP answer around the body, as the simulator imitates it."""

    request_id_prefix: str
    headers: Callable[[str], dict[str, str]]  # request id → the headers of any answer
    exhausted: Callable[[int], dict[str, str]]  # retry-after ms → the rate-limit state of a 429
    error_body: Callable[[int, str, str, str | None, int | None, list[str] | None], dict]
    # The error object of a recorded error body → the status it was answered with.
    error_status: Callable[[dict], int]


ENVELOPES: dict[str, Envelope] = {
    "openai": Envelope(
        "req_",
        lambda rid: {"x-request-id": rid, "openai-version": "2020-10-01",
                     "openai-processing-ms": "12", **_openai_ratelimit(remaining=499)},
        lambda retry_after_ms: _openai_ratelimit(remaining=0, reset_ms=retry_after_ms),
        _openai_error, _word_status(OPENAI_ERROR_STATUS, "code", "type")),
    "anthropic": Envelope(
        "req_", lambda rid: {"request-id": rid, **_anthropic_ratelimit(remaining=49)},
        lambda retry_after_ms: _anthropic_ratelimit(remaining=0),
        _anthropic_error, _word_status(ANTHROPIC_ERROR_STATUS, "type")),
    # A Google error body's status is its int code (read before any envelope); other bodies
    # at a Google API (a proxy's) are read as OpenAI-style ones.
    "google": Envelope(
        "", lambda rid: {"server-timing": "gfet4t7; dur=12", "vary": "Origin, X-Origin, Referer"},
        lambda retry_after_ms: {}, _google_error,
        _word_status(OPENAI_ERROR_STATUS, "code", "type")),
}


def envelope(api: str) -> Envelope:
    return ENVELOPES[api_facts(api).provider]


def request_id(api: str) -> str:
    return envelope(api).request_id_prefix + secrets.token_hex(12)


def response_headers(api: str, rid: str) -> dict[str, str]:
    return envelope(api).headers(rid)


def retry_headers(api: str, retry_after_ms: int) -> dict[str, str]:
    """Headers of a 429/5xx answer: when to come back, and the provider's rate-limit state."""
    return {"retry-after": str(max(0, math.ceil(retry_after_ms / 1000))),
            "retry-after-ms": str(retry_after_ms), **envelope(api).exhausted(retry_after_ms)}


def error_body(api: str, status: int, message: str, rid: str, *, param: str | None = None,
               retry_after_ms: int | None = None, problems: list[str] | None = None) -> dict:
    return envelope(api).error_body(status, message, rid, param, retry_after_ms, problems)
