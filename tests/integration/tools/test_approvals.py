"""Approvals of the tool executor (consumers/tools) against the real broker, worker, executor
and — for decisions made over HTTP and streams forwarded by a tenant — the real gateway: a
decision belongs to one call (its tenant, run and unguessable approval id), provider-stream
approval items decide nothing, what was approved is what runs, and the policy is asked again
when the grant arrives.

Two runs that must be read in a known order (a decision on one, then on the other) are given
run ids of the same ``events`` partition: the executor reads a partition in offset order.
"""

from __future__ import annotations

import json
import secrets
import time
import uuid
from typing import Any

import httpx
import orjson
import pytest

from modelevents.consumers.tools.approvals import resolve_approval
from modelevents.consumers.tools.executor import operation_id
from modelevents.consumers.tools.policy import Policy
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.run_logic.executor_events import arguments_hash
from tests.integration.pipeline import run
from tests.integration.simulated_gateway import (  # noqa: F401 (fixtures)
    settings,
    sim,
    simulator,
    start_gateway,
)
from tests.integration.tools.test_executor import (  # noqa: F401 (fixtures)
    approval_of,
    db,
    events_of,
    invocations,
    note_args,
    policy_for,
    propose,
    results_of,
    rows,
    start_executor,
    tenant,
)

pytestmark = pytest.mark.kafka

NOTES = {"scopes": {"add_note": ["notebook:team"]}}


def run_beside(settings: PipelineSettings, run_id: str) -> str:
    """A fresh run id whose events share ``run_id``'s partition."""
    def partition(run: str) -> int:
        return clients.partition_for_key(clients.run_key_bytes(run), settings.partitions)
    while True:
        other = f"run_{uuid.uuid4().hex[:12]}"
        if partition(other) == partition(run_id):
            return other


def responses_stream(item: dict[str, Any]) -> bytes:
    """An OpenAI Responses SSE stream whose one output item is ``item``."""
    response = {"id": f"resp_{secrets.token_hex(4)}", "object": "response",
                "created_at": 1767225600, "model": "gpt-5-mini", "usage": None, "error": None,
                "incomplete_details": None}
    docs = [{"type": "response.created", "sequence_number": 0,
             "response": {**response, "status": "in_progress", "output": []}},
            {"type": "response.output_item.done", "sequence_number": 1, "output_index": 0,
             "item": item},
            {"type": "response.completed", "sequence_number": 2,
             "response": {**response, "status": "completed", "output": [item]}}]
    return b"".join(f"event: {d['type']}\ndata: {json.dumps(d)}\n\n".encode() for d in docs)


def forward(gateway: Any, run_id: str, body: bytes, headers: dict[str, str],
            **params: str) -> None:
    answer = httpx.post(f"{gateway.url}/v1/runs/{run_id}/frames", content=body, timeout=60,
                        params={"api": "openai-responses", **params},
                        headers={**headers, "content-type": "text/event-stream"})
    assert answer.status_code < 300, answer.text


def decide(gateway: Any, run_id: str, approval: str, granted: bool,
           headers: dict[str, str]) -> httpx.Response:
    deadline = time.monotonic() + 60
    while True:  # until the gateway's view of runs shows the approval pending
        answer = httpx.post(f"{gateway.url}/v1/runs/{run_id}/approvals/{approval}",
                            json={"granted": granted, "reason": "test"}, headers=headers,
                            timeout=60)
        if answer.status_code != 409 or time.monotonic() > deadline:
            return answer
        time.sleep(0.2)


def envelope(event: Any) -> dict[str, Any]:
    return orjson.loads(event.envelope.body)  # type: ignore[no-any-return]


def test_another_tenants_forwarded_approval_and_grant_never_run_a_call(
        settings, start_gateway, start_executor, tenant, db):
    victim, attacker = tenant, f"{tenant}x"
    tokens = {victim: f"tok-{secrets.token_hex(8)}", attacker: f"tok-{secrets.token_hex(8)}"}
    as_ = {name: {"authorization": f"Bearer {token}"} for name, token in tokens.items()}
    gateway = start_gateway(api_tokens={name: [token] for name, token in tokens.items()})
    start_executor(Policy.from_dict({"tenants": {victim: NOTES, attacker: NOTES}}),
                   tenant={victim, attacker})
    arguments = note_args("team", "the victim's note")
    run_a = propose(settings, victim, [("add_note", "c1", arguments)])
    approval = approval_of(settings, run_a, "c1")
    requested = next(e for e in events_of(settings, run_a, lambda es: True, "")
                     if e.kind == "approval.requested")
    assert envelope(requested)["arguments_sha256"] == arguments_hash(orjson.loads(arguments))

    # The attacker's own run lists the victim's approval id as pending, and grants it there.
    run_b = run_beside(settings, run_a)
    forward(gateway, run_b, responses_stream({
        "id": approval, "type": "mcp_approval_request", "name": "add_note",
        "arguments": arguments, "server_label": "notes"}), as_[attacker])
    granted = decide(gateway, run_b, approval, True, as_[attacker])
    assert granted.status_code == 202, granted.text
    events_of(settings, run_b, lambda es: any(e.kind == "approval.resolved" for e in es),
              "the attacker's grant on its run")

    # A decision on arguments other than the ones asked for is refused by the gateway …
    changed = httpx.post(f"{gateway.url}/v1/runs/{run_a}/approvals/{approval}", timeout=60,
                         json={"granted": True, "arguments_sha256": "0" * 64},
                         headers=as_[victim])
    assert changed.status_code == 409 and changed.json()["code"] == "arguments_changed"
    # … and the victim denies its call: the denial is what the call gets — it never ran.
    denied = decide(gateway, run_a, approval, False, as_[victim])
    assert denied.status_code == 202 and denied.json()["arguments_sha256"] == \
        envelope(requested)["arguments_sha256"], denied.text
    result = results_of(settings, run_a, 1)["c1"].payload
    assert result.is_error and "approval was denied" in result.output  # type: ignore[union-attr]
    assert rows(db, "SELECT count(*) FROM notes") == [(0,)]
    resolved = [e for e in events_of(settings, run_a, lambda es: True, "")
                if e.kind == "approval.resolved"]
    assert envelope(resolved[0])["arguments_sha256"] == envelope(requested)["arguments_sha256"]


def test_a_grant_before_the_call_exists_does_not_skip_its_approval(settings, start_executor,
                                                                   tenant, db):
    start_executor(policy_for(tenant, **NOTES))
    run_id = f"run_{uuid.uuid4().hex[:12]}"
    # The id an approval of this call would have if ids were derived from the run and call id.
    guessed = "apr_" + operation_id(run_id, "c1").removeprefix("op_")[:24]
    run(resolve_approval(run_id, guessed, True, "mallory", tenant=tenant, settings=settings))
    events_of(settings, run_id, lambda es: any(e.kind == "approval.resolved" for e in es),
              "the early grant")
    propose(settings, tenant, [("add_note", "c1", note_args("team", "pre-granted"))],
            run_id=run_id)
    approval = approval_of(settings, run_id, "c1")  # it is asked all the same …
    assert approval != guessed
    run(resolve_approval(run_id, approval, False, "alice", tenant=tenant, settings=settings))
    result = results_of(settings, run_id, 1)["c1"].payload
    assert result.is_error and "approval was denied" in result.output  # type: ignore[union-attr]
    assert rows(db, "SELECT count(*) FROM notes") == [(0,)]  # … and the denial stands


def test_a_provider_streams_approval_response_never_resolves_an_executor_approval(
        settings, start_gateway, start_executor, tenant, db):
    gateway = start_gateway()
    start_executor(policy_for(tenant, **NOTES))
    run_id = propose(settings, tenant, [("add_note", "c1", note_args("team", "mine"))])
    approval = approval_of(settings, run_id, "c1")
    # The application forwards its provider's stream of the same run and tenant, which answers
    # an approval of that id (OpenAI's mcp_approval_response, "approved").
    forward(gateway, run_id, responses_stream({
        "id": "mcpr_1", "type": "mcp_approval_response", "approval_request_id": approval,
        "approve": True}), {}, tenant=tenant)
    events_of(settings, run_id, lambda es: any(e.kind == "approval.resolved" for e in es),
              "the provider's approval item")
    run(resolve_approval(run_id, approval, True, "alice", tenant=tenant, settings=settings))
    result = results_of(settings, run_id, 1)["c1"].payload
    assert not result.is_error, result.output  # type: ignore[union-attr]
    assert rows(db, "SELECT text FROM notes") == [("mine",)]


def test_a_call_proposed_again_with_other_arguments_is_refused_not_substituted(
        settings, start_executor, tenant, db):
    start_executor(policy_for(tenant, **NOTES))
    run_id = propose(settings, tenant, [("add_note", "c1", note_args("team", "shown"))])
    approval = approval_of(settings, run_id, "c1")
    propose(settings, tenant, [("add_note", "c1", note_args("team", "swapped"))],
            run_id=run_id, again=True)
    run(resolve_approval(run_id, approval, True, "alice", tenant=tenant, settings=settings))
    # A call made after the grant: once it is answered, the grant has been read.
    propose(settings, tenant, [("get_weather", "c2", '{"city": "Paris"}')], run_id=run_id,
            again=True)
    results = results_of(settings, run_id, 2)
    refused = results["c1"].payload
    assert refused.is_error and "other arguments" in refused.output  # type: ignore[union-attr]
    assert not results["c2"].payload.is_error  # type: ignore[union-attr]
    assert rows(db, "SELECT count(*) FROM notes") == [(0,)]
    assert invocations(db, "add_note") == 0


def test_granted_writes_beyond_the_budget_are_refused_when_they_would_run(
        settings, start_executor, tenant, db):
    start_executor(policy_for(tenant, max_calls_per_run=5, **NOTES))
    calls = [("add_note", f"c{n}", note_args("team", f"note {n}")) for n in range(8)]
    run_id = propose(settings, tenant, calls)
    approvals = [approval_of(settings, run_id, call_id) for _, call_id, _ in calls]
    for approval in approvals:  # all eight were asked: none had run yet
        run(resolve_approval(run_id, approval, True, "alice", tenant=tenant, settings=settings))
    results = [r.payload for r in results_of(settings, run_id, 8).values()]
    refused = [r for r in results if r.is_error]  # type: ignore[union-attr]
    assert len(results) - len(refused) == 5 and len(refused) == 3
    assert all("budget exhausted: 5 tool calls per run" in r.output  # type: ignore[union-attr]
               for r in refused)
    assert rows(db, "SELECT count(*) FROM notes") == [(5,)]


def test_a_scope_revoked_before_the_grant_denies_the_call(settings, start_executor, tenant, db):
    executor = start_executor(policy_for(tenant, **NOTES))
    run_id = propose(settings, tenant, [("add_note", "c1", note_args("team", "too late"))])
    approval = approval_of(settings, run_id, "c1")
    executor.executor.policy.revoke(tenant, "add_note", "notebook:team")
    run(resolve_approval(run_id, approval, True, "alice", tenant=tenant, settings=settings))
    result = results_of(settings, run_id, 1)["c1"].payload
    assert result.is_error and "revoked" in result.output  # type: ignore[union-attr]
    assert rows(db, "SELECT count(*) FROM notes") == [(0,)]
