"""Google error bodies (``google.rpc.Status``) → the one ``Error`` payload both Gemini adapters emit.

Google APIs answer a failed request with ``{"error": {"code", "message", "status", "details"}}``
(Google API errors, google.rpc.Status): ``code`` is the HTTP status on an HTTP error body (429,
503), the rpc code (0..16) inside a ``google.rpc.Status`` embedded in a resource, and the rpc status
*name* (``"UNAVAILABLE"``) on an Interactions stream ``error`` event; ``status`` is the rpc status
name; ``details`` may carry ``RetryInfo`` (when to retry), ``QuotaFailure`` (which quota) and
``ErrorInfo`` (a reason).

What an ``Error`` made here carries:
- ``error_type``: the normalized class (``schemas/vocabulary.py`` ``ProviderErrorType``) of the rpc
  status name, else of the HTTP status; ``provider_error`` when neither says more;
- ``code``: the provider's own word, kept raw — the rpc status name when there is one, else the
  code as sent;
- ``http_status``: the transport's status, else a ``code`` that is an HTTP status (100..599);
- ``retryable``: transient statuses (``RESOURCE_EXHAUSTED``, ``UNAVAILABLE``, ``DEADLINE_EXCEEDED``,
  ``INTERNAL``, ``ABORTED``), HTTP 408/429/5xx;
- ``message``: the provider's message, then what ``details`` add ("retry after 20s", "quota …").
"""

from __future__ import annotations

from typing import Any

from modelevents.adapters.provider_errors import HTTP_ERROR_TYPES
from modelevents.schemas.events import Error
from modelevents.schemas.vocabulary import ProviderErrorType

__all__ = ["RETRYABLE_STATUSES", "RPC_ERROR_TYPES", "status_error"]

# google.rpc.Code name → normalized error type (schemas/vocabulary.py).
RPC_ERROR_TYPES: dict[str, ProviderErrorType] = {
    "INVALID_ARGUMENT": "invalid_request",
    "FAILED_PRECONDITION": "invalid_request",
    "OUT_OF_RANGE": "invalid_request",
    "ALREADY_EXISTS": "invalid_request",
    "UNIMPLEMENTED": "invalid_request",
    "UNAUTHENTICATED": "authentication",
    "PERMISSION_DENIED": "permission",
    "NOT_FOUND": "not_found",
    "RESOURCE_EXHAUSTED": "rate_limited",
    "UNAVAILABLE": "overloaded",
    "INTERNAL": "server_error",
    "DATA_LOSS": "server_error",
    "ABORTED": "server_error",
    "UNKNOWN": "server_error",
    "DEADLINE_EXCEEDED": "timeout",
    "CANCELLED": "cancelled",
}

# google.rpc statuses of transient failures, worth a retry (429 RESOURCE_EXHAUSTED carries
# RetryInfo.retryDelay, Google API errors).
RETRYABLE_STATUSES = frozenset({"RESOURCE_EXHAUSTED", "UNAVAILABLE", "DEADLINE_EXCEEDED",
                                "INTERNAL", "ABORTED"})


def status_error(error: Any, http_status: int | None = None) -> Error:
    """One Google error object (the value of ``"error"``, or an ``errors[]`` member) → ``Error``.

    ``http_status`` is the transport's (the frame's) status, if known. Never raises: a body of
    any other shape is read for what it has (a string is the message)."""
    if type(error) is not dict:
        error = {"message": "" if error is None else str(error)}
    code = error.get("code")
    status = error.get("status")
    status = status if type(status) is str and status else None
    number = code if type(code) is int else (
        int(code) if type(code) is str and code.isascii() and code.isdigit() else None)
    if http_status is None and number is not None and 100 <= number < 600:
        # HTTP error bodies carry the HTTP status as `code`; a google.rpc Status inside a
        # resource carries its rpc code, 0..16, which is no HTTP status.
        http_status = number
    if status is None and type(code) is str and number is None and code:
        status = code  # Interactions stream error events carry the rpc status name as `code`
    error_type: ProviderErrorType
    if status is not None and status in RPC_ERROR_TYPES:
        error_type = RPC_ERROR_TYPES[status]
    elif http_status is not None and http_status in HTTP_ERROR_TYPES:
        error_type = HTTP_ERROR_TYPES[http_status]
    elif http_status is not None and http_status >= 500:
        error_type = "server_error"
    else:
        error_type = "provider_error"
    retryable = status in RETRYABLE_STATUSES or (
        http_status is not None and (http_status in (408, 429) or http_status >= 500))
    message = error.get("message")
    message = message if type(message) is str and message else (status or "error")
    notes = _detail_notes(error.get("details"))
    if notes:
        message += " (" + "; ".join(notes) + ")"
    raw = status or (None if code is None else str(code))
    return Error(error_type=error_type, message=message, code=raw, http_status=http_status,
                 retryable=retryable)


def _detail_notes(details: Any) -> list[str]:
    notes: list[str] = []
    if type(details) is not list:
        return notes
    for detail in details:
        if type(detail) is not dict:
            continue
        detail_type = str(detail.get("@type", ""))
        if detail_type.endswith("RetryInfo") and detail.get("retryDelay"):
            notes.append(f"retry after {detail['retryDelay']}")
        elif detail_type.endswith("QuotaFailure"):
            violations = detail.get("violations")
            quotas = [v.get("quotaId") or v.get("quotaMetric") for v in
                      (violations if type(violations) is list else ()) if type(v) is dict]
            if quotas:
                notes.append("quota " + ", ".join(str(q) for q in quotas))
        elif detail_type.endswith("ErrorInfo") and detail.get("reason"):
            notes.append(f"reason {detail['reason']}")
    return notes
