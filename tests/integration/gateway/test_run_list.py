"""The gateway's routes behind the UI, over real HTTP against the real broker and worker:
``GET /v1/runs`` (paged listing, filters, tenants), ``GET /v1/runs/{id}/events/{seq}`` (an
event with its raw frame), ``POST /v1/runs/{id}/approvals/{id}`` (approval.resolved on ingest)
and the page's own files at ``/ui``; and ``modelevents ui --gateway URL``.

Runs are recorded streams fed as frames (as the gateway would publish them) through the module's
worker; the approval requests are written to ``ingest`` as the tool executor writes them.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from modelevents.adapters.registry import normalize_file
from modelevents.adapters.sse import SSEDecoder
from modelevents.schemas.end_of_input import with_end_markers
from modelevents.schemas.events import Approval, ModelEvent
from modelevents.services.local import feeder
from modelevents.services.local.asgi_thread import ServedApp
from modelevents.services.run_logic.executor_events import RunOf, approval_event
from modelevents.services.run_logic.run_machine import run_state_of
from tests.integration.pipeline import feed, kafka_args, run
from tests.integration.simulated_gateway import (  # noqa: F401  (fixtures)
    settings,
    sim,
    simulator,
    start_gateway,
)
from tests.integration.tools.test_executor import _write, events_of, propose
from tests.paths import FIXTURES

pytestmark = pytest.mark.kafka

SETTLE_S = 90.0
# (recording, what the listing must say of it)
RECORDINGS = ["openai-chat/refusal.sse", "gemini-generate/text-stream.sse",
              "openai-chat/truncated.sse"]


def feed_recording(settings_, name: str, run_id: str, tenant: str = "default",
                   at: int | None = None) -> int:
    """Feed a recording as run ``run_id``; the seq its last event will have."""
    fed = feeder.frames_for_file(FIXTURES / name, run_id=run_id, tenant=tenant,
                                 received_at=at if at is not None else int(time.time() * 1000))
    run(feed(settings_, with_end_markers(fed.frames)))
    return run_state_of(normalize_file(FIXTURES / name, run_id=run_id).events).last_seq


def listing(gateway: ServedApp, token: str | None = None, expect: int = 200,
            **params: Any) -> dict[str, Any]:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    answer = httpx.get(f"{gateway.url}/v1/runs", params=params, headers=headers, timeout=30)
    assert answer.status_code == expect, answer.text
    return answer.json()


def wait_listed(gateway: ServedApp, done: Callable[[list[dict[str, Any]]], bool], what: str,
                token: str | None = None, **params: Any) -> list[dict[str, Any]]:
    deadline = time.monotonic() + SETTLE_S
    rows = listing(gateway, token, limit=200, **params)["runs"]
    while not done(rows):
        assert time.monotonic() < deadline, f"{what} did not happen: {rows}"
        time.sleep(0.2)
        rows = listing(gateway, token, limit=200, **params)["runs"]
    return rows


def test_runs_are_listed_newest_first_a_page_at_a_time_and_filtered(settings, start_gateway):
    gateway = start_gateway()
    tag = f"ls{uuid.uuid4().hex[:8]}"
    base = int(time.time() * 1000)
    last: dict[str, int] = {}
    for n, name in enumerate(RECORDINGS * 2):  # six runs, started a second apart
        run_id = f"{tag}-{n}"
        last[run_id] = feed_recording(settings, name, run_id, at=base + 1000 * n)
    rows = wait_listed(gateway, lambda rows: {r["run_id"]: r["last_seq"] for r in rows} == last,
                       "every run listed with all its events", q=tag)

    # Newest first; the rows say what the run state says.
    assert [r["run_id"] for r in rows] == [f"{tag}-{n}" for n in range(5, -1, -1)]
    refusal = next(r for r in rows if r["run_id"] == f"{tag}-0")
    assert (refusal["status"], refusal["provider"], refusal["api"], refusal["tenant"]) == (
        "completed", "openai", "openai-chat", "default")
    assert refusal["reason"] == "refusal" and refusal["raw_reason"] == "stop"
    assert refusal["started_at"] == base and refusal["duration_ms"] is not None
    assert refusal["waiting"] is None and refusal["needs_reconciliation"] is False
    assert refusal["tokens"] is None or set(refusal["tokens"]) == {
        "input", "output", "cache_read", "cache_write", "reasoning", "total"}
    truncated = next(r for r in rows if r["run_id"] == f"{tag}-2")
    assert truncated["needs_reconciliation"] is True and truncated["reconciliation_notes"]

    # Pages of two: every run once, in the same order, the last page without a cursor.
    seen, cursor, pages = [], None, 0
    while True:
        page = listing(gateway, q=tag, limit=2, **({"cursor": cursor} if cursor else {}))
        seen += [r["run_id"] for r in page["runs"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [r["run_id"] for r in rows] and pages == 3

    # Filters: status (several, comma-separated), provider, a provider object id.
    completed = listing(gateway, q=tag, status="completed")["runs"]
    assert {r["run_id"] for r in completed} == {f"{tag}-{n}" for n in (0, 1, 3, 4)}
    both = listing(gateway, q=tag, status=["completed", truncated["status"]])["runs"]
    assert len(both) == 6
    google = listing(gateway, q=tag, provider="google")["runs"]
    assert {r["run_id"] for r in google} == {f"{tag}-1", f"{tag}-4"}
    by_object = listing(gateway, q="chatcmpl-refuse")["runs"]
    assert {f"{tag}-0", f"{tag}-3"} <= {r["run_id"] for r in by_object}

    # Mistakes say what to change.
    assert "cursor" in listing(gateway, expect=400, cursor="not-a-cursor")["error"]
    assert "not a run status" in listing(gateway, expect=422, status="done")["error"]


def test_a_token_lists_only_its_tenants_runs(settings, start_gateway):
    acme, beta = "tok-a-" + uuid.uuid4().hex, "tok-b-" + uuid.uuid4().hex
    gateway = start_gateway(api_tokens={"acme": [acme], "beta": [beta]})
    tag = f"tn{uuid.uuid4().hex[:8]}"
    last = {f"{tag}-acme": feed_recording(settings, RECORDINGS[0], f"{tag}-acme", "acme"),
            f"{tag}-beta": feed_recording(settings, RECORDINGS[1], f"{tag}-beta", "beta")}
    rows = wait_listed(gateway, lambda rows: [r["last_seq"] for r in rows] == [last[f"{tag}-acme"]],
                       "acme's run listed", token=acme, q=tag)
    assert [r["tenant"] for r in rows] == ["acme"]
    assert [r["run_id"] for r in wait_listed(
        gateway, lambda rows: bool(rows), "beta's run listed", token=beta, q=tag)] == [f"{tag}-beta"]
    assert "cannot act for tenant" in listing(gateway, acme, expect=403, tenant="beta")["error"]
    listing(gateway, None, expect=401)
    # The run's other routes say the same: beta's token does not find acme's run.
    for path in ("", "/events/0"):
        answer = httpx.get(f"{gateway.url}/v1/runs/{tag}-acme{path}",
                           headers={"authorization": f"Bearer {beta}"}, timeout=30)
        assert answer.status_code == 404, (path, answer.text)


def test_an_event_is_served_with_its_raw_provider_frame(settings, start_gateway):
    gateway = start_gateway()
    run_id = f"raw-{uuid.uuid4().hex[:8]}"
    last = feed_recording(settings, "openai-chat/refusal.sse", run_id)
    wait_listed(gateway, lambda rows: bool(rows) and rows[0]["last_seq"] == last,
                "the run's events", q=run_id)
    expected: ModelEvent = normalize_file(FIXTURES / "openai-chat/refusal.sse",
                                          run_id=run_id).events[2]
    answer = httpx.get(f"{gateway.url}/v1/runs/{run_id}/events/2", timeout=30)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["event"]["kind"] == expected.kind == "refusal"
    assert body["event"]["text"] == expected.payload.text  # type: ignore[union-attr]
    assert body["envelope"]["encoding"] == "utf-8"
    assert body["envelope"]["body"] == expected.envelope.body.decode()
    assert body["envelope"]["content_type"] == expected.envelope.content_type
    missing = httpx.get(f"{gateway.url}/v1/runs/{run_id}/events/{last + 1}", timeout=30)
    assert missing.status_code == 404 and "no event" in missing.json()["error"]


def test_an_approval_decided_over_http_is_an_approval_resolved_with_its_decider(
        settings, start_gateway):
    gateway = start_gateway()
    tenant = "default"
    run_id = propose(settings, tenant, [("add_note", "c1", '{"text": "x"}')])
    asked = approval_event(RunOf(run_id, tenant, provider="openai", api="openai-responses"),
                           "approval.requested",
                           Approval(approval_id="ap-1", tool_name="add_note",
                                    arguments='{"text": "x"}'), b'{"reason": "a write"}',
                           int(time.time() * 1000))
    run(_write(settings, run_id, [asked]))
    url = f"{gateway.url}/v1/runs/{run_id}/approvals"
    wait_listed(gateway, lambda rows: bool(rows) and rows[0]["pending_approvals"] == ["ap-1"],
                "the approval pending", q=run_id)
    assert listing(gateway, q=run_id)["runs"][0]["waiting"] == "approval"

    never_asked = httpx.post(f"{url}/ap-2", json={"granted": True}, timeout=30)
    assert never_asked.status_code == 409 and never_asked.json()["code"] == "not_pending"
    answer = httpx.post(f"{url}/ap-1", json={"granted": False, "reason": "not today",
                                             "decided_by": "alice"}, timeout=30)
    assert answer.status_code == 202, answer.text
    assert answer.json()["decision"] == "denied"

    events = events_of(settings, run_id, lambda es: any(
        e.kind == "approval.resolved" for e in es), "the decision on events")
    resolved = [e for e in events if e.kind == "approval.resolved"]
    assert len(resolved) == 1
    payload = resolved[0].payload
    assert isinstance(payload, Approval)
    assert (payload.approval_id, payload.decision, payload.decider) == (
        "ap-1", "denied", "alice (tenant:default)")
    assert b"not today" in resolved[0].envelope.body
    wait_listed(gateway, lambda rows: bool(rows) and rows[0]["pending_approvals"] == [],
                "the approval no longer pending", q=run_id)
    again = httpx.post(f"{url}/ap-1", json={"granted": True}, timeout=30)
    assert again.status_code == 409  # decided: the first decision stands
    unknown = httpx.post(f"{gateway.url}/v1/runs/nobody-{uuid.uuid4().hex[:6]}/approvals/ap-1",
                         json={"granted": True}, timeout=30)
    assert unknown.status_code == 404


def test_the_page_is_served_from_the_package_with_a_self_only_policy(settings,
                                                                     start_gateway):
    gateway = start_gateway()
    for path, kind in (("/ui", "text/html"), ("/ui/app.js", "text/javascript"),
                       ("/ui/app.css", "text/css")):
        answer = httpx.get(gateway.url + path, timeout=30)
        assert answer.status_code == 200, path
        assert answer.headers["content-type"].startswith(kind)
        assert "default-src 'self'" in answer.headers["content-security-policy"]
        assert "http://" not in answer.text and "https://" not in answer.text.replace(
            "https?:", "")  # nothing fetched from elsewhere
    assert httpx.get(gateway.url + "/ui/../app.py", timeout=30).status_code == 404
    assert httpx.get(gateway.url + "/ui/secret.txt", timeout=30).status_code == 404

    printed = subprocess.run([sys.executable, "-m", "modelevents.services.cli", "ui",
                              "--gateway", gateway.url], capture_output=True, timeout=60)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.decode().strip() == f"{gateway.url}/ui"
    nobody = subprocess.run([sys.executable, "-m", "modelevents.services.cli", "ui",
                             "--gateway", "http://127.0.0.1:9"], capture_output=True, timeout=60)
    assert nobody.returncode == 2 and b"no gateway answers" in nobody.stderr


class ListWatch:
    """``GET /v1/runs?watch=true`` read in a thread: (event, data) of each change as it comes."""

    def __init__(self, gateway: ServedApp, token: str | None = None, **params: Any) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self._response = httpx.Client(timeout=SETTLE_S).send(
            httpx.Request("GET", f"{gateway.url}/v1/runs", params={**params, "watch": "true"},
                          headers=headers), stream=True)
        assert self._response.status_code == 200, self._response.read()
        decoder = SSEDecoder(strict=True)

        def read() -> None:
            try:
                for chunk in self._response.iter_raw():
                    self.events.extend((m.event, orjson.loads(m.data))
                                       for m in decoder.feed(chunk) if m.data)
            except httpx.HTTPError:
                pass  # closed by the test

        self._thread = threading.Thread(target=read, daemon=True)
        self._thread.start()

    def wait(self, what: str, done: Callable[[list[tuple[str, dict[str, Any]]]], bool]) -> None:
        deadline = time.monotonic() + SETTLE_S
        while not done(self.events):
            assert time.monotonic() < deadline, f"{what} did not come: {self.events}"
            time.sleep(0.1)

    def close(self) -> None:
        self._response.close()


def test_the_list_is_pushed_to_a_watcher_filtered_by_tenant_and_status(settings, start_gateway):
    gateway = start_gateway()
    tag = f"lw{uuid.uuid4().hex[:8]}"
    mine, theirs = f"{tag}-acme", f"{tag}-other"
    live = ListWatch(gateway, q=tag, tenant="acme", status="in_progress")
    everything = ListWatch(gateway, q=tag, tenant="acme")
    try:
        live.wait("the first page", lambda events: events[:1] == [
            ("page", {"runs": [], "next_cursor": None, "complete": True})])
        fed = feeder.frames_for_file(FIXTURES / RECORDINGS[0], run_id=mine, tenant="acme",
                                     received_at=int(time.time() * 1000))
        frames = with_end_markers(fed.frames)
        run(feed(settings, frames[:2]))  # started, not finished: in progress
        feed_recording(settings, RECORDINGS[0], theirs, tenant="beta")
        live.wait("the run in progress", lambda events: any(
            kind == "run" and body["run_id"] == mine for kind, body in events))
        run(feed(settings, frames[2:]))  # completed: it leaves the in-progress list
        live.wait("its leaving", lambda events: ("gone", {"run_id": mine}) in events)
        everything.wait("its completion", lambda events: any(
            kind == "run" and body["status"] == "completed" for kind, body in events))
        wait_listed(gateway, lambda rows: len(rows) == 1, "the other tenant's run", q=theirs)
    finally:
        live.close()
        everything.close()
    shown = {body["run_id"] for kind, body in live.events + everything.events if kind == "run"}
    assert shown == {mine}  # another tenant's run, never
    assert "not a run status" in listing(gateway, expect=422, status="done", watch="true")["error"]


def test_a_watcher_lists_only_its_tokens_tenant(settings, start_gateway):
    gateway = start_gateway(api_tokens={"acme": ["acme-token"], "beta": ["beta-token"]})
    tag = f"lt{uuid.uuid4().hex[:8]}"
    watch = ListWatch(gateway, token="beta-token", q=tag)
    try:
        feed_recording(settings, RECORDINGS[0], f"{tag}-a", tenant="acme")
        feed_recording(settings, RECORDINGS[0], f"{tag}-b", tenant="beta")
        watch.wait("beta's run", lambda events: any(
            kind == "run" and body["run_id"] == f"{tag}-b" for kind, body in events))
        wait_listed(gateway, lambda rows: len(rows) == 1, "acme's run", "acme-token", q=tag)
    finally:
        watch.close()
    assert {body["run_id"] for kind, body in watch.events if kind == "run"} == {f"{tag}-b"}
    assert listing(gateway, "beta-token", expect=403, tenant="acme", watch="true")


def test_a_run_fed_without_the_gateway_lasts_as_long_as_its_feed(settings, start_gateway):
    """``modelevents feed`` stamps each frame when it sends it, as the gateway stamps a frame it
    receives: the run's events carry those times, and the list's duration is the feed's (it
    was 0 ms, every frame stamped alike)."""
    gateway = start_gateway()
    run_id = f"fd{uuid.uuid4().hex[:8]}"
    fed = subprocess.run([sys.executable, "-m", "modelevents.services.cli", "feed",
                          str(FIXTURES / RECORDINGS[1]), "--run-id", run_id, "--rate", "20",
                          *kafka_args(settings)], capture_output=True, timeout=SETTLE_S)
    assert fed.returncode == 0, fed.stderr
    [row] = wait_listed(gateway, lambda rows: bool(rows) and rows[0]["finished_at"] is not None,
                        "the fed run's end", q=run_id)
    # Paced at 20 frames/s, the last frame went at least (frames − 1) / 20 s after the first.
    frames = len(feeder.frames_for_file(FIXTURES / RECORDINGS[1]).frames)
    assert row["duration_ms"] == row["finished_at"] - row["started_at"]
    assert row["duration_ms"] >= (frames - 1) * 1000 // 20 - 1
