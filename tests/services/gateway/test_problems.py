"""The gateway's errors are one closed vocabulary (services/gateway/problems.py): every code it can
answer is a ProblemCode with one status, and every ProblemCode is one it answers — read from the
gateway's source, where no other way to build an error body is left; docs/gateway-api.md lists
the vocabulary as the enum has it, and the OpenAPI document offers the codes as an enum."""

from __future__ import annotations

import ast
import re
from http import HTTPStatus

import pytest

from modelevents.services.errors import CapabilityRejected
from modelevents.services.gateway.app import create_app
from modelevents.services.gateway.calls.egress import Refusal
from modelevents.services.gateway.calls.router import Missing, Rejection
from modelevents.services.gateway.config import GatewayConfig
from modelevents.services.gateway.problems import (
    PROBLEM_JSON,
    PROBLEM_SCHEMA,
    GatewayProblem,
    ProblemCode,
)
from modelevents.services.gateway.routes.health import READINESS_REPORT
from modelevents.services.gateway.routes.webhooks import REJECTED
from tests.paths import REPO_ROOT

GATEWAY = REPO_ROOT / "services" / "gateway"
VOCABULARY = re.compile(r"<!-- problem-codes -->\n(.*?)\n<!-- /problem-codes -->", re.S)
RESPONSES = {"JSONResponse", "Response", "ProblemResponse"}
# Where error bodies are built from a ProblemCode: the RFC 9457 problem, and the drop-in proxy's
# refusals in each provider's own error shape (so that an SDK raises its usual exception).
RENDERERS = {"problems.py", "proxy/errors.py"}
# The one answer with an error status that is not a problem: /readyz's 503 is the readiness
# report itself ({"status": "not ready", "reason": …}), read by probes and operators.
REPORTS = {("routes/health.py", "readyz")}


def _sources() -> dict[str, ast.Module]:
    return {path.relative_to(GATEWAY).as_posix(): ast.parse(path.read_text(), str(path))
            for path in sorted(GATEWAY.rglob("*.py"))}


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


class _Answers(ast.NodeVisitor):
    """The codes a module names, and every place in it that builds an error some other way."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.function = ""
        self.codes: set[str] = set()
        self.elsewhere: list[str] = []

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer, self.function = self.function, node.name
        self.generic_visit(node)
        self.function = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.value.id == "ProblemCode":
            self.codes.add(node.attr)
        self.generic_visit(node)

    def visit_Dict(self, node: ast.Dict) -> None:
        if any(isinstance(key, ast.Constant) and key.value == "code" for key in node.keys):
            self._flag(node, 'a body with a "code" member')
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        called = _name(node.func)
        if called.endswith("HTTPException"):
            self._flag(node, f"{called}(…)")
        if called == "ProblemCode":
            self._flag(node, "a code made from a string: ProblemCode(…)")
        if called in RESPONSES:
            status = next((k.value for k in node.keywords if k.arg == "status_code"),
                          node.args[1] if len(node.args) > 1 else None)
            literal = isinstance(status, ast.Constant) and isinstance(status.value, int)
            if (literal and status.value >= 400) or (  # type: ignore[union-attr]
                    status is not None and not literal
                    and (self.module, self.function) not in REPORTS):
                self._flag(node, f"{called} with status {ast.unparse(status)}")  # type: ignore
        self.generic_visit(node)

    def _flag(self, node: ast.AST, what: str) -> None:
        self.elsewhere.append(f"services/gateway/{self.module}:{node.lineno}: {what}")


def _answers() -> list[_Answers]:
    found = []
    for module, tree in _sources().items():
        if module not in RENDERERS:
            answers = _Answers(module)
            answers.visit(tree)
            found.append(answers)
    return found


def test_the_codes_the_gateway_answers_are_exactly_the_vocabulary() -> None:
    named = set().union(*(answers.codes for answers in _answers()))
    members = set(ProblemCode.__members__)
    assert not named - members, f"codes the gateway names outside ProblemCode: {named - members}"
    assert not members - named, f"ProblemCode members no code of the gateway answers: " \
                                f"{sorted(members - named)}"


def test_no_error_body_is_built_outside_the_vocabulary() -> None:
    elsewhere = [place for answers in _answers() for place in answers.elsewhere]
    assert not elsewhere, "raise GatewayProblem(ProblemCode.…, detail) instead:\n" \
                          + "\n".join(elsewhere)


def test_the_scan_sees_an_error_built_the_old_way() -> None:
    # The two tests above pass on a tree that answers only through the vocabulary; this one
    # shows the scan would see the old shapes.
    old = ast.parse(
        "async def route():\n"
        "    if bad:\n"
        "        raise HTTPException(409, detail='no')\n"
        "    return JSONResponse({'error': 'no', 'code': 'busy'}, status_code=429)\n")
    answers = _Answers("routes/old.py")
    answers.visit(old)
    assert len(answers.elsewhere) == 3, answers.elsewhere


def test_every_code_has_one_error_status_a_title_and_a_one_line_meaning() -> None:
    for code in ProblemCode:
        assert code.name == code.value
        assert 400 <= code.status < 600 and code.status_title == HTTPStatus(code.status).phrase
        assert code.meaning and "\n" not in code.meaning


def test_a_problem_is_the_rfc_members_then_its_codes_own() -> None:
    problem = GatewayProblem(ProblemCode.kafka_unavailable, "Kafka did not acknowledge; 2 of 3",
                             kept=2, retry="send the same body again")
    assert problem.body() == {
        "type": "urn:modelevents:problem:kafka_unavailable", "title": "Service Unavailable",
        "status": 503, "detail": "Kafka did not acknowledge; 2 of 3",
        "error": "Kafka did not acknowledge; 2 of 3", "code": "kafka_unavailable", "kept": 2,
        "retry": "send the same body again"}
    response = problem.response({"connection": "close"})
    assert response.status_code == 503 and response.body == problem.encoded()
    assert response.headers["content-type"] == PROBLEM_JSON
    assert (response.headers["retry-after"], response.headers["connection"]) == ("5", "close")
    assert GatewayProblem(ProblemCode.unauthorized, "no token").headers == {
        "WWW-Authenticate": "Bearer"}


def test_a_problem_needs_a_detail_and_keeps_its_own_members() -> None:
    with pytest.raises(ValueError, match="needs a detail"):
        GatewayProblem(ProblemCode.conflict, "")
    with pytest.raises(ValueError, match="problem's own members"):
        GatewayProblem(ProblemCode.conflict, "busy run", status=200, title="Fine")


def test_refused_webhooks_keep_their_status() -> None:
    assert {status: code.status for status, code in REJECTED.items()} == {
        status: status for status in REJECTED}


def test_the_routers_rejections_name_codes_of_the_vocabulary() -> None:
    # CapabilityRejected lives outside the gateway (services/errors.py); its codes must be ours.
    lacks = Rejection("openai", "openai-chat", "gpt-4.1",
                      missing=(Missing("background", "background is true"),))
    refused = Rejection("openai", "openai-responses", "gpt-5",
                        refused=(Refusal("hosted.tools", "the tenant may not"),))
    assert CapabilityRejected([lacks]).to_dict()["code"] == ProblemCode.capability_rejected
    both = CapabilityRejected([lacks, refused])
    assert both.egress and both.to_dict()["code"] == ProblemCode.egress_rejected


def _table() -> str:
    return "\n".join(["| code | status | meaning |", "|---|---|---|"]
                     + [f"| `{code}` | {code.status} | {code.meaning} |" for code in ProblemCode])


def test_the_docs_list_the_vocabulary_as_the_enum_has_it() -> None:
    text = (REPO_ROOT / "docs" / "gateway-api.md").read_text()
    found = VOCABULARY.search(text)
    assert found is not None, "docs/gateway-api.md: no table between the problem-codes markers"
    assert found.group(1) == _table(), f"the vocabulary's table differs; the enum says:\n" \
                                       f"{_table()}"


def test_the_openapi_document_offers_the_codes_as_an_enum() -> None:
    document = create_app(GatewayConfig()).openapi()
    problem = document["components"]["schemas"]["Problem"]
    assert problem == PROBLEM_SCHEMA and "code" in problem["required"]
    assert problem["properties"]["code"]["enum"] == [code.value for code in ProblemCode]
    # Every error status a route documents is the status of some code.
    statuses = {code.status for code in ProblemCode}
    documented = {(path, method, int(status))
                  for path, operations in document["paths"].items()
                  for method, operation in operations.items()
                  for status in operation["responses"] if status[0] in "45"}
    assert documented and not {d for d in documented if d[2] not in statuses}



def test_the_openapi_document_says_which_error_answers_are_problems() -> None:
    # Every 4xx/5xx a route documents is a problem, but /readyz's 503: the readiness report
    # (status, reason) that probes read, described as what it is.
    document = create_app(GatewayConfig()).openapi()
    problem = {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}}}
    answers = {(path, status): response.get("content")
               for path, operations in document["paths"].items()
               for operation in operations.values()
               for status, response in operation["responses"].items() if status[0] in "45"}
    report = answers.pop(("/readyz", "503"))
    assert report == {"application/json": {"schema": READINESS_REPORT}}
    assert answers and all(content == problem for content in answers.values())
    assert not any("x-report" in response for operations in document["paths"].values()
                   for operation in operations.values()
                   for response in operation["responses"].values())
