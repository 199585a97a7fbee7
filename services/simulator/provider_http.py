"""What each provider's HTTP answers look like around the body: headers and error bodies.

Shapes from the references (no secrets, no real organisation ids):

- OpenAI (reference/openai.md §8): ``x-request-id: req_…``, ``openai-version``,
  ``openai-processing-ms``, ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` (reset as
  Go durations); errors ``{"error": {"message", "type", "param", "code"}}``; the SDK honours
  ``retry-after-ms`` then ``retry-after``.
- Anthropic (reference/anthropic.md, errors): ``request-id``, ``anthropic-ratelimit-*``;
  errors ``{"type": "error", "error": {"type", "message"}, "request_id"}``; 529 is
  ``overloaded_error``.
- Google (reference/gemini.md B1): errors ``{"error": {"code", "message", "status",
  "details"}}`` with ``google.rpc.RetryInfo{retryDelay}`` on 429; ``server-timing`` and ``vary``
  as recorded.
"""

from __future__ import annotations

import math
import secrets
from typing import Any

SSE_CONTENT_TYPE = {
    "openai-responses": "text/event-stream; charset=utf-8",
    "openai-chat": "text/event-stream; charset=utf-8",
    "anthropic-messages": "text/event-stream; charset=utf-8",
    "gemini-generate": "text/event-stream",
    "gemini-interactions": "text/event-stream",
}

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


def provider_of(api: str) -> str:
    return {"openai-responses": "openai", "openai-chat": "openai",
            "anthropic-messages": "anthropic"}.get(api, "google")


def request_id(api: str) -> str:
    return ("req_" if provider_of(api) != "google" else "") + secrets.token_hex(12)


def response_headers(api: str, rid: str) -> dict[str, str]:
    provider = provider_of(api)
    if provider == "openai":
        return {"x-request-id": rid, "openai-version": "2020-10-01",
                "openai-processing-ms": "12", **_openai_ratelimit(remaining=499)}
    if provider == "anthropic":
        return {"request-id": rid, **_anthropic_ratelimit(remaining=49)}
    return {"server-timing": "gfet4t7; dur=12", "vary": "Origin, X-Origin, Referer"}


def retry_headers(api: str, retry_after_ms: int) -> dict[str, str]:
    """Headers of a 429/5xx answer: when to come back, and the provider's rate-limit state."""
    headers = {"retry-after": str(max(0, math.ceil(retry_after_ms / 1000))),
               "retry-after-ms": str(retry_after_ms)}
    provider = provider_of(api)
    if provider == "openai":
        headers.update(_openai_ratelimit(remaining=0, reset_ms=retry_after_ms))
    elif provider == "anthropic":
        headers.update(_anthropic_ratelimit(remaining=0))
    return headers


def error_body(api: str, status: int, message: str, rid: str, *, param: str | None = None,
               retry_after_ms: int | None = None, problems: list[str] | None = None) -> dict:
    provider = provider_of(api)
    if provider == "openai":
        code = {429: "rate_limit_exceeded", 404: "not_found"}.get(status)
        return {"error": {"message": message, "type": _OPENAI_TYPES.get(status, "server_error"),
                          "param": param, "code": code}}
    if provider == "anthropic":
        return {"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"),
                                           "message": message}, "request_id": rid}
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
