"""Every error the gateway answers: one closed vocabulary, one exception, one shape (RFC 9457).

    {"type": "urn:modelevents:problem:body_too_large",   # the code as a URI
     "title": "Request Entity Too Large",                 # the status's phrase
     "status": 413,
     "detail": "a body of 2000000 bytes is over this route's limit …; send a smaller body",
     "error": "a body of 2000000 bytes is over …",        # = detail, the shape before 9457
     "code": "body_too_large"}                            # what a client branches on

:class:`ProblemCode` is every code the gateway answers, each with its status, its one-line
meaning and the headers that always come with it (``Retry-After``, ``WWW-Authenticate``). A
route raises :class:`GatewayProblem` with a code, a detail that says what to do, and members
of its own (``candidates``, ``errors``, ``kept`` …); the app's one exception handler
(``app.py``) answers it. What answers outside a route — the edge, the bare webhook path, the
connection's header deadline — renders the same exception (:meth:`GatewayProblem.response`,
:meth:`GatewayProblem.encoded`), so no answer has another shape. docs/gateway-api.md lists the
vocabulary (tests/services/gateway/test_problems.py checks the list against the enum).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from http import HTTPStatus
from types import MappingProxyType
from typing import Any

import orjson
from fastapi.responses import JSONResponse

from modelevents.schemas.errors import ModelEventsError

__all__ = ["PROBLEM_JSON", "PROBLEM_SCHEMA", "RETRY_AFTER_S", "GatewayProblem", "ProblemCode",
           "ProblemResponse"]

PROBLEM_JSON = "application/problem+json"
TYPE_PREFIX = "urn:modelevents:problem:"
# Seconds a sender is asked to wait before it sends the same request again after Kafka did not
# acknowledge it.
RETRY_AFTER_S = 5


class ProblemCode(StrEnum):
    """A problem's ``code``: its status and meaning are the code's, never the call site's."""

    status: int
    meaning: str
    headers: Mapping[str, str]

    def __new__(cls, value: str, status: int, meaning: str,
                headers: Mapping[str, str] | None = None) -> ProblemCode:
        member = str.__new__(cls, value)
        member._value_ = value
        member.status = status
        member.meaning = meaning
        member.headers = MappingProxyType(dict(headers or {}))
        return member

    @property
    def status_title(self) -> str:
        """The RFC 9457 title: the status's phrase."""
        return HTTPStatus(self.status).phrase

    malformed_request = ("malformed_request", 400, "a header, parameter or body that cannot be "
                         "read as what it must be (Content-Length, Last-Event-ID, a cursor, a "
                         "webhook's headers, a forwarded body without frames)")
    unauthorized = ("unauthorized", 401, "no valid bearer token on /v1/ (api_tokens are "
                    "configured)", {"WWW-Authenticate": "Bearer"})
    signature_rejected = ("signature_rejected", 401, "a webhook delivery whose signature or "
                          "timestamp does not verify against the tenant's secrets")
    forbidden = ("forbidden", 403, "the token's tenant cannot act for the tenant the request "
                 "names")
    not_found = ("not_found", 404, "no such route, run, event, eval result, UI asset, webhook "
                 "provider or tenant secret (another tenant's run is not found either)")
    run_not_found = ("run_not_found", 404, "the run id is another tenant's: nothing was sent or "
                     "written; choose another run id")
    method_not_allowed = ("method_not_allowed", 405, "the path does not take this method "
                          "(Allow names those it takes)")
    request_timeout = ("request_timeout", 408, "the body did not arrive within read_timeout_s")
    headers_timeout = ("headers_timeout", 408, "the request's headers did not arrive within "
                       "header_timeout_s")
    conflict = ("conflict", 409, "not now: a call of the run is in flight (on any replica), "
                "the call ended or is not a background call, or its provider object is not "
                "known yet")
    run_ended = ("run_ended", 409, "the run ended; a new turn is a new run")
    not_pending = ("not_pending", 409, "the run is not waiting for this approval")
    arguments_changed = ("arguments_changed", 409, "the approval was asked for other arguments "
                         "than the decider saw (arguments_sha256)")
    idempotency_key_pending = ("idempotency_key_pending", 409, "a request with this "
                               "Idempotency-Key is being answered; retry shortly",
                               {"Retry-After": "1"})
    body_too_large = ("body_too_large", 413, "the body is over the route's limit (the detail "
                      "names the setting)")
    record_too_large = ("record_too_large", 413, "Kafka refused a frame as too large for the "
                        "frames topic (kept: the frames written before it)")
    unsupported_media_type = ("unsupported_media_type", 415, "a forwarded body that is neither "
                              "text/event-stream nor application/x-ndjson")
    invalid_request = ("invalid_request", 422, "the request does not fit its schema (errors: "
                       "each field and why)")
    invalid_input = ("invalid_input", 422, "a value the gateway cannot serve: an id, a seq, a "
                     "status, an API, a provider not configured here")
    invalid_id = ("invalid_id", 422, "a run id, stream id or provider name that is not an id")
    render_failed = ("render_failed", 422, "the request cannot be rendered for the target "
                     "chosen")
    capability_rejected = ("capability_rejected", 422, "no target offers what the request "
                           "requires (candidates: what each one lacks)")
    egress_rejected = ("egress_rejected", 422, "a hosted tool the tenant's policy refuses, or "
                       "domain rules a target cannot enforce (candidates[].refused)")
    unknown_bundle = ("unknown_bundle", 422, "the request names a bundle that is not on the "
                      "bundles topic (`modelevents bundle list`): nothing was sent")
    bundle_mismatch = ("bundle_mismatch", 422, "the request gives a target, instructions, "
                       "tools or sampling other than its bundle's (conflicts: each field, "
                       "the request's value and the bundle's): nothing was sent")
    idempotency_key_reused = ("idempotency_key_reused", 422, "the Idempotency-Key was used for "
                              "another request body")
    busy = ("busy", 429, "too many provider calls in flight on this gateway",
            {"Retry-After": "1"})
    rate_limited = ("rate_limited", 429, "a call (proxied, or POST /v1/runs) over its tenant's "
                    "requests_per_minute or max_in_flight (proxy.tenants); Retry-After says when one is let "
                    "through", {"Retry-After": "1"})
    budget_exhausted = ("budget_exhausted", 429, "a call (proxied, or POST /v1/runs) of a "
                        "tenant whose runs used its tokens_per_day (proxy.tenants) today; Retry-After: the next UTC "
                        "midnight, when it resets")
    header_too_large = ("header_too_large", 431, "a webhook header the frame keeps is longer "
                        "than its cap")
    internal = ("internal", 500, "the gateway's own failure: error_id names it in the "
                "gateway's log")
    provider_error = ("provider_error", 502, "the provider refused the cancel, or could not be "
                      "reached")
    kafka_unavailable = ("kafka_unavailable", 503, "Kafka did not acknowledge: nothing (or "
                         "kept) was written; send the same request again",
                         {"Retry-After": str(RETRY_AFTER_S)})
    unavailable = ("unavailable", 503, "the gateway is still reading its topics after a start",
                   {"Retry-After": "1"})


class ProblemResponse(JSONResponse):
    """A problem's HTTP answer (``application/problem+json``), encoded with orjson."""

    media_type = PROBLEM_JSON

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)


_RESERVED = frozenset({"type", "title", "status", "detail", "error", "code"})


class GatewayProblem(ModelEventsError):
    """An error the gateway answers: ``code`` decides the status and the fixed headers,
    ``detail`` says what happened and what to do, ``extra`` are members of the code's own."""

    def __init__(self, code: ProblemCode, detail: str, *,
                 headers: Mapping[str, str] | None = None, **extra: Any) -> None:
        if not detail:
            raise ValueError(f"a {code} problem needs a detail saying what to do")
        clash = _RESERVED & extra.keys()
        if clash:
            raise ValueError(f"{sorted(clash)} are the problem's own members")
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.extra = extra
        self.headers = {**code.headers, **(headers or {})}

    @property
    def status(self) -> int:
        return self.code.status

    def body(self) -> dict[str, Any]:
        return {"type": f"{TYPE_PREFIX}{self.code}", "title": self.code.status_title,
                "status": self.code.status, "detail": self.detail, "error": self.detail,
                "code": self.code.value, **self.extra}

    def response(self, headers: Mapping[str, str] | None = None) -> ProblemResponse:
        """The answer, with ``headers`` beside the problem's own (also an ASGI app: the edge and
        the bare webhook path send it as one)."""
        return ProblemResponse(self.body(), status_code=self.code.status,
                               headers={**self.headers, **(headers or {})})

    def encoded(self) -> bytes:
        """The body alone, for an answer written on the connection itself."""
        return orjson.dumps(self.body())


# The OpenAPI schema of a problem (routes/openapi.py puts it under every 4xx/5xx).
PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "An RFC 9457 problem. `code` names the problem for a client to branch on; "
                   "`error` repeats `detail` for clients of earlier versions.",
    "required": ["type", "title", "status", "detail", "code"],
    "properties": {
        "type": {"type": "string", "format": "uri-reference",
                 "example": "urn:modelevents:problem:invalid_input"},
        "title": {"type": "string", "example": "Unprocessable Entity"},
        "status": {"type": "integer", "example": 422},
        "detail": {"type": "string", "description": "what happened and what to do"},
        "code": {"type": "string", "enum": [code.value for code in ProblemCode],
                 "description": "what a client branches on (each code has one status):\n\n"
                 + "\n".join(f"* `{code}` ({code.status}): {code.meaning}"
                             for code in ProblemCode)},
        "error": {"type": "string", "description": "= detail"},
        "error_id": {"type": "string", "description": "an `internal` problem's id in the "
                     "gateway's log"},
    },
    "additionalProperties": True,
}
