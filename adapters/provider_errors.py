"""The errors OpenAI-style and Anthropic APIs report → one normalized class and one retry policy.

Both families name an error by a word of their own — Anthropic's ``error.type``
(``overloaded_error``), OpenAI's ``error.code`` and ``error.type`` (``insufficient_quota``,
``invalid_request_error``; compatible servers and proxies add their own: Groq's
``tool_use_failed``, a proxy's exception name ``BadRequestError``) — and by the HTTP status. An
``Error`` event carries:

- ``error_type``: the normalized class (``schemas/vocabulary.py`` ``ProviderErrorType``) of the
  first word this table knows, else of the HTTP status; ``provider_error`` when neither says more;
- ``code``: the provider's own word, kept raw (the adapter passes the most specific one);
- ``retryable``: what the word says (a 429 ``insufficient_quota`` never heals, a 429
  ``rate_limit_exceeded`` does), else the SDKs' policy by status: 408, 409, 429 and 5xx.

Google's ``google.rpc.Status`` bodies have their own module (``adapters/google_status.py``),
which shares the HTTP status classes below.
"""

from __future__ import annotations

from modelevents.schemas.vocabulary import ProviderErrorType

__all__ = ["HTTP_ERROR_TYPES", "RAW_ERROR_CLASSES", "classify_error"]

# Provider word → (normalized error type, retryable; None: as the HTTP status says).
# Anthropic: reference "Error event" and the SDK's error types; OpenAI: the error codes guide.
RAW_ERROR_CLASSES: dict[str, tuple[ProviderErrorType, bool | None]] = {
    # Anthropic error.type
    "invalid_request_error": ("invalid_request", False),  # also OpenAI's type for a 400
    "authentication_error": ("authentication", False),
    "billing_error": ("billing", False),
    "permission_error": ("permission", False),
    "not_found_error": ("not_found", False),
    "request_too_large": ("request_too_large", False),
    "rate_limit_error": ("rate_limited", True),
    "api_error": ("server_error", True),
    "timeout_error": ("timeout", True),
    "gateway_timeout_error": ("timeout", True),
    "overloaded_error": ("overloaded", True),
    # OpenAI error.code / error.type (and compatible servers')
    "rate_limit_exceeded": ("rate_limited", True),
    "too_many_requests": ("rate_limited", True),
    "tokens": ("rate_limited", True),  # the type of a 429 for tokens per minute
    "requests": ("rate_limited", True),  # … for requests per minute
    "insufficient_quota": ("quota_exceeded", False),  # a 429 that no retry fixes
    "credit_balance_exhausted": ("billing", False),
    "invalid_api_key": ("authentication", False),
    "model_not_found": ("not_found", False),
    "context_length_exceeded": ("context_length_exceeded", False),
    "invalid_prompt": ("invalid_request", False),
    "content_filter": ("content_filter", False),
    "server_error": ("server_error", True),
    "overloaded": ("overloaded", True),
    "timeout": ("timeout", True),
    "vector_store_timeout": ("timeout", True),
    "tool_use_failed": ("tool_call_error", False),  # Groq: the model's tool call was invalid
    "BadRequestError": ("invalid_request", False),  # proxies that pass on their exception name
}

# HTTP status → normalized error type, when no word of the provider's says it.
HTTP_ERROR_TYPES: dict[int, ProviderErrorType] = {
    400: "invalid_request", 401: "authentication", 402: "billing", 403: "permission",
    404: "not_found", 408: "timeout", 413: "request_too_large", 429: "rate_limited",
    500: "server_error", 502: "server_error", 503: "overloaded", 504: "timeout",
    529: "overloaded",
}


def _retryable_status(http_status: int | None) -> bool:
    return http_status is not None and (http_status in (408, 409, 429) or http_status >= 500)


def classify_error(*words: object,
                   http_status: int | None = None) -> tuple[ProviderErrorType, bool]:
    """(normalized error type, retryable) of an error the provider named by ``words`` (most
    specific first: OpenAI's code before its type), sent with ``http_status``."""
    for word in words:
        known = RAW_ERROR_CLASSES.get(word) if type(word) is str else None
        if known is not None:
            error_type, retryable = known
            return error_type, _retryable_status(http_status) if retryable is None else retryable
    by_status: ProviderErrorType = HTTP_ERROR_TYPES.get(http_status or 0) or (
        "server_error" if http_status is not None and http_status >= 500 else "provider_error")
    return by_status, _retryable_status(http_status)
