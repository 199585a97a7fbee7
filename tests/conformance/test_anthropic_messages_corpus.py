"""The recorded Claude Messages corpus (../shared/fixtures/anthropic) through the adapter.

Every file is one run: a cassette's interactions and the successive responses some recorders
concatenated (vercel-ai programmatic-tool-calling, tool-search-regex) are the provider calls of one
agentic turn, fed to ONE adapter. The expectations are read from the raw provider JSON here, with
the standard library and without the adapter's tables, then compared with the events; the full
event sequence is also a reviewed snapshot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

from modelevents.adapters.anthropic_messages import AnthropicMessagesAdapter
from modelevents.adapters.cassette import read_cassette
from modelevents.adapters.framing import frames_from_bytes
from modelevents.schemas.events import ModelEvent
from modelevents.services.run_logic.run_machine import RunMachine
from tests.corpus import corpus_files, corpus_id, require_corpus
from tests.paths import CONFORMANCE_SNAPSHOTS
from tests.snapshots import assert_matches_snapshot

pytestmark = pytest.mark.corpus

CORPUS = corpus_files("anthropic")

# What each stop_reason must end in — written from reference/anthropic.md §5 and DESIGN.md's
# run states, independently of the adapter's own table.
EXPECTED_OUTCOME = {
    "end_turn": ("run.finished", "completed", "end_turn"),
    "stop_sequence": ("run.finished", "completed", "stop_sequence"),
    "max_tokens": ("run.finished", "incomplete", "max_tokens"),
    "refusal": ("run.finished", "incomplete", "refusal"),
    "tool_use": ("run.awaiting", None, "tool_results"),
    "pause_turn": ("run.awaiting", None, "continuation"),
}


# --- reading the raw provider data (no adapter involved) ---------------------------------------


def bodies(path: Path) -> list[tuple[str, bytes, int | None]]:
    """(stream id, response body, HTTP status) of each provider call recorded in the file."""
    if path.suffix == ".yaml":
        return [(f"i{n}", i.body, i.status) for n, i in enumerate(read_cassette(path), 1)]
    return [("s0", path.read_bytes(), None)]


def raw_documents(body: bytes) -> list[dict]:
    text = body.decode("utf-8")
    try:
        return [json.loads(text)]  # a complete Message object or an error body
    except json.JSONDecodeError:
        pass
    lines = text.splitlines()
    if any(line.startswith("data:") for line in lines):  # SSE, one data line per event here
        return [json.loads(line[5:]) for line in lines if line.startswith("data:")]
    return [json.loads(line) for line in lines if line.strip()]  # JSON lines (vercel chunks)


@dataclass
class RawMessage:
    message_id: str
    model: str
    blocks: dict[int, dict] = field(default_factory=dict)  # index -> block start, + gathered
    stop_reason: str | None = None
    stop_details: dict | None = None
    usage: dict = field(default_factory=dict)
    usage_reports: int = 0
    ended: bool = False  # the provider said its last word on it (message_delta / message_stop)
    interrupted: bool = False  # another message_start came before its message_stop


def raw_messages(documents: list[dict]) -> list[RawMessage]:
    messages: list[RawMessage] = []
    current: RawMessage | None = None

    def add_block(msg: RawMessage, index: int, block: dict) -> None:
        msg.blocks[index] = {"start": block, "text": [], "json": [], "thinking": [],
                             "signature": block.get("signature") or "",
                             "citations": list(block.get("citations") or [])}
        if block.get("text"):
            msg.blocks[index]["text"].append(block["text"])

    for doc in documents:
        kind = doc["type"]
        if kind in ("message_start", "message"):
            message = doc["message"] if kind == "message_start" else doc
            if current is not None and not current.ended:
                if current.message_id == message["id"]:
                    continue
                current.interrupted = True
            current = RawMessage(message["id"], message["model"])
            current.usage = dict(message.get("usage") or {})
            current.usage_reports = 1 if "usage" in message else 0
            current.stop_reason = message.get("stop_reason")
            current.stop_details = message.get("stop_details")
            messages.append(current)
            for index, block in enumerate(message.get("content") or []):
                add_block(current, index, block)
            if kind == "message":
                current.ended = True
        elif kind == "content_block_start":
            add_block(current, doc["index"], doc["content_block"])
        elif kind == "content_block_delta":
            block, delta = current.blocks[doc["index"]], doc["delta"]
            if delta["type"] == "text_delta":
                block["text"].append(delta["text"])
            elif delta["type"] == "input_json_delta":
                block["json"].append(delta["partial_json"])
            elif delta["type"] == "thinking_delta":
                block["thinking"].append(delta["thinking"])
            elif delta["type"] == "signature_delta":
                block["signature"] += delta["signature"]
            elif delta["type"] == "citations_delta":
                block["citations"].append(delta["citation"])
        elif kind == "message_delta":
            current.usage.update(doc.get("usage") or {})  # cumulative values replace (§6)
            current.usage_reports += "usage" in doc
            current.stop_reason = doc["delta"].get("stop_reason") or current.stop_reason
            current.stop_details = doc["delta"].get("stop_details") or current.stop_details
            current.ended = True
        elif kind == "message_stop":
            current.ended = True
    return messages


def tool_input_text(block: dict) -> str | None:
    joined = "".join(block["json"])
    return joined if joined else None


# --- running the adapter -----------------------------------------------------------------------


def normalize(path: Path) -> list[ModelEvent]:
    run_id = f"corpus:{corpus_id(path)}"
    adapter = AnthropicMessagesAdapter(run_id)
    events: list[ModelEvent] = []
    for stream_id, body, status in bodies(path):
        for frame in frames_from_bytes(body, run_key=run_id, provider="anthropic",
                                       api="anthropic-messages", stream_id=stream_id,
                                       http_status=status):
            events += adapter.feed(frame)
    return events + adapter.close()


def snapshot_name(path: Path) -> Path:
    name = corpus_id(path).removeprefix("anthropic/").replace("/", "__")
    return CONFORMANCE_SNAPSHOTS / "anthropic-messages" / f"{name}.jsonl"


# --- the checks --------------------------------------------------------------------------------


@pytest.fixture(params=CORPUS, ids=[corpus_id(p) for p in CORPUS] or None)
def recorded(request) -> tuple[Path, list[ModelEvent], list[RawMessage]]:
    require_corpus()
    path = request.param
    documents = [d for _, body, _ in bodies(path) for d in raw_documents(body)]
    return path, normalize(path), raw_messages(documents)


def test_corpus_is_present():
    require_corpus()
    assert len(CORPUS) >= 30, [corpus_id(p) for p in CORPUS]


def test_snapshot(recorded):
    path, events, _ = recorded
    assert_matches_snapshot(snapshot_name(path), events)


def test_text_reassembles_to_the_provider_text(recorded):
    _, events, messages = recorded
    expected = [(m.message_id, i, "".join(b["text"])) for m in messages
                for i, b in sorted(m.blocks.items())
                if b["start"]["type"] == "text" and not m.interrupted]
    done = [(e.payload.item_id, e.payload.output_index, e.payload.text)
            for e in events if e.kind == "text.done"]
    assert done == expected
    # ... and the deltas add up to the same text, block by block.
    for message_id, index, text in expected:
        assert "".join(e.payload.text for e in events if e.kind == "text.delta"
                       and (e.payload.item_id, e.payload.output_index) == (message_id, index)
                       ) == text


def test_tool_calls_match_the_provider_blocks(recorded):
    _, events, messages = recorded
    expected = []
    for m in messages:
        if m.interrupted:  # a spliced-over message's half call is never a call
            continue
        for _index, b in sorted(m.blocks.items()):
            if b["start"]["type"] == "tool_use":
                raw = tool_input_text(b)
                try:
                    value = json.loads(raw) if raw is not None else b["start"]["input"]
                    valid = True
                except json.JSONDecodeError:
                    value, valid = raw, False
                expected.append((b["start"]["id"], b["start"]["name"], value, valid))
    calls = [e.payload for e in events if e.kind == "tool.call"]
    actual = [(c.tool_call_id, c.tool_name,
               json.loads(c.arguments) if c.arguments_valid else c.arguments, c.arguments_valid)
              for c in calls]
    assert actual == expected
    started = {e.payload.tool_call_id for e in events if e.kind == "tool.call.started"}
    assert {c.tool_call_id for c in calls} <= started


def test_hosted_tools_are_hosted_with_their_results(recorded):
    _, events, messages = recorded
    calls, results = [], []
    for m in messages:
        for b in (b for _, b in sorted(m.blocks.items())):
            block = b["start"]
            if block["type"] in ("server_tool_use", "mcp_tool_use"):
                raw = tool_input_text(b)
                calls.append((block["id"], block["name"],
                              json.loads(raw) if raw is not None else block["input"],
                              f"mcp:{block['server_name']}" if block["type"] == "mcp_tool_use"
                              else "provider"))
            elif block["type"].endswith("_tool_result"):
                content = block.get("content")
                error = (block.get("is_error") is True if block["type"] == "mcp_tool_result"
                         else isinstance(content, dict) and content["type"].endswith("_error"))
                results.append((block["tool_use_id"], error))
    hosted_calls = [e.payload for e in events if e.kind == "hosted.call"
                    and e.payload.tool_type != "compaction"]
    assert [(h.call_id, h.name, json.loads(h.arguments), h.authority)
            for h in hosted_calls] == calls
    hosted_results = [e.payload for e in events if e.kind == "hosted.result"
                      and e.payload.tool_type != "compaction"]
    assert [(h.call_id, h.is_error) for h in hosted_results] == results
    for h in hosted_results:
        assert h.executor == "provider" and h.evidence and json.loads(h.evidence) is not None
    # Provider-executed tools are never disguised as client tool calls.
    client_ids = {e.payload.tool_call_id for e in events if e.kind.startswith("tool.call")}
    assert not client_ids & {c[0] for c in calls}


def test_citations_all_arrive(recorded):
    _, events, messages = recorded
    expected = [(m.message_id, i, c.get("cited_text")) for m in messages
                for i, b in sorted(m.blocks.items()) for c in b["citations"]]
    citations = [e for e in events if e.kind == "citation"]
    assert len(citations) == len(expected)
    assert [c.payload.cited_text for c in citations] == [c for _, _, c in expected]


def test_reasoning_keeps_text_signatures_and_redacted_data(recorded):
    _, events, messages = recorded
    expected = []
    for m in messages:
        for b in (b for _, b in sorted(m.blocks.items())):
            if b["start"]["type"] == "thinking":
                expected.append(("".join(b["thinking"]), b["signature"] or None, None))
            elif b["start"]["type"] == "redacted_thinking":
                expected.append(("", None, b["start"]["data"]))
    done = [e.payload for e in events if e.kind == "reasoning.done"]
    assert [(r.text, r.signature, r.encrypted_content) for r in done] == expected
    for r, e in zip(done, (e for e in events if e.kind == "reasoning.done")):
        assert r.valid_for == f"anthropic/{e.model}"


def test_terminal_state_follows_each_provider_call(recorded):
    _, events, messages = recorded
    expected = []
    for m in messages:
        if m.interrupted:
            continue
        kind, status, reason = EXPECTED_OUTCOME[m.stop_reason]
        expected.append((kind, status, reason, m.stop_reason))
    terminal = [(e.kind, getattr(e.payload, "status", None), e.payload.reason,
                 e.payload.raw_reason)
                for e in events if e.kind in ("run.awaiting", "run.finished")]
    assert terminal == expected
    assert events[-1].kind in ("run.awaiting", "run.finished")  # every recording is whole
    # Every provider call (re)starts the run, with its message id.
    assert [e.payload.provider_object_id for e in events if e.kind == "run.started"] == [
        m.message_id for m in messages]
    assert not [e for e in events if e.kind == "error" and
                e.payload.error_type == "stream_truncated"]


def test_refusals_carry_their_details(recorded):
    _, events, messages = recorded
    def said(details: dict) -> str | None:
        # The recommended model follows the provider's explanation (issue #12).
        explanation, model = details.get("explanation"), details.get("recommended_model")
        if not model:
            return explanation
        return (f"{explanation} " if explanation else "") + f"(recommended model: {model})"

    expected = [((m.stop_details or {}).get("category"), said(m.stop_details or {}))
                for m in messages if m.stop_reason == "refusal"]
    refusals = [(e.payload.category, e.payload.explanation) for e in events if e.kind == "refusal"]
    assert refusals == expected


def test_final_usage_is_the_provider_final_usage(recorded):
    _, events, messages = recorded
    usage = dict(messages[-1].usage)
    iterations = usage.get("iterations")
    if iterations:
        # Compaction and model fallback bill one call as several iterations; the top level is
        # the last one's. Billed: the sum per token kind (issue #12; vercel/ai and pydantic-ai).
        for key in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                    "cache_read_input_tokens"):
            usage[key] = sum(i.get(key) or 0 for i in iterations)
    cache_write = usage.get("cache_creation_input_tokens")
    cache_read = usage.get("cache_read_input_tokens")
    total_input = usage["input_tokens"] + (cache_write or 0) + (cache_read or 0)
    last = [e.payload for e in events if e.kind == "usage"][-1]
    assert (last.input_tokens, last.output_tokens, last.cache_write_tokens, last.cache_read_tokens,
            last.total_tokens) == (total_input, usage["output_tokens"], cache_write, cache_read,
                                   total_input + usage["output_tokens"])
    assert (last.iterations is None) == (not iterations)
    if iterations:
        assert [(i["type"], i["output_tokens"]) for i in orjson.loads(last.iterations)] == [
            (i["type"], i["output_tokens"]) for i in iterations]
    details = usage.get("output_tokens_details") or {}
    assert last.reasoning_tokens == details.get("thinking_tokens")
    assert last.server_tool_units == (usage.get("server_tool_use") or {})
    # One absolute snapshot per usage report of the provider (message_start, each message_delta).
    assert sum(1 for e in events if e.kind == "usage") == sum(m.usage_reports for m in messages)


def test_nothing_unknown_and_no_errors_but_the_splice(recorded):
    path, events, messages = recorded
    assert [e.payload.provider_type for e in events if e.kind == "unknown"] == []
    errors = [e.payload.error_type for e in events if e.kind == "error"]
    assert errors == ["message_interrupted"] * sum(m.interrupted for m in messages)


def test_events_carry_the_model_that_produced_them(recorded):
    _, events, messages = recorded
    models = {m.model for m in messages} | {
        b["start"]["to"]["model"] for m in messages for b in m.blocks.values()
        if b["start"]["type"] == "fallback"}
    assert {e.model for e in events} <= models
    assert events[0].model == messages[0].model


def test_the_run_machine_accepts_the_sequence(recorded):
    path, events, messages = recorded
    machine = RunMachine.new(f"corpus:{corpus_id(path)}")
    for seq, event in enumerate(events):
        event.seq = seq
        machine.apply(event)
    state = machine.state
    last = messages[-1]
    kind, status, reason = EXPECTED_OUTCOME[last.stop_reason]
    assert (state.status, state.reason) == (
        status if kind == "run.finished" else "waiting_for_tool", reason)
    # Only the spliced recording leaves something to reconcile (its abandoned first message).
    assert state.needs_reconciliation is False or any(m.interrupted for m in messages), (
        state.reconciliation_notes)
    assert state.provider_object_ids == [m.message_id for m in messages]
