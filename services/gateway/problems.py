"""Every error the gateway answers is an RFC 9457 problem (``application/problem+json``).

    {"type": "urn:modelevents:problem:body_too_large",   # about:blank without a code
     "title": "Content Too Large",                        # the status's phrase
     "status": 413,
     "detail": "a body of 2000000 bytes is over this route's limit …; send a smaller body",
     "code": "body_too_large",                            # what a client branches on
     "error": "a body of 2000000 bytes is over …"}        # = detail, the shape before 9457

Routes, the edge (:class:`services.gateway.app.Edge`), the exception handlers and the bare
webhook path all build their bodies as before — ``{"error": …, "code": …, …}`` plus members
of their own (``candidates``, ``errors``, ``retry``) — and answer them through here, so the
RFC members are added in one place and no answer can miss them. ``error`` stays: clients
written against earlier versions read it.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

import orjson
from fastapi.responses import JSONResponse

__all__ = ["PROBLEM_JSON", "PROBLEM_SCHEMA", "problem", "problem_bytes", "problem_response"]

PROBLEM_JSON = "application/problem+json"
TYPE_PREFIX = "urn:modelevents:problem:"

# The OpenAPI schema of a problem (services/gateway/routes/openapi.py puts it under every 4xx/5xx).
PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "An RFC 9457 problem. `code` names the problem for a client to branch on; "
                   "`error` repeats `detail` for clients of earlier versions.",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "format": "uri-reference",
                 "example": "urn:modelevents:problem:invalid_input"},
        "title": {"type": "string", "example": "Unprocessable Content"},
        "status": {"type": "integer", "example": 422},
        "detail": {"type": "string", "description": "what happened and what to do"},
        "code": {"type": "string"},
        "error": {"type": "string", "description": "= detail"},
    },
    "additionalProperties": True,
}


def _title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def problem(status: int, body: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` (``{"error": …, "code": …, …}``) with the RFC 9457 members added."""
    detail = str(body.get("error") or _title(status))
    code = body.get("code")
    return {"type": f"{TYPE_PREFIX}{code}" if code else "about:blank", "title": _title(status),
            "status": status, "detail": detail, **body, "error": detail}


def problem_response(status: int, body: Mapping[str, Any],
                     headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(problem(status, body), status_code=status,
                        headers=dict(headers) if headers else None, media_type=PROBLEM_JSON)


def problem_bytes(status: int, body: Mapping[str, Any]) -> bytes:
    """The body of a problem answered on a bare ASGI exchange (the edge, webhooks)."""
    return orjson.dumps(problem(status, body))
