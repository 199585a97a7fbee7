"""The proxy's own refusals in the provider's error shape, so the SDK raises its usual exception.

    OpenAI (Responses, Chat and compatible servers)  {"error": {"message", "type", "param", "code"}}
    Anthropic (Claude Messages)                      {"type": "error", "error": {"type", "message"}}
    Gemini (generateContent, Interactions)           {"error": {"code", "message", "status"}}

The SDKs pick the exception class by HTTP status (400 BadRequestError, 401, 403, 404, 429
RateLimitError, 503 …) and read the message from these bodies (OpenAI API reference "Error
codes", Claude API "Errors", Google AIP-193). The reason is one of the gateway's own
``ProblemCode``s, with its status — except that a request the gateway cannot take is a 400 here,
as the providers answer it, not the 422 of the gateway's own routes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
from starlette.responses import Response

from modelevents.services.gateway.problems import ProblemCode

__all__ = ["provider_error"]

_OPENAI_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                 403: "permission_error", 404: "not_found_error", 413: "invalid_request_error",
                 429: "rate_limit_error", 502: "api_error", 503: "service_unavailable"}
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                    403: "permission_error", 404: "not_found_error",
                    413: "request_too_large", 429: "rate_limit_error", 502: "api_error",
                    503: "overloaded_error"}
_GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                  404: "NOT_FOUND", 413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED",
                  502: "UNAVAILABLE", 503: "UNAVAILABLE"}


def error_body(api: str, status: int, message: str, code: str) -> dict[str, Any]:
    if api.startswith("anthropic"):
        return {"type": "error",
                "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": message}}
    if api.startswith("gemini"):
        return {"error": {"code": status, "message": message,
                          "status": _GOOGLE_STATUS.get(status, "UNKNOWN")}}
    return {"error": {"message": message, "type": _OPENAI_TYPES.get(status, "api_error"),
                      "param": None, "code": code}}


def provider_error(api: str, code: ProblemCode, message: str,
                   headers: Mapping[str, str] | None = None) -> Response:
    """The answer to a proxied request the gateway refuses itself (nothing was sent upstream);
    ``code`` is the gateway's reason (``x-modelevents-error`` says it for every API);
    ``headers`` go beside the code's own (a Retry-After the refusal computed)."""
    status = 400 if code.status == 422 else code.status
    return Response(orjson.dumps(error_body(api, status, message, code.value)),
                    status_code=status, media_type="application/json",
                    headers={"x-modelevents-error": code.value, **code.headers,
                             **(headers or {})})
