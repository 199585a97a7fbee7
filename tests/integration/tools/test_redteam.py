"""The tool executor tried as an attacker and a careless tenant would, against the real broker,
worker and executor: what an operator is shown at approval is what runs (arguments elided from
their tool.call, arguments with a key twice), a decision redelivered after the executor died
between the final receipt and the tool.result still answers the call (and runs nothing), and
one tenant's calls of many runs handled at once never overshoot its budget, and a grant under
another tenant on the victim's very run and approval decides nothing.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import Any

import orjson
import pytest

from modelevents.consumers.tools.approvals import resolve_approval
from modelevents.consumers.tools.executor import operation_id
from modelevents.consumers.tools.receipts import encode_receipt, now_ms
from modelevents.schemas.events import ToolCall
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local import feeder
from modelevents.services.run_logic.executor_events import arguments_hash
from tests.integration.pipeline import feed, run, with_end_markers
from tests.integration.processor.test_big_runs import responses_tool_run
from tests.integration.tools import test_executor as tools
from tests.integration.tools.test_executor import (  # noqa: F401 (fixtures)
    db,
    settings,
    start_executor,
    tenant,
)

pytestmark = pytest.mark.kafka

NOTES = {"scopes": {"add_note": ["notebook:team"]}}


def _requested(settings: PipelineSettings, run_id: str) -> Any:
    events = tools.events_of(settings, run_id,
                             lambda es: any(e.kind == "approval.requested" for e in es),
                             "the approval request")
    return next(e for e in events if e.kind == "approval.requested")


def _no_key_twice(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), f"a key shown twice: {keys}"
    return dict(pairs)


def test_arguments_elided_from_a_write_are_shown_whole_at_its_approval(
        settings, start_executor, tenant, db, tmp_path):
    # 300 KB of JSON whitespace: the tool.call carries "" and the executor rebuilds the rest.
    arguments = '{"notebook": "team", "text": "what the operator must see"' + " " * 300_000 + "}"
    path = tmp_path / "big-write.sse"
    path.write_bytes(responses_tool_run(arguments, "add_note", whole_at_done=False))
    fed = feeder.frames_for_file(path, tenant=tenant, run_id=f"run_{uuid.uuid4().hex[:12]}")
    start_executor(tools.policy_for(tenant, **NOTES))
    run(feed(settings, with_end_markers(fed.frames)))
    requested = _requested(settings, fed.run_id)
    shown = orjson.loads(requested.payload.arguments or "null")
    assert shown == {"notebook": "team", "text": "what the operator must see"}
    assert orjson.loads(requested.envelope.body)["arguments_sha256"] == arguments_hash(shown)
    run(resolve_approval(fed.run_id, requested.payload.approval_id, True, "alice",
                         tenant=tenant, settings=settings))
    events = tools.events_of(settings, fed.run_id,
                             lambda es: any(e.kind == "tool.result" for e in es), "the result")
    [result] = [e for e in events if e.kind == "tool.result"]
    assert not result.payload.is_error, result.payload.output
    assert tools.rows(db, "SELECT text FROM notes") == [("what the operator must see",)]


def test_arguments_with_a_key_twice_are_shown_as_they_run(settings, start_executor, tenant, db):
    # A reader of the raw text sees the first "text"; the parser keeps the last.
    start_executor(tools.policy_for(tenant, **NOTES))
    raw = '{"notebook": "team", "text": "harmless", "text": "what really runs"}'
    run_id = tools.propose(settings, tenant, [("add_note", "c1", raw)])
    requested = _requested(settings, run_id)
    shown = json.loads(requested.payload.arguments, object_pairs_hook=_no_key_twice)
    assert shown == {"notebook": "team", "text": "what really runs"}
    run(resolve_approval(run_id, requested.payload.approval_id, True, "alice", tenant=tenant,
                         settings=settings))
    assert not tools.results_of(settings, run_id, 1)["c1"].payload.is_error
    assert tools.rows(db, "SELECT text FROM notes") == [("what really runs",)]


def test_a_decision_read_again_after_the_final_receipt_sends_the_result_and_runs_nothing(
        settings, start_executor, tenant, db):
    # What an executor killed between the final receipt and the tool.result leaves: the call's
    # awaiting receipt, its final receipt, no result — and its decision not committed, read
    # again by the next executor of the group.
    group = f"tools-{tenant}"
    first = start_executor(tools.policy_for(tenant, **NOTES), group=group)
    run_id = tools.propose(settings, tenant, [("add_note", "c1", tools.note_args("team", "x"))])
    approval = tools.approval_of(settings, run_id, "c1")
    first.stop()
    [awaiting] = tools.receipts_of(settings, run_id)
    final = replace(awaiting, phase="finished", attempt=1, finished_at=now_ms(),
                    outcome="succeeded", postcondition="confirmed", result='{"id": 41}',
                    result_is_error=False, approval_id=None, arguments_hash=None,
                    held_call=None)

    async def write() -> None:
        producer = await clients.start_producer(settings)
        try:
            await producer.send_and_wait(clients.topic_name(settings, "receipts"),
                                         key=clients.run_key_bytes(run_id),
                                         value=encode_receipt(final))
        finally:
            await producer.stop()
    run(write())

    start_executor(tools.policy_for(tenant, **NOTES), group=group)
    run(resolve_approval(run_id, approval, True, "alice", tenant=tenant, settings=settings))
    result = tools.results_of(settings, run_id, 1)["c1"]
    assert result.payload.output == '{"id": 41}' and not result.payload.is_error
    about = orjson.loads(result.envelope.body)
    assert about["operation_id"] == operation_id(run_id, "c1") and about["repeated"] is True
    assert (result.provider, result.api) == ("openai", "openai-responses")
    assert tools.invocations(db, "add_note") == 0  # it was not run (again)


async def _write_all(settings: PipelineSettings, events: dict[str, list[Any]]) -> None:
    producer = await clients.start_producer(settings)
    try:
        await clients.await_acks(settings, [
            await clients.send_record(producer, settings, "ingest", run_id, event)
            for run_id, run_events in events.items() for event in run_events])
    finally:
        await producer.stop()


def test_calls_of_one_tenant_in_many_runs_at_once_never_overshoot_its_budget(
        settings, start_executor, tenant, db):
    start_executor(tools.policy_for(tenant, max_calls_per_tenant=3), max_concurrent_calls=16)
    # Ten runs written at once: their calls are read together and handled side by side.
    runs = [f"run_{uuid.uuid4().hex[:12]}" for _ in range(10)]
    run(_write_all(settings, {run_id: [
        tools._event(run_id, tenant, "tool.call",
                     ToolCall(0, "get_weather", "c1", '{"city": "Paris"}'), "call-c1")]
        for run_id in runs}))
    results = [tools.results_of(settings, run_id, 1)["c1"].payload for run_id in runs]
    ran = [r for r in results if not r.is_error]
    assert len(ran) == 3, [r.output for r in results]
    assert all("budget exhausted: 3 tool calls for this tenant" in r.output
               for r in results if r.is_error)
    assert tools.invocations(db, "get_weather") == 3


def test_a_grant_on_the_same_run_and_approval_under_another_tenant_decides_nothing(
        settings, start_executor, tenant, db):
    # Another tenant of the same executor writes a grant (on ingest, as resolve_approval does)
    # naming the victim's run and approval id; only the victim's own denial counts.
    intruder = f"{tenant}x"
    start_executor(tools.Policy.from_dict({"tenants": {tenant: NOTES, intruder: NOTES}}),
                   tenant={tenant, intruder})
    run_id = tools.propose(settings, tenant, [("add_note", "c1", tools.note_args("team", "v"))])
    approval = tools.approval_of(settings, run_id, "c1")
    run(resolve_approval(run_id, approval, True, "mallory", tenant=intruder, settings=settings))
    # A later call of the run: once it is answered, whatever reached the executor was read.
    tools.propose(settings, tenant, [("get_weather", "c2", '{"city": "Paris"}')],
                  run_id=run_id, again=True)
    answered = tools.results_of(settings, run_id, 1)
    assert not answered["c2"].payload.is_error
    # The worker keeps the run its owner's: the intruder's decision never reaches events.
    assert not [e for e in tools.events_of(settings, run_id, lambda es: True, "")
                if e.tenant != tenant]
    assert tools.invocations(db, "add_note") == 0
    run(resolve_approval(run_id, approval, False, "alice", tenant=tenant, settings=settings))
    result = tools.results_of(settings, run_id, 2)["c1"].payload
    assert result.is_error and "approval was denied" in result.output
    assert tools.rows(db, "SELECT count(*) FROM notes") == [(0,)]
