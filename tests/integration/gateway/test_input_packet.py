"""The input packet (issue #17) on real components: the gateway (uvicorn on a loopback port)
calling the provider simulator, the real broker, the real worker (``modelevents worker``) and the
audit archive made by ``modelevents audit run`` / checked by ``modelevents audit verify``
(subprocesses, as users run them).

A run started through the gateway has its packet on ``run-inputs`` with what the policy cuts
gone and the provider's API key nowhere in any topic; ``/messages`` gives both sides; the
fingerprint is the request's; an archive of such a run verifies, a run fed without a packet is
listed (not failed), and a run whose frames say the gateway made it but has no packet fails.

A run request may be up to ``max_run_request_bytes`` (4 MiB) while a record may not exceed the
broker's 1 MB: the packet of a big request goes as pieces (``schemas/run_input_pieces.py``) on
the run's partition, the run starts (202, not 503), and every reader joins the pieces —
``/messages``, the audit archive and its check, ``modelevents tail --topic run-inputs``.
"""

from __future__ import annotations

import hashlib
import json
import random
import secrets
import subprocess
import sys

import httpx
import pytest

from modelevents.adapters.openai_responses import OpenAIResponsesAdapter
from modelevents.schemas import run_input
from modelevents.schemas.end_of_input import with_end_markers
from modelevents.schemas.limits import MAX_RECORD_BYTES
from modelevents.schemas.run_input_pieces import (
    PacketAssembler,
    decode_piece,
    is_packet_key,
    is_piece,
)
from modelevents.schemas.transcript import Message
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import TOPICS, PipelineSettings
from modelevents.services.local import feeder
from tests.integration.audit.test_archive import audit_run, cli, verify
from tests.integration.pipeline import collect, feed, run
from tests.integration.simulated_gateway import (  # noqa: F401  (fixtures used by name)
    OPENAI_KEY,
    gateway,
    neutral,
    settings,
    settled,
    sim,
    simulator,
    start_gateway,
    start_run,
    wait_run,
)
from tests.paths import FIXTURES

pytestmark = pytest.mark.kafka

TEXT = "sim:openai-responses/text-with-usage"


def input_records(settings: PipelineSettings, run_id: str) -> list[clients.Record]:
    """The run's records on run-inputs (its packets' keys, on the run id's partition)."""
    async def read() -> list[clients.Record]:
        return [r async for r in clients.read_records(
            settings, "run-inputs", run_id=run_id, to_end=True, timeout=30,
            keys=lambda key: is_packet_key(key, run_id)) if r is not None]
    return run(read())


def packets_of(settings: PipelineSettings, run_id: str) -> list[run_input.RunInput]:
    """The run's packets in the order written (one cut into pieces: joined)."""
    assembler = PacketAssembler()
    return [p for r in input_records(settings, run_id)
            if r.raw is not None and (p := assembler.feed(r.raw)) is not None]


def every_topic_bytes(settings: PipelineSettings) -> bytes:
    """Keys and values of every record of every topic of the pipeline, concatenated."""
    async def read(topic: str) -> list[bytes]:
        return [(r.key or b"") + (r.raw or b"") async for r in clients.read_records(
            settings, topic, to_end=True, timeout=30)]
    return b"".join(b"".join(run(read(topic))) for topic in TOPICS)


def secret_request(email: str) -> dict:
    body = neutral("openai", "openai-responses", TEXT,
                   instructions="Answer briefly; never repeat the key.",
                   tools=[{"name": "lookup", "description": "find a customer",
                           "parameters": {"type": "object",
                                          "properties": {"email": {"type": "string"}}}}])
    body["transcript"][0]["parts"][0]["text"] = (
        f"I am {email}; my key is {OPENAI_KEY}; header Authorization: Bearer "
        f"tok_{secrets.token_hex(12)}. Hello!")
    return body


def test_a_gateway_run_has_its_packet_redacted_and_messages_give_both_sides(gateway, settings):
    email = f"jane.{secrets.token_hex(4)}@example.com"
    answer = httpx.post(f"{gateway.url}/v1/runs", json=secret_request(email), timeout=30,
                        headers={"X-Correlation-Id": "ticket-4711"})
    assert answer.status_code == 202, answer.text
    started = answer.json()
    run_id = started["run_id"]
    wait_run(gateway, run_id, settled("completed"), "completed")

    packets = packets_of(settings, run_id)
    # Written before the call (revision 0) and again when it ended, with what it learned.
    assert [p.revision for p in packets] == [0, 1]
    first, last = packets
    assert last.provider_object_id and last.provider_object_id.startswith("resp_")
    assert last.last_cursor is not None and first.provider_object_id is None
    assert (last.origin, last.call, last.tenant) == ("gateway", started["call"], "default")
    assert (last.provider, last.api, last.model) == ("openai", "openai-responses", TEXT)
    assert last.adapter == OpenAIResponsesAdapter("r").adapter_id  # the revision translating
    assert last.correlation_id == "ticket-4711" and last.cancellable_by == []
    assert last.expires_at is not None and last.expires_at > last.recorded_at
    # The fingerprint is sha256 of the stored request, and the 202 told it.
    assert last.fingerprint == hashlib.sha256(last.request.encode()).hexdigest()
    assert started["input_fingerprint"] == last.fingerprint == first.fingerprint
    # Redacted before it was written: the e-mail and the bearer token by the default policy's
    # patterns, the provider key because the gateway holds it; the policy is recorded.
    text = last.request_doc()["transcript"][0]["parts"][0]["text"]
    assert email not in last.request and OPENAI_KEY not in last.request
    assert "tok_" not in text
    assert text.count("[REDACTED:") == 3, text
    for mark in ("[REDACTED:email]", "[REDACTED:secret]", "[REDACTED:bearer_token]"):
        assert mark in text, text
    assert last.redaction.name == "default" and last.redaction.redactions == 3
    assert {p.name for p in last.redaction.patterns} >= {"email", "bearer_token", "openai_key"}
    # The key is nowhere in any topic: not in the packet, not in a frame, not in an event.
    assert OPENAI_KEY.encode() not in every_topic_bytes(settings)
    assert email.encode() not in b"".join(run_input.encode(p) for p in packets)

    body = httpx.get(f"{gateway.url}/v1/runs/{run_id}/messages", timeout=30).json()
    assert body["sides"] == {"request": 1, "model": 1}
    asked, said = body["messages"]
    assert asked["role"] == "user" and asked["parts"][0]["text"] == text
    assert said["role"] == "assistant" and said["parts"][0]["type"] == "text"
    assert body["instructions"] == "Answer briefly; never repeat the key."
    assert body["input"]["fingerprint"] == last.fingerprint
    assert body["input"]["redaction"]["redactions"] == 3


def test_the_fingerprint_is_stable_for_identical_requests_and_differs_otherwise(gateway):
    body = neutral("openai", "openai-responses", TEXT)
    one = start_run(gateway, body)
    two = start_run(gateway, body)
    assert one["run_id"] != two["run_id"]
    assert one["input_fingerprint"] == two["input_fingerprint"]
    # The same request with its defaults spelled out and its keys in another order.
    spelled = {"background": False, "tools": [], **dict(reversed(list(body.items())))}
    assert start_run(gateway, spelled)["input_fingerprint"] == one["input_fingerprint"]
    other = neutral("openai", "openai-responses", TEXT)
    other["transcript"][0]["parts"][0]["text"] = "Hello?"
    assert start_run(gateway, other)["input_fingerprint"] != one["input_fingerprint"]
    for started in (one, two):
        wait_run(gateway, started["run_id"], settled("completed"), "completed")


def test_a_forwarded_run_supplies_its_packet(gateway, settings):
    run_id = f"run_fwd_{secrets.token_hex(6)}"
    stream = (FIXTURES / "openai-responses" / "text-with-usage.sse").read_bytes()
    sent = httpx.post(f"{gateway.url}/v1/runs/{run_id}/frames", content=stream, timeout=30,
                      params={"api": "openai-responses"},
                      headers={"content-type": "text/event-stream"})
    assert sent.status_code == 200, sent.text
    request = neutral("openai", "openai-responses", "gpt-4.1")
    recorded = httpx.post(f"{gateway.url}/v1/runs/{run_id}/input", timeout=30, json={
        "request": request, "api": "responses", "model": "gpt-4.1"})
    assert recorded.status_code == 201, recorded.text
    [packet] = packets_of(settings, run_id)
    assert (packet.origin, packet.call, packet.api) == ("forwarded", "s0", "openai-responses")
    assert recorded.json()["input_fingerprint"] == packet.fingerprint
    wait_run(gateway, run_id, lambda b: b["state"] is not None
             and b["state"]["status"] == "completed", "completed")
    body = httpx.get(f"{gateway.url}/v1/runs/{run_id}/messages", timeout=30).json()
    assert body["sides"] == {"request": 1, "model": 1}
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    # A bad api is a 422 saying so, and nothing is written.
    bad = httpx.post(f"{gateway.url}/v1/runs/{run_id}/input", timeout=30, json={
        "request": request, "api": "no-such-api", "model": "m"})
    assert bad.status_code == 422 and "no-such-api" in bad.json()["error"]
    assert len(packets_of(settings, run_id)) == 1


def fed_run(settings: PipelineSettings, recording: str, run_id: str,
            stream_id: str | None = None) -> int:
    """Feed a recording as run ``run_id`` (its frames renamed into stream ``stream_id``) and
    wait until the worker published all its events; how many there are."""
    fed = feeder.frames_for_file(FIXTURES / recording, run_id=run_id, received_at=0)
    for frame in fed.frames:
        if stream_id is not None:
            frame.stream_id = stream_id
            frame.frame_id = f"{stream_id}:{frame.index}"
    frames = with_end_markers(fed.frames)
    run(feed(settings, frames))
    published = run(collect(settings, lambda p: (s := p.runs.get(run_id)) is not None
                            and s.status in ("completed", "failed", "incomplete")))
    return len(published.deduped(run_id))


def test_an_archive_has_the_packets_verify_passes_and_lists_runs_without(gateway, settings,
                                                                          tmp_path):
    started = start_run(gateway, neutral("openai", "openai-responses", TEXT))
    wait_run(gateway, started["run_id"], settled("completed"), "completed")
    fed_id = f"run_fed_{secrets.token_hex(6)}"
    assert fed_run(settings, "openai-responses/text-with-usage.sse", fed_id) > 0
    out = tmp_path / "archive"
    audit_run(settings, out, "--group", f"audit-{secrets.token_hex(4)}")
    code, report = verify(out)
    assert code == 0, report["problems"]
    assert report["summary"]["input_packets"] >= 2  # revisions 0 and 1 of the gateway's run
    notes = {(n["check"], n["where"]): n["message"] for n in report["notes"]}
    assert "no input packet recorded" in notes[("input", f"run {fed_id}")]
    assert ("input", f"run {started['run_id']}") not in notes
    manifests = list(out.glob("tenant=default/hour=*/*.manifest.jsonl"))
    assert any('"input_redaction":{"' in m.read_text() for m in manifests)

    # Frames that say the gateway made the run (a call tag's ids), but no packet: a failure.
    forged = f"run_forged_{secrets.token_hex(6)}"
    fed_run(settings, "openai-responses/text-with-usage.sse", forged, stream_id="c0-0badf00d.s0")
    again = tmp_path / "archive-2"
    audit_run(settings, again, "--group", f"audit-{secrets.token_hex(4)}")
    code, report = verify(again)
    assert code == 1
    assert [(p["check"], p["where"]) for p in report["problems"]] == [("input", f"run {forged}")]
    assert "started through the gateway" in report["problems"][0]["message"]


def test_messages_of_a_two_call_turn_are_the_latest_request_then_the_latest_answer(gateway):
    first = start_run(gateway, neutral("openai", "openai-responses",
                                       "sim:openai-responses/tool-call-parallel"))
    run_id = first["run_id"]
    wait_run(gateway, run_id, settled("waiting_for_tool"), "waiting_for_tool")
    history = httpx.get(f"{gateway.url}/v1/runs/{run_id}/messages", timeout=30).json()
    asked, assistant = history["messages"]
    calls = [p for p in assistant["parts"] if p["type"] == "tool_call"]
    results = {"role": "tool", "parts": [
        {"type": "tool_result", "tool_name": c["tool_name"], "tool_call_id": c["tool_call_id"],
         "output": "14 C"} for c in calls]}
    tools = [{"name": name, "parameters": {"type": "object", "properties": {}}}
             for name in sorted({c["tool_name"] for c in calls})]
    # The next call's transcript is the whole transcript so far plus the results: /messages
    # gave exactly what to send.
    second = start_run(gateway, {**neutral("anthropic", "anthropic-messages",
                                           "sim:anthropic-messages/text"),
                                 "run_id": run_id, "transcript": [asked, assistant, results],
                                 "tools": tools})
    wait_run(gateway, run_id, lambda b: len(b["calls"]) == 2 and not b["calls"][-1]["in_flight"]
             and b["state"]["status"] == "completed", "the second call completing the run")
    body = httpx.get(f"{gateway.url}/v1/runs/{run_id}/messages", timeout=30).json()
    assert body["input"]["call"] == second["call"] != first["call"]
    assert body["sides"] == {"request": 3, "model": 1}
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool", "assistant"]
    # The request's side is what was sent (with the model's defaults spelled out).
    assert [Message.model_validate(m) for m in body["messages"][:3]] == [
        Message.model_validate(m) for m in (asked, assistant, results)]
    assert body["input"]["provider"] == "anthropic"


# --- packets larger than a record (schemas/run_input_pieces.py) -----------------------------

WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
         "juliett", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo")


def big_text(size: int, seed: int = 17) -> str:
    """``size`` bytes or so of words (nothing a redaction pattern takes), not repetitive."""
    rng = random.Random(seed)
    words = []
    total = 0
    while total < size:
        word = f"{rng.choice(WORDS)}{rng.randrange(1000)}"
        words.append(word)
        total += len(word) + 1
    return " ".join(words)


def tail_lines(settings: PipelineSettings, run_id: str) -> list[dict]:
    done = subprocess.run([*cli(settings, "tail", "--topic", "run-inputs", "--run-id", run_id,
                                "--timeout", "3", "--meta")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_a_request_whose_packet_exceeds_a_record_starts_and_every_reader_joins_it(
        gateway, settings, tmp_path):
    text = big_text(2_500_000)
    body = neutral("openai", "openai-responses", TEXT)
    body["transcript"][0]["parts"][0]["text"] = text
    answer = httpx.post(f"{gateway.url}/v1/runs", json=body, timeout=60)
    assert answer.status_code == 202, answer.text[:2000]  # was 503: the packet was refused
    started = answer.json()
    run_id = started["run_id"]
    wait_run(gateway, run_id, settled("completed"), "completed")

    # On the topic: pieces, each under the record limit, keyed run_id, run_id#1, … on the run
    # id's partition (read_records reads only that one), written twice (revisions 0 and 1).
    records = input_records(settings, run_id)
    assert all(is_piece(r.raw) and len(r.raw or b"") < MAX_RECORD_BYTES for r in records)
    pieces = [decode_piece(r.raw) for r in records if r.raw is not None]
    count = pieces[0].count
    assert count >= 4 and len(records) == 2 * count
    assert [p.index for p in pieces] == 2 * list(range(count))
    assert [r.key_text for r in records] == 2 * [run_id, *(f"{run_id}#{i}"
                                                         for i in range(1, count))]
    packets = packets_of(settings, run_id)
    assert [p.revision for p in packets] == [0, 1]
    last = packets[-1]
    assert last.fingerprint == started["input_fingerprint"] == run_input.request_fingerprint(
        last.request)
    assert last.request_doc()["transcript"][0]["parts"][0]["text"] == text

    # /messages: the request's side whole.
    history = httpx.get(f"{gateway.url}/v1/runs/{run_id}/messages", timeout=60).json()
    assert history["sides"] == {"request": 1, "model": 1}
    assert history["messages"][0]["parts"][0]["text"] == text
    assert history["input"]["fingerprint"] == last.fingerprint
    assert history["input"]["revision"] == 1

    # tail: one line a piece before the last, the packet at its last piece.
    lines = tail_lines(settings, run_id)
    assert [line.get("revision") for line in lines] == [
        *[None] * (count - 1), 0, *[None] * (count - 1), 1]
    assert lines[0]["piece"]["index"] == 0 and lines[0]["piece"]["count"] == count
    assert lines[count - 1]["_pieces"] == count and lines[-1]["fingerprint"] == last.fingerprint
    assert lines[-1]["request"] == last.request and lines[-1]["_key"] == f"{run_id}#{count - 1}"

    # The audit archive has the pieces; verify joins them and finds the run's packets.
    out = tmp_path / "archive"
    audit_run(settings, out, "--group", f"audit-{secrets.token_hex(4)}")
    _code, report = verify(out)
    # The module's topics hold other tests' runs too (a forged one fails on purpose): none of
    # the problems is this run's, and none is of another check than the packets'.
    assert [p for p in report["problems"] if p["check"] != "input"
            or run_id in p["where"] or "run_forged_" not in p["where"]] == []
    notes = {(n["check"], n["where"]): n["message"] for n in report["notes"]}
    assert ("input", f"run {run_id}") not in notes, notes
    assert report["summary"]["input_packets"] >= 2
    manifests = list(out.glob("tenant=default/hour=*/*.manifest.jsonl"))
    assert any('"input_redaction":{"' in m.read_text() for m in manifests)
    exported = subprocess.run([sys.executable, "-m", "modelevents.services.cli", "audit",
                               "export", str(out), "--format", "jsonl"],
                              capture_output=True, text=True, timeout=120)
    assert exported.returncode == 0, exported.stderr[-3000:]
    kinds = [json.loads(line)["type"] for line in exported.stdout.splitlines()]
    assert kinds.count("input_piece") >= 2 * count


def test_tail_prints_the_input_packets_of_a_run(gateway, settings):
    started = start_run(gateway, neutral("openai", "openai-responses", TEXT))
    run_id = started["run_id"]
    wait_run(gateway, run_id, settled("completed"), "completed")
    lines = tail_lines(settings, run_id)
    assert [(line["revision"], line["run_id"], line["_key"]) for line in lines] == [
        (0, run_id, run_id), (1, run_id, run_id)]
    assert "error" not in lines[0] and lines[-1]["fingerprint"] == started["input_fingerprint"]
    assert lines[-1]["origin"] == "gateway" and lines[-1]["call"] == started["call"]
    assert lines[-1]["redaction"]["name"] == "default"
    assert json.loads(lines[-1]["request"])["transcript"][0]["parts"][0]["text"] == "Hello"
