"""Runs under a bundle (services/gateway/calls/bundled.py, events/bundles.py) on real parts: the
bundle on the real broker's bundles topic, the gateway served on loopback calling the provider
simulator over HTTP, the real worker.

A request that names a bundle and leaves the rest out is sent with the bundle's target,
instruction, tools and sampling (what the simulator received says so); one that repeats the
bundle's values is run too; one that contradicts it, or names a bundle nobody created, is
refused 422 with its own code — and nothing reaches the provider; a structured output the
bundle leaves unnamed is the request's, one it names is fixed. A run under a bundle names it
in its input packet (``run-inputs``) and on its ``run.started`` event (``events``, as the
worker derived it from the gateway's frames); a run under none has neither.
"""

from __future__ import annotations

import asyncio
import secrets

import httpx
import pytest

from modelevents.schemas.bundles import Bundle
from modelevents.services.cli.commands.demo import manifest_with_scenarios
from modelevents.services.gateway.calls.capabilities import load_manifest
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.migration.bundles import store
from modelevents.services.migration.bundles.bundle_file import BundleFile, resolve
from tests.integration.gateway.proxy_clients import RUN_ID_HEADER, proxy_urls, wait_state
from tests.integration.gateway.test_input_packet import packets_of
from tests.integration.pipeline import run
from tests.integration.simulated_gateway import (  # noqa: F401  (fixtures used by name)
    gateway,
    neutral,
    requests_to,
    settings,
    settled,
    sim,
    simulator,
    sse_events,
    start_gateway,
    start_run,
    wait_run,
)

pytestmark = pytest.mark.kafka

TEXT = "sim:openai-responses/text-with-usage"
HELLO = [{"role": "user", "parts": [{"type": "text", "text": "Hello"}]}]


def make_bundle(name: str = "support", model: str = TEXT, **sampling: object) -> Bundle:
    """A bundle of the simulator's scenario model (resolved as `bundle create` resolves)."""
    file = BundleFile.model_validate({
        "name": f"{name}-{secrets.token_hex(3)}",
        "instruction": {"text": "Answer in one sentence.", "version": "7"},
        "target": {"provider": "openai", "api": "openai-responses", "model": model,
                   "snapshot": "gpt-4o-mini-2024-07-18"},
        "tools": [{"name": "get_order", "schema_version": "1", "description": "an order",
                   "parameters": {"type": "object",
                                  "properties": {"order_id": {"type": "string"}}}}],
        "sampling": {"temperature": 0.3, "max_output_tokens": 300, **sampling}})
    return resolve(file, "test", manifest_with_scenarios(load_manifest()))


def events_on_topic(settings: PipelineSettings, run_id: str) -> list:
    async def read() -> list:
        return [r.value async for r in clients.read_records(
            settings, "events", run_id=run_id, to_end=True, timeout=30) if r is not None]
    return run(read())


def put(settings: PipelineSettings, bundle: Bundle) -> Bundle:
    asyncio.run(store.put(settings, bundle))
    return bundle


def test_a_request_under_a_bundle_is_sent_with_the_bundles_fields(gateway, settings, sim):
    bundle = put(settings, make_bundle())
    started = start_run(gateway, {"transcript": HELLO, "bundle": bundle.bundle_id})
    assert started["bundle"] == bundle.bundle_id
    assert (started["provider"], started["api"], started["model"]) == (
        "openai", "openai-responses", TEXT)
    wait_run(gateway, started["run_id"], settled("completed"), "completed")
    [sent] = requests_to(sim, "openai-responses")
    body = sent["body"]
    assert body["model"] == TEXT
    assert body["instructions"] == "Answer in one sentence."
    assert body["temperature"] == 0.3 and body["max_output_tokens"] == 300
    assert [t["name"] for t in body["tools"]] == ["get_order"]
    assert body["tools"][0]["parameters"]["properties"] == {"order_id": {"type": "string"}}


def test_a_request_that_repeats_the_bundles_values_runs(gateway, settings, sim):
    bundle = put(settings, make_bundle())
    body = {"transcript": HELLO, "bundle": bundle.bundle_id,
            "target": {"provider": "openai", "model": TEXT},  # the api left to the bundle
            "instructions": "Answer in one sentence.", "temperature": 0.3,
            "max_output_tokens": 300}
    started = start_run(gateway, body)
    assert started["api"] == "openai-responses"
    wait_run(gateway, started["run_id"], settled("completed"), "completed")


SCHEMA = {"name": "answer", "schema": {"type": "object", "properties": {"city": {"type": "string"}},
                                       "required": ["city"], "additionalProperties": False}}


def test_a_structured_output_the_bundle_leaves_unnamed_is_the_requests(gateway, settings, sim):
    free = put(settings, make_bundle("free"))
    started = start_run(gateway, {"transcript": HELLO, "bundle": free.bundle_id,
                                  "structured_output": SCHEMA})
    wait_run(gateway, started["run_id"], settled("completed"), "completed")
    [sent] = requests_to(sim, "openai-responses")
    assert sent["body"]["text"]["format"]["schema"] == SCHEMA["schema"]
    fixed = put(settings, make_bundle("fixed", structured_output=SCHEMA))
    other = {**SCHEMA, "name": "other"}
    answer = httpx.post(f"{gateway.url}/v1/runs", timeout=30, json={
        "transcript": HELLO, "bundle": fixed.bundle_id, "structured_output": other})
    assert answer.status_code == 422, answer.text
    assert [c["field"] for c in answer.json()["conflicts"]] == ["structured_output"]


def test_a_request_that_contradicts_its_bundle_is_refused_and_nothing_sent(gateway, settings,
                                                                          sim):
    bundle = put(settings, make_bundle())
    body = {"transcript": HELLO, "bundle": bundle.bundle_id,
            "target": {"provider": "openai", "model": "sim:openai-responses/other"},
            "temperature": 1.0,
            "tools": [{"name": "delete_order"}]}
    answer = httpx.post(f"{gateway.url}/v1/runs", json=body, timeout=30)
    assert answer.status_code == 422, answer.text
    problem = answer.json()
    assert problem["code"] == "bundle_mismatch" and problem["bundle"] == bundle.bundle_id
    conflicts = {c["field"]: (c["request"], c["bundle"]) for c in problem["conflicts"]}
    assert conflicts == {"target.model": ("sim:openai-responses/other", TEXT),
                         "temperature": (1.0, 0.3),
                         "tools": (["delete_order"], ["get_order"])}
    assert "leave those fields out" in problem["detail"]
    preferences = httpx.post(f"{gateway.url}/v1/runs", timeout=30, json={
        "transcript": HELLO, "bundle": bundle.bundle_id,
        "preferences": [{"provider": "openai", "model": TEXT}]})
    assert preferences.json()["code"] == "bundle_mismatch"
    assert requests_to(sim, "openai-responses") == []


def test_an_unknown_bundle_is_refused_and_nothing_sent(gateway, sim):
    unknown = "bnd-" + secrets.token_hex(32)
    answer = httpx.post(f"{gateway.url}/v1/runs", timeout=30,
                        json={"transcript": HELLO, "bundle": unknown})
    assert answer.status_code == 422, answer.text
    assert answer.json()["code"] == "unknown_bundle" and answer.json()["bundle"] == unknown
    assert "modelevents bundle create" in answer.json()["detail"]
    assert requests_to(sim, "openai-responses") == []
    # Without a target nor a bundle the request is invalid, as before bundles.
    invalid = httpx.post(f"{gateway.url}/v1/runs", json={"transcript": HELLO}, timeout=30)
    assert invalid.status_code == 422 and "exactly one of target" in invalid.text


def test_a_bundle_created_after_the_gateway_read_the_topic_is_found(gateway, settings, sim):
    first = put(settings, make_bundle("first"))
    start_run(gateway, {"transcript": HELLO, "bundle": first.bundle_id})  # the view is read
    later = put(settings, make_bundle("later", temperature=0.9))
    started = start_run(gateway, {"transcript": HELLO, "bundle": later.bundle_id})
    assert started["bundle"] == later.bundle_id
    wait_run(gateway, started["run_id"], settled("completed"), "completed")
    assert requests_to(sim, "openai-responses")[-1]["body"]["temperature"] == 0.9


def test_the_bundle_is_in_the_input_packet_and_on_run_started(gateway, settings, sim):
    bundle = put(settings, make_bundle())
    under = start_run(gateway, {"transcript": HELLO, "bundle": bundle.bundle_id})["run_id"]
    plain = start_run(gateway, neutral("openai", "openai-responses", TEXT))["run_id"]
    for run_id in (under, plain):
        wait_run(gateway, run_id, settled("completed"), "completed")
    assert [p.bundle for p in packets_of(settings, under)] == [bundle.bundle_id] * 2
    assert [p.bundle for p in packets_of(settings, plain)] == [None, None]
    messages = httpx.get(f"{gateway.url}/v1/runs/{under}/messages", timeout=30).json()
    assert messages["input"]["bundle"] == bundle.bundle_id
    # On the events topic, as the worker wrote them: run.started names the bundle, read back
    # through the codec; the SSE projection shows it, and shows none for the plain run.
    events = [e for run_id in (under, plain) for e in events_on_topic(settings, run_id)]
    started = {e.run_id: e.payload.bundle for e in events if e.kind == "run.started"}
    assert started == {under: bundle.bundle_id, plain: None}
    assert all(getattr(e.payload, "bundle", None) is None for e in events
               if e.kind != "run.started")
    [first] = [d for _, kind, d in sse_events(gateway, under, follow="false")
               if kind == "run.started"]
    assert first["bundle"] == bundle.bundle_id
    [other] = [d for _, kind, d in sse_events(gateway, plain, follow="false")
               if kind == "run.started"]
    assert "bundle" not in other



def test_the_simulator_can_report_another_snapshot_and_the_events_say_so(gateway, settings,
                                                                         sim):
    """What a retest trigger watches: the snapshot the provider reports, in each event's model,
    beside the bundle on run.started — changed here through the simulator's model knob."""
    bundle = put(settings, make_bundle())
    before = start_run(gateway, {"transcript": HELLO, "bundle": bundle.bundle_id})["run_id"]
    wait_run(gateway, before, settled("completed"), "completed")
    moved = httpx.put(f"{sim.base_url}/_simulator/model", json={"model": "gpt-4o-mini-2099"},
                      timeout=30)
    assert moved.status_code == 200
    after = start_run(gateway, {"transcript": HELLO, "bundle": bundle.bundle_id})["run_id"]
    wait_run(gateway, after, settled("completed"), "completed")
    old, new = events_on_topic(settings, before), events_on_topic(settings, after)
    assert {e.model for e in old} and "gpt-4o-mini-2099" not in {e.model for e in old}
    assert {e.model for e in new} == {"gpt-4o-mini-2099"}
    [started] = [e for e in new if e.kind == "run.started"]
    assert started.payload.bundle == bundle.bundle_id
    assert started.model != bundle.target.snapshot


def test_a_proxied_call_under_a_bundle_names_it_and_one_against_it_is_refused(gateway,
                                                                              settings, sim):
    """The drop-in proxy's x-modelevents-bundle: the call's packet and run.started name the
    bundle; a call for another model than the bundle's, or under an unknown bundle, is refused
    in the provider's error shape and reaches no provider."""
    bundle = put(settings, make_bundle())
    url = proxy_urls(gateway)["openai"] + "/responses"
    body = {"model": TEXT, "input": "hi", "stream": True}
    sent = httpx.post(url, json=body, timeout=60,
                      headers={"x-modelevents-bundle": bundle.bundle_id})
    assert sent.status_code == 200, sent.text
    run_id = sent.headers[RUN_ID_HEADER]
    assert wait_state(gateway, run_id)["status"] == "completed"
    [started] = [e for e in events_on_topic(settings, run_id) if e.kind == "run.started"]
    assert started.payload.bundle == bundle.bundle_id
    assert {p.bundle for p in packets_of(settings, run_id)} == {bundle.bundle_id}
    calls = len(requests_to(sim, "openai-responses"))

    other = httpx.post(url, json={**body, "model": "sim:openai-responses/other"}, timeout=60,
                       headers={"x-modelevents-bundle": bundle.bundle_id})
    assert other.status_code == 400
    assert other.headers["x-modelevents-error"] == "bundle_mismatch"
    assert "model 'sim:openai-responses/other'" in other.json()["error"]["message"]
    unknown = httpx.post(url, json=body, timeout=60,
                         headers={"x-modelevents-bundle": "bnd-" + "0" * 64})
    assert unknown.status_code == 400
    assert unknown.headers["x-modelevents-error"] == "unknown_bundle"
    assert len(requests_to(sim, "openai-responses")) == calls
