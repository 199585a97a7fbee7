"""``GET /v1/decisions`` and ``GET /v1/decisions/{id}`` over real HTTP against a running
gateway, the records written to the real broker's ``decisions`` topic by the decisions' own
store (``services/migration/decisions/store.py``): a decision recorded on an eval result written
to ``eval-results`` by the eval's own code, then its demoted revision as the watcher writes it;
and whose decisions a token's tenant sees, decided by the owners of the eval results' runs.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from modelevents.schemas.decision_record import Decision, Demotion
from modelevents.services.kafka.clients import start_producer
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local.asgi_thread import ServedApp
from modelevents.services.migration.decisions import store
from modelevents.services.migration.decisions.eval_results import summary_of
from modelevents.services.migration.decisions.make import demoted, new_decision
from tests.integration.cli.test_eval import RESPONSES
from tests.integration.gateway.test_evals import (
    assert_described,
    claim_runs,
    get,
    read_whole_topic,
    scored_result,
    wait_listed,
    write_result,
)
from tests.integration.pipeline import run
from tests.integration.simulated_gateway import (  # noqa: F401  (fixtures)
    settings,
    sim,
    simulator,
    start_gateway,
)

pytestmark = pytest.mark.kafka


def recorded(result: dict[str, Any], owner: str = "platform-team",
             decided_at: int | None = None) -> Decision:
    """A decision on RESPONSES resting on ``result``, as ``modelevents decide`` makes it."""
    summary = summary_of(result, result["result_id"], RESPONSES.bundle_id)
    return new_decision(RESPONSES, [summary], owner=owner, exceptions=["refusals accepted"],
                        evidence=["https://tickets.example/MIG-7"], now_ms=decided_at)


def demotion_of(decision: Decision, run_id: str) -> Decision:
    """Its next revision as the watcher writes it on another model snapshot."""
    return demoted(decision, Demotion(
        trigger="model_snapshot", reason="the provider reported model gpt-5-mini-2026-01-01",
        at=int(time.time() * 1000), expected=decision.triggers.model_snapshot,
        observed="gpt-5-mini-2026-01-01", run_id=run_id, event_id=f"{run_id}:0",
        topic="modelevents.events", partition=3, offset=41))


def write(settings_: PipelineSettings, *decisions: Decision) -> None:
    async def publish() -> None:
        producer = await start_producer(settings_)
        try:
            for decision in decisions:
                await store.publish(producer, settings_, decision)
        finally:
            await producer.stop()

    run(publish())


def wait_row(gateway: ServedApp, decision_id: str, token: str | None = None,
             revision: int = 0) -> dict[str, Any]:
    return wait_listed(gateway, decision_id, token, "/v1/decisions", "decisions",
                       "decision_id", revision)


def listed_once_read(gateway: ServedApp, token: str) -> set[str]:
    return read_whole_topic(gateway, token, "/v1/decisions", "decisions", "decision_id")


def test_a_decision_is_listed_served_whole_and_its_demotion_follows_live(settings,
                                                                        start_gateway):
    result = scored_result(uuid.uuid4().hex[:6])
    write_result(settings, result)
    decision = recorded(result)
    older = recorded(result, owner="someone-else",
                     decided_at=int(time.time() * 1000) - 60_000)
    write(settings, older, decision)
    gateway = start_gateway()

    row = wait_row(gateway, decision.decision_id)
    assert row == {
        "decision_id": decision.decision_id, "bundle_id": RESPONSES.bundle_id,
        "bundle_name": "responses",
        "target": {"provider": "openai", "api": "openai-responses", "model": "gpt-5-mini",
                   "snapshot": RESPONSES.target.snapshot},
        "owner": "platform-team", "status": "current", "revision": 0,
        "decided_at": decision.decided_at, "updated_at": decision.decided_at,
        "demoted_at": None, "trigger": None}
    # The whole record, as `decide show --json` prints it; by its id or a unique prefix.
    whole = get(gateway, f"/v1/decisions/{decision.decision_id}")
    assert whole.status_code == 200 and whole.headers["content-type"] == "application/json"
    assert whole.json() == decision.as_dict()
    assert whole.json()["eval_results"] == [result["result_id"]]
    assert get(gateway, f"/v1/decisions/{decision.decision_id[:24]}").json() == \
        decision.as_dict()
    several = get(gateway, "/v1/decisions/dec-")
    assert several.status_code == 422 and several.json()["code"] == "invalid_input"
    missing = get(gateway, "/v1/decisions/dec-nonesuch")
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    assert missing.headers["content-type"] == "application/problem+json"

    # The watcher demotes the older one: the gateway, already following, serves the revision.
    write(settings, demotion_of(older, run_id="run-" + uuid.uuid4().hex))
    row = wait_row(gateway, older.decision_id, revision=1)
    assert (row["status"], row["trigger"]) == ("historical", "model_snapshot")
    assert row["demoted_at"] is not None and row["updated_at"] == row["demoted_at"]
    served = get(gateway, f"/v1/decisions/{older.decision_id}").json()
    assert served["status"] == "historical" and served["revision"] == 1
    assert served["demotion"]["observed"] == "gpt-5-mini-2026-01-01"
    assert (served["demotion"]["topic"], served["demotion"]["partition"],
            served["demotion"]["offset"]) == ("modelevents.events", 3, 41)
    assert "withheld" not in served["demotion"]  # an open gateway: everything shown
    # Current ones first: the historical one is listed after the current one, though newer.
    ids = [r["decision_id"] for r in get(gateway, "/v1/decisions?limit=500").json()["decisions"]]
    assert ids.index(decision.decision_id) < ids.index(older.decision_id)
    assert get(gateway, "/v1/decisions?limit=1").json()["more"] is True


def test_a_token_sees_the_decisions_on_its_tenants_eval_results(settings, start_gateway):
    tokens = {"default": ["tok-default-" + uuid.uuid4().hex],
              "acme": ["tok-acme-" + uuid.uuid4().hex]}
    default, acme = tokens["default"][0], tokens["acme"][0]
    mine, unowned = scored_result(uuid.uuid4().hex[:6]), scored_result(uuid.uuid4().hex[:6])
    claim_runs(settings, mine, "default")
    write_result(settings, mine)
    write_result(settings, unowned)
    # Demoted by a live run of acme's on the same target: default sees the demotion, not the
    # run of acme's; demoted by one of its own, it sees the run.
    acme_run = {"runs": [{"run_id": "run-" + uuid.uuid4().hex}]}
    claim_runs(settings, acme_run, "acme")
    by_acme = demotion_of(recorded(mine, owner="by-acme"), acme_run["runs"][0]["run_id"])
    by_own = demotion_of(recorded(mine, owner="by-own"), mine["runs"][0]["run_id"])
    on_unowned = recorded(unowned)
    from_a_file = recorded({**mine, "result_id": "evr-" + uuid.uuid4().hex})
    write(settings, by_acme, by_own, on_unowned, from_a_file)
    gateway = start_gateway(api_tokens=tokens)

    listed = listed_once_read(gateway, default)
    assert {by_acme.decision_id, by_own.decision_id} <= listed
    assert on_unowned.decision_id not in listed  # its eval result's runs are nobody's here
    assert from_a_file.decision_id not in listed  # its eval result is not on eval-results
    withheld = get(gateway, f"/v1/decisions/{by_acme.decision_id}", default).json()["demotion"]
    assert (withheld["run_id"], withheld["event_id"]) == (None, None)
    assert withheld["withheld"] == ["run_id", "event_id"]
    assert (withheld["trigger"], withheld["observed"], withheld["offset"]) == (
        "model_snapshot", "gpt-5-mini-2026-01-01", 41)
    own = get(gateway, f"/v1/decisions/{by_own.decision_id}", default).json()
    assert own == by_own.as_dict()
    # Another tenant: none listed, none found.
    assert listed_once_read(gateway, acme) & {by_acme.decision_id, by_own.decision_id,
                                              on_unowned.decision_id} == set()
    other = get(gateway, f"/v1/decisions/{by_own.decision_id}", acme)
    assert other.status_code == 404 and other.json()["code"] == "not_found"
    refused = get(gateway, "/v1/decisions")
    assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"


def test_the_openapi_document_describes_the_decision_routes(start_gateway):
    assert_described(start_gateway(), "/v1/decisions", "/v1/decisions/{decision_id}")
