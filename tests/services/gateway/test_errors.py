"""What each exception a request ends with is answered as (services/gateway/errors.py), over real
HTTP to the gateway's own app (served without its Kafka lifespan: these answers need none): a bug
is a 500 that names an error id — its message, its traceback and any server path stay in the
gateway's log under that id — Kafka's absence a 503 to retry, a bad input a 422, and Starlette's
own refusals (an unknown route, a wrong method) problems of the same vocabulary."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from modelevents.schemas.errors import InputError, SchemaError
from modelevents.services.errors import KafkaUnavailable
from modelevents.services.gateway.app import create_app
from modelevents.services.gateway.config import GatewayConfig
from modelevents.services.gateway.problems import PROBLEM_JSON, ProblemCode
from modelevents.services.local.asgi_thread import ServedApp, serve_in_thread

SERVER_PATH = "/srv/modelevents/site-packages/modelevents/services/gateway/secret_policy.yaml"
TOKEN = "t0ken-of-acme"

# What a route may fail with, and the code it is answered as.
FAILURES: dict[str, tuple[BaseException, ProblemCode]] = {
    "bug": (FileNotFoundError(2, "No such file or directory", SERVER_PATH), ProblemCode.internal),
    "own-error": (SchemaError(f"record of {SERVER_PATH} does not decode"), ProblemCode.internal),
    "kafka": (KafkaUnavailable("127.0.0.1:1", "no acknowledgement within 10 s"),
              ProblemCode.kafka_unavailable),
    "input": (InputError("stream id 'a b' is not an id"), ProblemCode.invalid_input),
}


@pytest.fixture(scope="module")
def gateway() -> Iterator[ServedApp]:
    app = create_app(GatewayConfig(api_tokens={"acme": [SecretStr(TOKEN)]},
                                   max_other_body_bytes=1024))

    def failing(failure: str) -> Any:
        async def route() -> None:
            raise FAILURES[failure][0]
        return route

    for failure in FAILURES:
        app.add_api_route(f"/failing/{failure}", failing(failure))
    with serve_in_thread(app, lifespan="off", name="gateway") as served:
        yield served


def problem(answer: httpx.Response, code: ProblemCode) -> dict[str, Any]:
    assert (answer.status_code, answer.headers["content-type"]) == (code.status, PROBLEM_JSON)
    body: dict[str, Any] = answer.json()
    assert (body["code"], body["status"], body["title"]) == (code, code.status, code.status_title)
    assert body["type"] == f"urn:modelevents:problem:{code}" and body["detail"] == body["error"]
    for name, value in code.headers.items():
        assert answer.headers[name] == value
    return body


@pytest.mark.parametrize("failure", ["bug", "own-error"])
def test_a_500_names_an_error_id_never_a_path_or_a_traceback(gateway, caplog, failure) -> None:
    with caplog.at_level(logging.ERROR, "modelevents.gateway"):
        answer = httpx.get(f"{gateway.url}/failing/{failure}", timeout=10)
    body = problem(answer, ProblemCode.internal)
    error_id = body["error_id"]
    assert re.fullmatch(r"err_[0-9a-f]{16}", error_id) and error_id in body["detail"]
    exception = FAILURES[failure][0]
    for leak in ("/srv/", "secret_policy", "Traceback", "does not decode", "No such file",
                 type(exception).__name__):
        assert leak not in answer.text, answer.text
    # The operator finds it: the log line with that id carries the exception and its traceback.
    logged = [r for r in caplog.records if error_id in r.getMessage()]
    assert logged and logged[0].exc_info is not None
    assert SERVER_PATH in str(logged[0].exc_info[1])


def test_two_failures_have_two_error_ids(gateway) -> None:
    ids = {httpx.get(f"{gateway.url}/failing/bug", timeout=10).json()["error_id"]
           for _ in range(2)}
    assert len(ids) == 2


def test_kafka_unavailable_is_a_503_to_send_again(gateway) -> None:
    body = problem(httpx.get(f"{gateway.url}/failing/kafka", timeout=10),
                   ProblemCode.kafka_unavailable)
    assert "no acknowledgement within 10 s" in body["detail"]
    assert body["retry"] == "nothing was kept; send the same request again"


def test_an_input_error_is_a_422_that_says_what(gateway) -> None:
    body = problem(httpx.get(f"{gateway.url}/failing/input", timeout=10),
                   ProblemCode.invalid_input)
    assert body["detail"] == "stream id 'a b' is not an id"


def test_starlettes_own_refusals_are_problems_of_the_vocabulary(gateway) -> None:
    with httpx.Client(base_url=gateway.url, timeout=10) as client:
        unknown = problem(client.get("/no/such/route"), ProblemCode.not_found)
        assert "GET /no/such/route" in unknown["detail"] and "/docs" in unknown["detail"]
        wrong = client.delete("/healthz")
        problem(wrong, ProblemCode.method_not_allowed)
        assert wrong.headers["allow"] == "GET"
        # A path several routes serve names every method they take.
        both = client.put("/v1/runs", headers={"Authorization": f"Bearer {TOKEN}"})
        assert problem(both, ProblemCode.method_not_allowed) and both.headers["allow"] == "GET, POST"


def test_the_edge_refuses_with_problems_before_any_route(gateway) -> None:
    with httpx.Client(base_url=gateway.url, timeout=10) as client:
        problem(client.get("/v1/runs/r1"), ProblemCode.unauthorized)
        too_large = problem(client.post("/v1/runs/r1/cancel", content=b"x" * 2048,
                                        headers={"Authorization": f"Bearer {TOKEN}"}),
                            ProblemCode.body_too_large)
        assert "max_other_body_bytes" in too_large["detail"]
        assert too_large.keys() >= {"type", "title", "status", "detail", "error", "code"}
