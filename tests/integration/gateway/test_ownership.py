"""A run id belongs to one tenant (issue #11 §2), over real HTTP to gateways (uvicorn on loopback)
with bearer tokens for two tenants, the real broker, the provider simulator and, where a run's
state matters, the real worker (``modelevents worker``).

Each test reproduces a finding of the issue — another tenant taking over a run id while the run
has no state yet, after the run's retention, or by forwarding frames first — and checks that the
owner stays the owner: the other tenant gets 404 as for a run it cannot see, nothing is sent to a
provider, nothing of its request is written, and what the owner reads holds only its records.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import httpx
import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from modelevents.adapters.framing import frames_from_bytes
from modelevents.schemas.frames import ProviderFrame
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local.asgi_thread import ServedApp
from tests.integration.pipeline import HANG_GUARD_S, run
from tests.integration.simulated_gateway import neutral, sim, simulator, sse_events, start_gateway  # noqa: F401 - fixtures used by name
from tests.paths import FIXTURES

pytestmark = pytest.mark.kafka

OWNER_STREAM = FIXTURES / "openai-responses" / "text-with-usage.sse"
# Longer than the owner's run: before the fix its seqs past the owner's showed in its stream.
INTRUDER_STREAM = FIXTURES / "openai-responses" / "tool-call-parallel.sse"
ACME, OTHER = f"tok-acme-{secrets.token_hex(8)}", f"tok-other-{secrets.token_hex(8)}"
TOKENS = {"acme": [ACME], "other": [OTHER]}
AS = {"acme": {"authorization": f"Bearer {ACME}"}, "other": {"authorization": f"Bearer {OTHER}"}}


def new_run_id() -> str:
    return f"run_{secrets.token_hex(8)}"


def forward(gateway: ServedApp, run_id: str, tenant: str, body: bytes | None = None,
            **params: Any) -> httpx.Response:
    return httpx.post(f"{gateway.url}/v1/runs/{run_id}/frames",
                      content=body if body is not None else OWNER_STREAM.read_bytes(),
                      params={"api": "openai-responses", **params}, timeout=60,
                      headers={**AS[tenant], "content-type": "text/event-stream"})


def get(gateway: ServedApp, path: str, tenant: str, **params: Any) -> httpx.Response:
    return httpx.get(f"{gateway.url}{path}", headers=AS[tenant], params=params, timeout=60)


def frames_of(settings: PipelineSettings, run_id: str) -> list[ProviderFrame]:
    async def read() -> list[ProviderFrame]:
        return [r.value async for r in clients.read_records(settings, "frames", run_id=run_id,
                                                             timeout=2.0)]
    return run(read())


def assert_refused(gateway: ServedApp, run_id: str, tenant: str) -> None:
    """Nothing of the run can be seen by ``tenant``: 404 as for a run that does not exist."""
    for path in ("", "/events", "/messages"):
        answer = get(gateway, f"/v1/runs/{run_id}{path}", tenant, follow="false")
        assert answer.status_code == 404, (path, answer.text)


def wait_for(what: str, check, timeout: float = HANG_GUARD_S):
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, f"{what} did not happen"
        time.sleep(0.2)
    return value


def state_of(gateway: ServedApp, run_id: str, tenant: str) -> dict[str, Any] | None:
    answer = get(gateway, f"/v1/runs/{run_id}", tenant)
    assert answer.status_code == 200, answer.text
    return answer.json()["state"]


# --- finding 1: a run without state yet ----------------------------------------------------


def test_a_run_without_state_yet_is_not_anothers_to_take(start_gateway, sim, settings):
    # No worker runs: the run has no state on `runs` (a worker lagging or down).
    gateway = start_gateway(api_tokens=TOKENS)
    run_id = new_run_id()
    body = {**neutral("openai", "openai-chat", "sim:openai-chat/text"), "run_id": run_id}
    started = httpx.post(f"{gateway.url}/v1/runs", json=body, headers=AS["acme"], timeout=30)
    assert started.status_code == 202, started.text
    wait_for("acme's call", lambda: (calls := get(gateway, f"/v1/runs/{run_id}", "acme")
                                     .json()["calls"]) and not calls[-1]["in_flight"])
    assert len(sim.simulator.requests()) == 1
    taken = httpx.post(f"{gateway.url}/v1/runs", json=body, headers=AS["other"], timeout=30)
    assert taken.status_code == 404, taken.text
    assert taken.json()["code"] == "run_not_found"
    assert_refused(gateway, run_id, "other")
    # A gateway that just started knows the run from its claim only, and says the same.
    restarted = start_gateway(api_tokens=TOKENS)
    again = httpx.post(f"{restarted.url}/v1/runs", json=body, headers=AS["other"], timeout=30)
    assert again.status_code == 404, again.text
    assert_refused(restarted, run_id, "other")
    assert len(sim.simulator.requests()) == 1  # nothing was sent for the other tenant
    assert get(gateway, f"/v1/runs/{run_id}", "acme").json()["calls"][0]["in_flight"] is False
    seen = get(restarted, f"/v1/runs/{run_id}", "acme")
    assert seen.status_code == 200 and seen.json()["calls"] == []
    frames = frames_of(settings, run_id)
    assert frames and {f.tenant for f in frames} == {"acme"}


# --- finding 2: after the run's retention ----------------------------------------------------


def test_a_run_id_stays_its_owners_after_the_runs_retention(start_gateway, start_worker, settings):
    worker = start_worker("worker", extra=("--retention", "2"))
    gateway = start_gateway(api_tokens=TOKENS)
    run_id = new_run_id()
    assert forward(gateway, run_id, "acme").status_code == 200
    wait_for("acme's run completed", lambda: (s := state_of(gateway, run_id, "acme"))
             and s["status"] == "completed")
    events = sse_events(gateway, run_id, headers=AS["acme"], follow="false")
    messages = get(gateway, f"/v1/runs/{run_id}/messages", "acme").json()
    # The worker released the run once its retention passed: to it the id is new again.
    wait_for("the run's release", lambda: any("released the state of" in line
                                              for line in worker.log_text().splitlines()))
    one_frame = b"".join(OWNER_STREAM.read_bytes().split(b"\n\n")[:1]) + b"\n\n"
    taken = forward(gateway, run_id, "other", one_frame, end="none")
    assert taken.status_code == 404, taken.text
    assert {f.tenant for f in frames_of(settings, run_id)} == {"acme"}
    assert_refused(gateway, run_id, "other")
    # A writer that bypasses the gateway puts another tenant's run under the id: the worker,
    # which forgot the run, starts it afresh for that tenant.
    intruder = frames_from_bytes(INTRUDER_STREAM.read_bytes(), run_key=run_id,
                                 provider="openai", api="openai-responses", framing="sse",
                                 stream_id="x0", received_at=int(time.time() * 1000),
                                 tenant="other")
    run(publish(settings, intruder))
    wait_for("the intruder's run on runs",
             lambda: run(latest_state(settings, run_id)) == "other")
    assert_refused(gateway, run_id, "other")
    # The owner sees its own records only: not the other tenant's state, events or messages.
    assert state_of(gateway, run_id, "acme") is None
    assert sse_events(gateway, run_id, headers=AS["acme"], follow="false") == events
    assert sse_events(gateway, run_id, headers=AS["acme"]) == events  # followed (shared reader)
    assert get(gateway, f"/v1/runs/{run_id}/messages", "acme").json() == messages


async def publish(settings: PipelineSettings, frames: list[ProviderFrame]) -> None:
    producer = await clients.start_producer(settings)
    try:
        for frame in frames:
            await clients.produce_frame(producer, settings, frame)
    finally:
        await producer.stop()


async def latest_state(settings: PipelineSettings, run_id: str) -> str | None:
    """The tenant of the run's latest state on ``runs``."""
    tenant = None
    async for record in clients.read_records(settings, "runs", run_id=run_id, timeout=1.0):
        tenant = record.value.tenant if record.value is not None else tenant
    return tenant


# --- finding 3: forwarded frames -----------------------------------------------------------


def test_forwarded_frames_claim_the_run_id_for_their_tenant(start_gateway, settings):
    gateway = start_gateway(api_tokens=TOKENS)
    run_id = new_run_id()
    first = forward(gateway, run_id, "acme", end="none")
    assert first.status_code == 200, first.text
    taken = forward(gateway, run_id, "other", index=first.json()["next_index"])
    assert taken.status_code == 404, taken.text
    assert_refused(gateway, run_id, "other")
    assert forward(gateway, run_id, "acme", stream="s1").status_code == 200
    assert {f.tenant for f in frames_of(settings, run_id)} == {"acme"}
    # Whichever tenant forwards first owns the id.
    mine = new_run_id()
    assert forward(gateway, mine, "other", end="none").status_code == 200
    assert forward(gateway, mine, "acme").status_code == 404
    assert {f.tenant for f in frames_of(settings, mine)} == {"other"}


def test_ids_that_could_forge_log_lines_are_422_and_write_nothing(start_gateway, sim, settings):
    gateway = start_gateway(api_tokens=TOKENS)
    for bad in ("run%0Aforged", "run%0D%0Ax", "run%00x", "a%20b"):
        answer = forward(gateway, bad, "acme")
        assert answer.status_code == 422 and "is not valid" in answer.json()["error"], bad
        answer = get(gateway, f"/v1/runs/{bad}", "acme")
        assert answer.status_code == 422 and "is not valid" in answer.json()["error"], bad
    answer = forward(gateway, new_run_id(), "acme", stream="s\n1")
    assert answer.status_code == 422 and "stream id" in answer.json()["error"]
    body = {**neutral("openai", "openai-chat", "sim:openai-chat/text"), "run_id": "run\r\nx"}
    answer = httpx.post(f"{gateway.url}/v1/runs", json=body, headers=AS["acme"], timeout=30)
    assert answer.status_code == 422 and "run_id" in answer.json()["error"], answer.text
    assert sim.simulator.requests() == []
    assert run(owner_claims(settings)) == []
    async def read_frames() -> list[Any]:
        return [r async for r in clients.read_records(settings, "frames", timeout=1.0)]
    assert run(read_frames()) == []


async def owner_claims(settings: PipelineSettings) -> list[tuple[bytes, bytes]]:
    return [(r.key, r.raw) async for r in clients.read_records(settings, "run-owners",
                                                                 timeout=1.0)]


# --- two gateways racing ---------------------------------------------------------------------


def test_two_gateways_racing_for_run_ids_agree_on_one_owner(start_gateway, settings):
    gateways = [start_gateway(api_tokens=TOKENS), start_gateway(api_tokens=TOKENS)]
    run_ids = [new_run_id() for _ in range(16)]

    async def race(run_id: str, flip: bool) -> dict[str, int]:
        # Each tenant on its own gateway, both at once; which gateway gets which alternates.
        pairs = [("acme", gateways[flip]), ("other", gateways[not flip])]
        async with httpx.AsyncClient(timeout=60) as client:
            answers = await asyncio.gather(*(client.post(
                f"{g.url}/v1/runs/{run_id}/frames", content=OWNER_STREAM.read_bytes(),
                params={"api": "openai-responses"},
                headers={**AS[tenant], "content-type": "text/event-stream"})
                for tenant, g in pairs))
        return {tenant: answer.status_code for (tenant, _), answer in zip(pairs, answers)}

    async def all_races() -> list[dict[str, int]]:
        return await asyncio.gather(*(race(r, i % 2 == 1) for i, r in enumerate(run_ids)))

    for run_id, codes in zip(run_ids, run(all_races())):
        assert sorted(codes.values()) == [200, 404], (run_id, codes)
        winner = next(t for t, code in codes.items() if code == 200)
        loser = "other" if winner == "acme" else "acme"
        for gateway in gateways:  # both gateways say the same
            assert get(gateway, f"/v1/runs/{run_id}", winner).status_code == 200
            assert_refused(gateway, run_id, loser)
        assert {f.tenant for f in frames_of(settings, run_id)} == {winner}


def test_run_owners_is_kept_for_ever_and_never_compacted(settings):
    async def configs() -> dict[str, str]:
        admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap_servers)
        await admin.start()
        try:
            [response] = await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, settings.topic("run-owners"))])
        finally:
            await admin.close()
        return {name: value for res in response.resources for name, value, *_ in res[4]}

    found = run(configs())
    assert found["cleanup.policy"] == "delete"
    assert found["retention.ms"] == "-1" and found["retention.bytes"] == "-1"
