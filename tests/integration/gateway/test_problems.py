"""One error shape everywhere, and an API description that works offline (issue #16): over real
HTTP to a running gateway, every kind of error — an unknown route, a wrong method, the edge's
401 and 413, a request that does not fit its schema, a webhook with a bad signature (the bare
ASGI path), a route's own 404 — is an RFC 9457 problem (``application/problem+json``), checked
against the problem schema with the jsonschema library; the OpenAPI document declares that
schema under every error and the bearer scheme on ``/v1/``; ``/docs`` loads nothing from
outside the gateway."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import httpx
import jsonschema
import pytest
from standardwebhooks.webhooks import Webhook

from modelevents.services.gateway.problems import PROBLEM_JSON, PROBLEM_SCHEMA
from modelevents.services.local.asgi_thread import ServedApp
from tests.integration.gateway.test_edge import (  # noqa: F401 (fixtures)
    SECRET,
    TOKEN,
    WEBHOOKS,
    gateway,
    start_gateway,
)

pytestmark = pytest.mark.kafka

BEARER = {"Authorization": f"Bearer {TOKEN}"}


def assert_problem(response: httpx.Response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    body: dict[str, Any] = response.json()
    jsonschema.validate(body, PROBLEM_SCHEMA)
    assert body["status"] == status and body["detail"] == body["error"] and body["detail"]
    if code is not None:
        assert body["code"] == code and body["type"] == f"urn:modelevents:problem:{code}"
    return body


def test_every_kind_of_error_is_a_problem(start_gateway) -> None:
    served: ServedApp = start_gateway(providers=WEBHOOKS, max_other_body_bytes=1024)
    with httpx.Client(base_url=served.url, timeout=10) as client:
        unknown = assert_problem(client.get("/no/such/route"), 404, "not_found")
        assert unknown["title"] == "Not Found" and "/no/such/route" in unknown["detail"]
        assert_problem(client.delete("/healthz"), 405, "method_not_allowed")
        unauthorized = assert_problem(client.get("/v1/runs/r1"), 401, "unauthorized")
        assert unauthorized["title"] == "Unauthorized"
        too_large = assert_problem(client.post("/v1/runs/r1/cancel", headers=BEARER,
                                               content=b"x" * 2048), 413, "body_too_large")
        assert "max_other_body_bytes" in too_large["detail"]
        invalid = assert_problem(client.post("/v1/runs", headers=BEARER, json={"x": 1}), 422,
                                 "invalid_request")
        assert invalid["errors"] and all("loc" in e for e in invalid["errors"])
        bad_id = assert_problem(client.get("/v1/runs/" + "x" * 300, headers=BEARER), 422)
        assert "run id" in bad_id["detail"]
        body = b'{"type": "response.completed", "data": {"id": "resp_1"}}'
        now = datetime.now(UTC)
        signed = Webhook(SECRET).sign("msg_1", now, body.decode())  # then forged
        forged = assert_problem(client.post("/webhooks/openai", content=body, headers={
            "webhook-id": "msg_1", "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signed.replace("v1,", "v1,AAAA"),
            "content-type": "application/json"}), 401)
        assert "signature" in forged["detail"]
        assert_problem(client.post("/webhooks/nobody", content=body), 404)


def test_the_openapi_document_declares_problems_and_the_bearer_scheme(gateway) -> None:
    document = httpx.get(f"{gateway.url}/openapi.json", timeout=10).json()
    components = document["components"]
    assert components["schemas"]["Problem"] == PROBLEM_SCHEMA
    assert "HTTPValidationError" not in components["schemas"]
    assert components["securitySchemes"]["bearerToken"]["scheme"] == "bearer"
    errors = 0
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if path.startswith("/v1/"):
                assert operation["security"] == [{"bearerToken": []}], (method, path)
                assert "401" in operation["responses"], (method, path)
            for status, response in operation["responses"].items():
                if (path, status) == ("/readyz", "503"):
                    continue  # the readiness report probes read, described as itself
                if status[0] in "45":
                    errors += 1
                    assert response["content"] == {PROBLEM_JSON: {"schema": {
                        "$ref": "#/components/schemas/Problem"}}}, (method, path, status)
    assert errors >= 10
    assert "#/components/schemas/HTTPValidationError" not in str(document)


def test_docs_load_nothing_from_outside_the_gateway(gateway) -> None:
    with httpx.Client(base_url=gateway.url, timeout=10) as client:
        page = client.get("/docs")
        assert page.status_code == 200 and "swagger" in page.text.lower()
        urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
        urls += re.findall(r"""url: ?["']([^"']+)["']""", page.text)
        assert urls, page.text
        for url in urls:
            assert url.startswith("/"), f"/docs loads {url} from outside the gateway"
            asset = client.get(url)
            assert asset.status_code == 200 and asset.content, url
        assert any(u.endswith("swagger-ui-bundle.js") for u in urls)
