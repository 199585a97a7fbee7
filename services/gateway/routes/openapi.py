"""The gateway's API description: ``GET /openapi.json`` and ``GET /docs``, complete and offline.

FastAPI's defaults load Swagger UI from a CDN (``/docs`` is blank without the internet) and
describe errors with its validation-error schema. Here ``/docs`` is served from the Swagger UI 5
assets that the ``fastapi-offline`` package ships (Swagger UI 4 cannot read the OpenAPI 3.1
documents FastAPI writes), under ``/docs/assets/``, and the document says what the
gateway does: every 4xx/5xx answer is an RFC 9457 problem (``services/gateway/problems.py``),
and ``/v1/`` routes take a bearer token (``api_tokens`` in the gateway config). The page carries a
Content-Security-Policy: scripts, styles, images and requests of the gateway's own origin only,
and of the inline scripts the page's own start (allowed by their hashes).
"""

from __future__ import annotations

import base64
import hashlib
import re
from importlib import resources
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from modelevents.services.gateway.problems import PROBLEM_JSON, PROBLEM_SCHEMA

__all__ = ["install_docs"]

ASSETS = "/docs/assets"
BEARER = {"type": "http", "scheme": "bearer", "description":
          "One of the gateway config's `api_tokens` (each names its tenant). Required on every "
          "`/v1/` route when tokens are configured; webhooks are signed instead."}
_PROBLEM = {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}
_FASTAPI_SCHEMAS = ("HTTPValidationError", "ValidationError")  # replaced by Problem
_INLINE_SCRIPT = re.compile(rb"<script>(.*?)</script>", re.S)


def install_docs(app: FastAPI) -> None:
    """``/docs`` and ``/docs/assets/…`` on ``app`` (made with ``docs_url=None``), and its
    ``openapi()`` completed as above."""
    app.mount(ASSETS, StaticFiles(directory=str(resources.files("fastapi_offline") / "static")),
              name="docs-assets")

    page = bytes(get_swagger_ui_html(
        openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title} — API",
        swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
        swagger_css_url=f"{ASSETS}/swagger-ui.css",
        swagger_favicon_url=f"{ASSETS}/favicon.png").body)
    headers = {"content-security-policy": content_security_policy(page),
               "x-content-type-options": "nosniff", "referrer-policy": "no-referrer"}

    async def docs() -> HTMLResponse:
        return HTMLResponse(page, headers=headers)

    app.add_api_route("/docs", docs, include_in_schema=False)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = describe(get_openapi(
                title=app.title, version=app.version, description=app.description,
                routes=app.routes))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def content_security_policy(html: bytes) -> str:
    """The policy of a page of the gateway's own assets whose inline scripts are its own (each
    allowed by its SHA-256). Swagger UI sets style attributes and draws icons as data: images."""
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(script).digest()).decode()}'"
                      for script in _INLINE_SCRIPT.findall(html))
    return (f"default-src 'none'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; "
            "frame-ancestors 'none'")


def describe(schema: dict[str, Any]) -> dict[str, Any]:
    """FastAPI's document with the problem schema under every error (but a report a route
    marks ``x-report``: /readyz's 503) and the bearer scheme."""
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in _FASTAPI_SCHEMAS:
        schemas.pop(name, None)
    schemas["Problem"] = PROBLEM_SCHEMA
    components.setdefault("securitySchemes", {})["bearerToken"] = BEARER
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            if path.startswith("/v1/"):
                operation["security"] = [{"bearerToken": []}]
                responses.setdefault("401", {"description": "no valid bearer token"})
            for status, response in responses.items():
                if status[:1] in ("4", "5") and not response.pop("x-report", False):
                    response["content"] = _PROBLEM
                    if status == "422" and response.get("description") == "Validation Error":
                        response["description"] = "the request does not fit its schema"
    return schema
