"""``GET /v1/evals`` and ``GET /v1/evals/{id}`` over real HTTP against a running gateway, the
results written to the real broker's ``eval-results`` topic by the eval's own code
(``services/migration/eval/store.py``): the example corpus's runs under two bundles, normalized
by the adapters from the corpus's recordings and scored by the eval (one run of the second
bundle rejected by a hard gate); and whose results a token's tenant sees, decided by the
tenant a result names and the owners of its runs on ``run-owners``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest

from modelevents.services.gateway.events.owners import encode_claim
from modelevents.services.kafka.clients import await_acks, start_producer, topic_name
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local.asgi_thread import ServedApp
from modelevents.services.migration.eval.corpus import EXAMPLE_CORPUS
from modelevents.services.migration.eval.prices import load_prices
from modelevents.services.migration.eval.result import build_result
from modelevents.services.migration.eval.scoring import score_runs
from modelevents.services.migration.eval.store import publish
from tests.integration.cli.test_eval import CHAT, CORPUS, RESPONSES
from tests.integration.pipeline import run
from tests.integration.simulated_gateway import (  # noqa: F401  (fixtures)
    SETTLE_S,
    settings,
    sim,
    simulator,
    start_gateway,
)
from tests.services.migration.eval.runs import run_of

pytestmark = pytest.mark.kafka

PRICES = load_prices(EXAMPLE_CORPUS / "prices.example.yaml")


def scored_result(nonce: str, created_at: int | None = None, tenant: str | None = None
                  ) -> dict[str, Any]:
    """The result of the example corpus under RESPONSES and CHAT, its runs' ids ending in
    ``nonce``: Chat's multi-tool run fails the invalid_schema gate; ``tenant``: the tenant the
    result names."""
    evidence = [run_of(task.id, task.simulator[b.target.api], b, nonce=f"{b.name}-{nonce}")
                for b in (RESPONSES, CHAT) for task in CORPUS.tasks
                if b.target.api in task.simulator]
    grouped, skipped = score_runs(CORPUS, evidence, {b.bundle_id: b for b in (RESPONSES, CHAT)},
                                  PRICES, only=[RESPONSES.bundle_id, CHAT.bundle_id])
    assert skipped == []
    record = build_result(CORPUS.ref, "frozen", grouped,
                          {RESPONSES.bundle_id: "responses", CHAT.bundle_id: "chat"},
                          created_at=created_at, tenant=tenant)
    assert any(not r["accepted"] for r in record["runs"]), "the result has a rejected run"
    return record


def write_result(settings_: PipelineSettings, record: dict[str, Any]) -> None:
    run(publish(settings_, record))


def claim_runs(settings_: PipelineSettings, record: dict[str, Any], tenant: str) -> None:
    """Each run of ``record`` claimed by ``tenant`` on run-owners, as the gateway claims a run
    id it starts."""

    async def write() -> None:
        producer = await start_producer(settings_)
        try:
            futures = [await producer.send(topic_name(settings_, "run-owners"),
                                           key=r["run_id"].encode(),
                                           value=encode_claim(r["run_id"], tenant))
                       for r in record["runs"]]
            await await_acks(settings_, futures)
        finally:
            await producer.stop()

    run(write())


def get(gateway: ServedApp, path: str, token: str | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    return httpx.get(f"{gateway.url}{path}", headers=headers, timeout=30)


def wait_listed(gateway: ServedApp, result_id: str, token: str | None = None,
                path: str = "/v1/evals", rows_key: str = "results", id_key: str = "result_id",
                revision: int | None = None) -> dict[str, Any]:
    """The row of ``result_id`` once ``path`` lists it (at ``revision`` or a later one)."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        answer = get(gateway, f"{path}?limit=500", token)
        assert answer.status_code == 200, answer.text
        rows = {row[id_key]: row for row in answer.json()[rows_key]}
        found = rows.get(result_id)
        if found is not None and (revision is None or found["revision"] >= revision):
            return found
        assert time.monotonic() < deadline, f"{result_id} not listed: {answer.json()}"
        time.sleep(0.2)


def read_whole_topic(gateway: ServedApp, token: str, path: str = "/v1/evals",
                     rows_key: str = "results", id_key: str = "result_id") -> set[str]:
    """The ids listed once the gateway has read what the topic held at its start."""
    deadline = time.monotonic() + SETTLE_S
    while not (answer := get(gateway, f"{path}?limit=500", token).json())["complete"]:
        assert time.monotonic() < deadline, answer
        time.sleep(0.2)
    return {row[id_key] for row in answer[rows_key]}


def test_a_result_on_the_topic_is_listed_and_served_whole(settings, start_gateway):
    gateway = start_gateway()
    older = scored_result(uuid.uuid4().hex[:6], created_at=int(time.time() * 1000) - 60_000)
    record = scored_result(uuid.uuid4().hex[:6])
    write_result(settings, older)
    write_result(settings, record)

    row = wait_listed(gateway, record["result_id"])
    name, _, version = CORPUS.ref.rpartition("@")
    assert (row["corpus"], row["corpus_version"]) == (name, version)
    assert (row["mode"], row["created_at"]) == ("frozen", record["created_at"])
    assert [(b["bundle"], b["name"], b["runs"], b["accepted"], b["rejected"])
            for b in row["bundles"]] == [
        (b["bundle"], b["name"], b["runs"], b["accepted"], b["rejected"])
        for b in record["bundles"]]
    assert row["accepted"] == sum(r["accepted"] for r in record["runs"])
    assert row["rejected"] == sum(not r["accepted"] for r in record["runs"]) > 0
    wait_listed(gateway, older["result_id"])
    listed = [r["result_id"] for r in get(gateway, "/v1/evals").json()["results"]]
    assert listed.index(record["result_id"]) < listed.index(older["result_id"])  # newest first
    assert get(gateway, "/v1/evals?limit=1").json()["more"] is True

    # The whole result, as `eval show --json` prints it; by its id or a unique prefix.
    whole = get(gateway, f"/v1/evals/{record['result_id']}")
    assert whole.status_code == 200 and whole.headers["content-type"] == "application/json"
    assert whole.json() == record
    assert get(gateway, f"/v1/evals/{record['result_id'][:20]}").json() == record
    several = get(gateway, "/v1/evals/evr-")
    assert several.status_code == 422 and several.json()["code"] == "invalid_input"
    missing = get(gateway, "/v1/evals/evr-0000")
    assert missing.status_code == 404, missing.text
    assert missing.headers["content-type"] == "application/problem+json"
    assert missing.json()["code"] == "not_found"


def test_a_token_sees_the_results_whose_runs_are_its_tenants(settings, start_gateway):
    tokens = {"default": ["tok-default-" + uuid.uuid4().hex], "acme": ["tok-acme-" +
                                                                       uuid.uuid4().hex]}
    mine = scored_result(uuid.uuid4().hex[:6])
    unowned = scored_result(uuid.uuid4().hex[:6])
    # Named for acme: its runs' owners unknown here (shown to acme), or known to be default's
    # (shown to nobody: the name does not hand another tenant's runs over).
    named = scored_result(uuid.uuid4().hex[:6], tenant="acme")
    misnamed = scored_result(uuid.uuid4().hex[:6], tenant="acme")
    claim_runs(settings, mine, "default")
    claim_runs(settings, misnamed, "default")
    for record in (mine, unowned, named, misnamed):
        write_result(settings, record)
    open_gateway = start_gateway()
    wait_listed(open_gateway, unowned["result_id"])  # without tokens: every result
    gateway = start_gateway(api_tokens=tokens)
    default, acme = tokens["default"][0], tokens["acme"][0]

    listed = read_whole_topic(gateway, default)
    assert mine["result_id"] in listed
    assert unowned["result_id"] not in listed  # runs nobody here owns: no token's
    assert not {named["result_id"], misnamed["result_id"]} & listed
    assert get(gateway, f"/v1/evals/{mine['result_id']}", default).json() == mine
    # Another tenant: not listed, and not found, as for another tenant's run; but the result
    # that names it is its own.
    assert read_whole_topic(gateway, acme) == {named["result_id"]}
    assert get(gateway, f"/v1/evals/{named['result_id']}", acme).json() == named
    other = get(gateway, f"/v1/evals/{mine['result_id']}", acme)
    assert other.status_code == 404 and other.json()["code"] == "not_found"
    assert get(gateway, f"/v1/evals/{unowned['result_id']}", default).status_code == 404
    # No token at all: refused at the edge.
    refused = get(gateway, "/v1/evals")
    assert refused.status_code == 401 and refused.json()["code"] == "unauthorized"


def assert_described(gateway: ServedApp, listing_path: str, one_path: str) -> None:
    """The OpenAPI document describes a list route and its one-record route: bearer token,
    401/503, 404/422 and a JSON body for one, ``limit`` for the list."""
    paths = get(gateway, "/openapi.json").json()["paths"]
    listing, one = paths[listing_path]["get"], paths[one_path]["get"]
    for operation in (listing, one):
        assert operation["security"] == [{"bearerToken": []}]
        assert {"401", "503"} <= operation["responses"].keys()
    assert {"404", "422"} <= one["responses"].keys()
    assert "application/json" in one["responses"]["200"]["content"]
    assert listing["parameters"][0]["name"] == "limit"


def test_the_openapi_document_describes_the_eval_routes(start_gateway):
    assert_described(start_gateway(), "/v1/evals", "/v1/evals/{result_id}")
