"""Gateway replicas share their calls through the ``calls`` topic (issue #16, "Gateway replicas").

Real gateway processes (``modelevents gateway``, as users start them: tests/integration/pipeline.py
``start_gateway_process``) on one real broker, the provider simulator in front of them, and the
real worker (``modelevents worker``) turning their frames into events and run states:

- an ``Idempotency-Key`` answered by one replica is answered again by another, nothing sent twice;
- a run's call in flight on one replica is a 409 on another, and a cancel sent to the other
  reaches the provider by the object the calls record names;
- a replica SIGKILLed while polling a background call: the next process with its instance id
  takes the call up and polls it to its end, with no client request; a previous owner still
  alive stops polling;
- a calls record that does not decode is logged and skipped, and the records after it count.
"""

from __future__ import annotations

import io
import logging
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from modelevents.services.cli.commands import tail as tail_command
from modelevents.services.cli.commands.demo import manifest_with_scenarios
from modelevents.services.gateway.calls.capabilities import load_manifest
from modelevents.services.gateway.calls.records import CallRecord, now_ms
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.simulator.server import SimulatorHandle
from tests.helpers import free_port
from tests.integration.pipeline import HANG_GUARD_S, produce_raw, run, start_gateway_process
from tests.integration.simulated_gateway import (  # noqa: F401 - fixtures used by name
    GEMINI_KEY,
    OPENAI_KEY,
    neutral,
    settings,
    sim,
    simulator,
    sse_events,
    start_gateway,
)

pytestmark = pytest.mark.kafka


class Replica:
    """One ``modelevents gateway`` process with its own instance id (its log in a file)."""

    def __init__(self, settings: PipelineSettings, sim: SimulatorHandle, workdir: Path,
                 instance: str, given_by: str = "file", **config: Any) -> None:
        # given_by: where the instance id is set — "file" (instance_id), "env"
        # ($MODELEVENTS_GATEWAY_INSTANCE) or "cli" (--instance-id).
        self.instance = instance
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        manifest = workdir / "capabilities.yaml"
        if not manifest.exists():
            document = manifest_with_scenarios(load_manifest()).document
            manifest.write_text(yaml.safe_dump(document.model_dump(mode="json")))
        values = {**({"instance_id": instance} if given_by == "file" else {}),
                  "capabilities": str(manifest), "ack_timeout_s": 5.0,
                  "poll_initial_s": 0.3, "poll_max_s": 0.3, "call_backoff_s": 0.05,
                  "providers": {"openai": {"base_url": sim.base_url, "api_key": OPENAI_KEY},
                                "gemini": {"base_url": sim.base_url, "api_key": GEMINI_KEY}},
                  **config}
        self.config_path = workdir / f"{instance}-{self.port}.yaml"
        self.config_path.write_text(yaml.safe_dump(values))
        self.log_path = workdir / f"{instance}-{self.port}.err"
        self.process: subprocess.Popen = start_gateway_process(
            settings, self.port, self.log_path, config=self.config_path,
            gateway_options=("--instance-id", instance) if given_by == "cli" else (),
            env={"MODELEVENTS_GATEWAY_INSTANCE": instance} if given_by == "env" else None)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.post(f"{self.url}{path}", timeout=30, **kw)

    def run(self, run_id: str) -> dict[str, Any]:
        answer = httpx.get(f"{self.url}/v1/runs/{run_id}", timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self, how: signal.Signals = signal.SIGKILL) -> None:
        """SIGKILL: no shutdown code runs (its calls records say in_flight); SIGTERM: a stop."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, how)
        self.process.wait(timeout=HANG_GUARD_S)


@pytest.fixture
def replica(settings: PipelineSettings, sim: SimulatorHandle, tmp_path: Path
            ) -> Iterator[Callable[..., Replica]]:
    started: list[Replica] = []

    def start(instance: str, **config: Any) -> Replica:
        started.append(Replica(settings, sim, tmp_path, instance, **config))
        return started[-1]

    yield start
    for one in started:
        one.kill()


def wait_for(what: str, check: Callable[[], Any], replicas: tuple[Replica, ...] = ()) -> Any:
    """``check()`` once it is truthy; a guard against a hang, never a timing assertion."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not (value := check()):
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {r.instance}:\n{r.log()[-3000:]}" for r in replicas)
            raise AssertionError(f"{what} did not happen\n{logs}")
        time.sleep(0.2)
    return value


def new_run_id() -> str:
    return f"run_{secrets.token_hex(8)}"


def requests_to(sim: SimulatorHandle, method: str | None = None, suffix: str = ""
                ) -> list[dict[str, Any]]:
    return [r for r in sim.simulator.requests()
            if (method is None or r["method"] == method) and r["path"].endswith(suffix)]


def status_is(replica: Replica, run_id: str, status: str) -> Callable[[], Any]:
    def check() -> Any:
        body = replica.run(run_id)
        return body if body["state"] and body["state"]["status"] == status else None
    return check


def one_end(replica: Replica, run_id: str) -> None:
    events = sse_events(replica, run_id, follow="false")  # type: ignore[arg-type]
    kinds = [kind for _, kind, _ in events]
    assert kinds.count("run.started") == 1 and kinds.count("run.finished") == 1, kinds
    assert [seq for seq, _, _ in events] == list(range(len(events)))


# --- Idempotency-Key ------------------------------------------------------------------------


def test_an_idempotency_key_answered_by_one_replica_is_answered_again_by_another(replica, sim):
    a, b = replica("gw-k1"), replica("gw-k2")
    body = neutral("openai", "openai-chat", "sim:openai-chat/text")
    key = {"idempotency-key": f"key-{secrets.token_hex(6)}"}
    first = a.post("/v1/runs", json=body, headers=key)
    assert first.status_code == 202, first.text
    run_id = first.json()["run_id"]
    wait_for("the run's end", status_is(a, run_id, "completed"), (a, b))
    again = b.post("/v1/runs", json=body, headers=key)
    assert again.status_code == 202, again.text
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    other = b.post("/v1/runs", json={**body, "max_output_tokens": 9}, headers=key)
    assert other.status_code == 422 and other.json()["code"] == "idempotency_key_reused"
    assert len(requests_to(sim, "POST")) == 1  # nothing was sent twice
    # A restarted replica answers the same: the key is on Kafka, not in a process.
    b.kill()
    c = replica("gw-k3")
    assert c.post("/v1/runs", json=body, headers=key).json() == first.json()
    assert len(requests_to(sim, "POST")) == 1


# --- one call in flight per run, cancel ------------------------------------------------------


def test_a_call_in_flight_on_one_replica_is_409_on_another_which_can_cancel_it(replica, sim):
    a, b = replica("gw-a"), replica("gw-b")
    run_id = new_run_id()
    body = neutral("openai", "openai-responses", "sim:openai-responses/background-long",
                   background=True, run_id=run_id)
    started = a.post("/v1/runs", json=body)
    assert started.status_code == 202, started.text
    record = wait_for("the object id in B's calls record",
                      lambda: (r := b.run(run_id)["call_record"]) and r["object_id"] and r,
                      (a, b))
    assert record["instance"] == "gw-a" and record["state"] == "in_flight"
    assert record["call"] == started.json()["call"] and b.run(run_id)["calls"] == []
    second = b.post("/v1/runs", json=body)
    assert second.status_code == 409, second.text
    assert "in flight on gateway instance 'gw-a'" in second.json()["error"]
    # B cancels the call A polls: by the provider object its calls record names.
    cancelled = b.post(f"/v1/runs/{run_id}/cancel")
    assert cancelled.status_code == 202, cancelled.text
    assert cancelled.json()["call"] == started.json()["call"]
    [cancel] = requests_to(sim, "POST", f"/{record['object_id']}/cancel")
    # A's polling sees the cancel and the run ends as the provider says.
    done = wait_for("the run cancelled", status_is(a, run_id, "cancelled"), (a, b))
    wait_for("A's call over", lambda: not a.run(run_id)["calls"][-1]["in_flight"], (a, b))
    assert a.run(run_id)["calls"][-1]["provider_status"] == "cancelled"
    assert done["state"]["needs_reconciliation"] is False
    assert wait_for("the record ended", lambda: b.run(run_id)["call_record"]["state"] == "ended")
    polls = [r for r in requests_to(sim, "GET") if r["time"] > cancel["time"]]
    assert polls, "A polled after B's cancel"
    one_end(b, run_id)


def test_two_replicas_racing_send_one_call(replica, sim):
    # The same run's call, and the same Idempotency-Key, posted to two replicas at once: the
    # order of the partition decides, the same for both, and the provider gets one request each.
    a, b = replica("gw-race1"), replica("gw-race2")
    run_id = new_run_id()
    body = neutral("openai", "openai-responses", "sim:openai-responses/background-long",
                   background=True, run_id=run_id)
    keyed = neutral("openai", "openai-chat", "sim:openai-chat/text")
    key = {"idempotency-key": f"key-{secrets.token_hex(6)}"}
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda r: r.post("/v1/runs", json=body), (a, b)))
        keys = list(pool.map(lambda r: r.post("/v1/runs", json=keyed, headers=key), (a, b)))
    assert sorted(r.status_code for r in runs) == [202, 409], [r.text for r in runs]
    assert 202 in [r.status_code for r in keys], [r.text for r in keys]
    for answer in keys:  # the other: the same answer again, or "being answered" (retry)
        assert answer.status_code == 202 or answer.json()["code"] == "idempotency_key_pending"
    # The 202 comes before the call is sent: count the provider's requests once they are over.
    keyed_run = next(r for r in keys if r.status_code == 202).json()["run_id"]
    wait_for("the keyed call's end",
             lambda: (a.run(keyed_run)["call_record"] or {}).get("state") == "ended", (a, b))
    assert len([r for r in requests_to(sim, "POST") if r["api"] == "openai-chat"]) == 1
    winner = next(r for r in runs if r.status_code == 202)
    wait_for("the object id in the record",
             lambda: (a.run(run_id)["call_record"] or {}).get("object_id"), (a, b))
    assert len([r for r in requests_to(sim, "POST") if r["api"] == "openai-responses"]) == 1
    assert a.run(run_id)["call_record"]["call"] == winner.json()["call"]
    assert b.run(run_id)["call_record"]["call"] == winner.json()["call"]
    assert (a if a.run(run_id)["calls"] else b).post(f"/v1/runs/{run_id}/cancel").status_code \
        == 202


# --- a restart takes the calls up ------------------------------------------------------------


@pytest.mark.parametrize(("provider", "api", "how"), [
    ("openai", "openai-responses", signal.SIGKILL),
    ("google", "gemini-interactions", signal.SIGKILL),
    ("openai", "openai-responses", signal.SIGTERM),  # a deploy: stopped, not killed
])
def test_a_stopped_replicas_background_call_is_taken_up_by_its_next_process(replica, sim,
                                                                            provider, api, how):
    instance = f"gw-r-{secrets.token_hex(3)}"
    first = replica(instance)
    run_id = new_run_id()
    started = first.post("/v1/runs", json=neutral(
        provider, api, f"sim:{api}/background-8-polls", background=True, run_id=run_id))
    assert started.status_code == 202, started.text
    wait_for("the object id in the calls record",
             lambda: (first.run(run_id)["call_record"] or {}).get("object_id"), (first,))
    first.kill(how)
    polls_before = len(requests_to(sim, "GET"))
    again = replica(instance)
    # No request to the run: the new process takes the call up and polls it to its end.
    wait_for("the run completed", status_is(again, run_id, "completed"), (again,))
    call = wait_for("the taken-up call over", lambda: (c := again.run(run_id)["calls"])
                    and not c[-1]["in_flight"] and c[-1], (again,))
    assert call["call"] != started.json()["call"] and call["provider_status"] == "completed"
    assert len(requests_to(sim, "GET")) > polls_before
    record = again.run(run_id)["call_record"]
    assert record["instance"] == instance and record["call"] == call["call"]
    assert record["state"] == "ended" and "taken up" in again.log()
    assert len(requests_to(sim, "POST")) == 1  # taken up by polling, never sent again
    one_end(again, run_id)


def test_the_instance_id_from_the_environment_or_the_option_is_the_one_calls_are_taken_up_by(
        replica, sim):
    # $MODELEVENTS_GATEWAY_INSTANCE and --instance-id (no instance_id in the file) name the
    # replica in its calls records, and a process given the same id the other way takes its
    # call up.
    instance = f"gw-e-{secrets.token_hex(3)}"
    first = replica(instance, given_by="env")
    run_id = new_run_id()
    started = first.post("/v1/runs", json=neutral(
        "openai", "openai-responses", "sim:openai-responses/background-8-polls",
        background=True, run_id=run_id))
    assert started.status_code == 202, started.text
    record = wait_for("the object id in the calls record",
                      lambda: (r := first.run(run_id)["call_record"]) and r["object_id"] and r,
                      (first,))
    assert record["instance"] == instance
    first.kill()
    again = replica(instance, given_by="cli")
    wait_for("the run completed", status_is(again, run_id, "completed"), (again,))
    record = wait_for("the taken-up call over", lambda: (r := again.run(run_id)["call_record"])
                      and r["state"] == "ended" and r, (again,))
    assert record["instance"] == instance and record["call"] != started.json()["call"]
    assert "taken up" in again.log() and len(requests_to(sim, "POST")) == 1
    one_end(again, run_id)


def test_a_previous_owner_still_alive_stops_polling_once_its_call_is_taken_up(replica, sim):
    # Two processes with one instance id (a misconfiguration, or an old process cut off): the
    # newer one takes the call up, the older stops before its next poll.
    # A short lease: the old one's loop looks at the calls many times while the test goes on,
    # and must never take the call back (its twin is alive: it heartbeats as the same instance).
    old = replica("gw-twin", call_lease_s=1.5)
    run_id = new_run_id()
    started = old.post("/v1/runs", json=neutral(
        "openai", "openai-responses", "sim:openai-responses/background-long", background=True,
        run_id=run_id))
    assert started.status_code == 202, started.text
    wait_for("the object id in the calls record",
             lambda: (old.run(run_id)["call_record"] or {}).get("object_id"), (old,))
    new = replica("gw-twin", call_lease_s=1.5)
    stopped = wait_for("the old process stopping", lambda: (c := old.run(run_id)["calls"])
                       and not c[-1]["in_flight"] and c[-1], (old, new))
    assert "another gateway process took the call up" in stopped["notes"][-1]
    taken = wait_for("the new process polling", lambda: (c := new.run(run_id)["calls"])
                     and c[-1]["in_flight"] and c[-1]["polls"] > 0 and c[-1], (old, new))
    assert old.run(run_id)["call_record"]["call"] == taken["call"]
    # Reconcile on a replica of another instance id is refused while the call is polled.
    other = replica("gw-other")
    wait_for("the run's object on runs", lambda: (other.run(run_id)["state"] or {}).get(
        "provider_object_ids"), (other,))
    refused = other.post(f"/v1/runs/{run_id}/reconcile")
    assert refused.status_code == 409 and "in flight on gateway instance 'gw-twin'" in (
        refused.json()["error"]), refused.text
    assert new.post(f"/v1/runs/{run_id}/cancel").status_code == 202
    wait_for("the run cancelled", status_is(new, run_id, "cancelled"), (old, new))
    one_end(new, run_id)
    def took_it_up(one: Replica) -> bool:  # (a short lease takes up dead replicas' calls too)
        return any(run_id in line and "taken up" in line for line in one.log().splitlines())
    assert took_it_up(new) and not took_it_up(old)
    assert old.run(run_id)["call_record"]["call"] == taken["call"]


def test_the_calls_of_a_replica_silent_for_the_lease_are_taken_up_by_another(replica, sim):
    # A replica gone for good (its pod replaced under another name): no process of its instance
    # id comes back, and another replica takes its call up once the lease passed.
    gone = replica("gw-gone-for-good")
    taker = replica("gw-taker", call_lease_s=2.0)
    run_id = new_run_id()
    started = gone.post("/v1/runs", json=neutral(
        "openai", "openai-responses", "sim:openai-responses/background-8-polls",
        background=True, run_id=run_id))
    assert started.status_code == 202, started.text
    wait_for("the object id in the taker's calls record",
             lambda: (taker.run(run_id)["call_record"] or {}).get("object_id"), (gone, taker))
    gone.kill()
    wait_for("the run completed", status_is(taker, run_id, "completed"), (taker,))
    record = wait_for("the record ended", lambda: (r := taker.run(run_id)["call_record"])
                      and r["state"] == "ended" and r, (taker,))
    assert record["instance"] == "gw-taker" and record["call"] != started.json()["call"]
    assert "was not heard of for 2 s" in taker.log()
    assert len(requests_to(sim, "POST")) == 1
    one_end(taker, run_id)


# --- bad records -----------------------------------------------------------------------------


def test_a_calls_record_that_does_not_decode_is_logged_and_skipped(start_gateway, settings,
                                                                   caplog):
    run_id = new_run_id()
    gone = CallRecord(run_id=run_id, tenant="default", rev=1, call="c0-0badc0de",
                      instance="gw-gone", incarnation="i-gone", provider="openai",
                      api="openai-responses", model="gpt-5", background=True, stream=False,
                      updated_at=now_ms())
    run(produce_raw(settings, "calls", run_id.encode(), b"{not json"))
    run(produce_raw(settings, "calls", b"run_other", gone.encode()))  # its key is not its run
    run(produce_raw(settings, "calls", run_id.encode(), gone.encode()))
    with caplog.at_level(logging.WARNING, "modelevents.gateway.calls"):
        gateway = start_gateway(call_lease_s=600.0)  # gw-gone is not silent for long enough
        body = {**neutral("openai", "openai-chat", "sim:openai-chat/text"), "run_id": run_id}
        answer = httpx.post(f"{gateway.url}/v1/runs", json=body, timeout=30)
    # The record after the bad ones counts: its call is in flight on another instance.
    assert answer.status_code == 409 and "gw-gone" in answer.json()["error"], answer.text
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert any("not JSON" in m for m in skipped) and any("not its run id" in m for m in skipped)
    assert gateway.app.state.gateway.calls.skipped == 2
    # `modelevents tail --topic calls` prints each as the gateways read it.
    out = io.BytesIO()
    run(tail_command.tail(settings, "calls", out, run_id=run_id, timeout=1.0, meta=True))
    lines = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert "not a calls record: not JSON" in lines[0]["error"]
    assert lines[1]["instance"] == "gw-gone" and lines[1]["state"] == "in_flight"
