"""The recorded Gemini Interactions corpus (../shared/fixtures/gemini/vercel-ai/interactions and
interactions-legacy) through the adapter.

``*.chunks.txt`` are the SSE ``data:`` payloads of one stream, one JSON per line; ``*.json`` are
complete Interaction objects (transport poll). The expectations are read from the raw provider
JSON here, with the standard library and without the adapter's tables, then compared with the
events; the full event sequence is also a reviewed snapshot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from modelevents.adapters.framing import frames_from_bytes
from modelevents.adapters.gemini_interactions import GeminiInteractionsAdapter
from modelevents.schemas.events import ModelEvent
from modelevents.services.run_logic.run_machine import run_state_of
from tests.corpus import CORPUS_DIR, corpus_files, corpus_id, require_corpus
from tests.helpers import of_kind
from tests.paths import CONFORMANCE_SNAPSHOTS
from tests.snapshots import assert_matches_snapshot

pytestmark = pytest.mark.corpus

FOLDERS = ("gemini/vercel-ai/interactions", "gemini/vercel-ai/interactions-legacy")
CORPUS = [path for folder in FOLDERS for path in corpus_files(folder)]

# The interaction status a recording ends with -> what the run must end in, written from
# reference/gemini.md A4 and DESIGN.md's run states, independently of the adapter's table.
EXPECTED_OUTCOME = {
    "completed": ("run.finished", "completed", "end_turn"),
    "requires_action": ("run.awaiting", "tool_results", None),
}
CITATION_TYPES = {"url_citation", "file_citation", "place_citation"}


# --- reading the raw provider data (no adapter involved) ---------------------------------------


@dataclass
class RawInteraction:
    interaction_id: str = ""
    model: str | None = None
    status: str | None = None
    usage: dict | None = None
    texts: dict[int, str] = field(default_factory=dict)  # step index -> model text
    calls: dict[int, dict] = field(default_factory=dict)  # step index -> {id, name, arguments}
    signatures: dict[int, str] = field(default_factory=dict)  # thought step index -> signature
    hosted_calls: dict[int, str] = field(default_factory=dict)  # step index -> call id
    hosted_results: dict[int, str] = field(default_factory=dict)  # step index -> call id
    citations: int = 0


def raw_documents(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return [json.loads(text)]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _count_citations(annotations) -> int:
    return sum(1 for a in annotations or () if a.get("type") in CITATION_TYPES)


def _read_step(raw: RawInteraction, index: int, step: dict) -> None:
    """One whole step (current) or content block (legacy) of an Interaction object."""
    kind = step["type"]
    if kind == "model_output":
        for item in step.get("content") or ():
            if item["type"] == "text":
                raw.texts[index] = raw.texts.get(index, "") + item["text"]
                raw.citations += _count_citations(item.get("annotations"))
    elif kind == "text":
        raw.texts[index] = raw.texts.get(index, "") + step.get("text", "")
        raw.citations += _count_citations(step.get("annotations"))
    elif kind == "thought":
        if step.get("signature"):
            raw.signatures[index] = step["signature"]
    elif kind == "function_call":
        args = step.get("arguments")
        raw.calls[index] = {"id": step.get("id"), "name": step.get("name"),
                            "arguments": json.dumps(args) if args else ""}
    elif kind.endswith("_call"):
        raw.hosted_calls[index] = step.get("id")
    elif kind.endswith("_result"):
        raw.hosted_results[index] = step.get("call_id")


def raw_interaction(documents: list[dict]) -> RawInteraction:
    raw = RawInteraction()
    for doc in documents:
        event = doc.get("event_type")
        if event is None:  # a complete Interaction object
            raw.interaction_id, raw.model = doc.get("id", ""), doc.get("model")
            raw.status, raw.usage = doc.get("status"), doc.get("usage")
            for index, step in enumerate(doc.get("steps") or doc.get("outputs") or ()):
                _read_step(raw, index, step)
        elif event in ("interaction.created", "interaction.start"):
            raw.interaction_id = doc["interaction"]["id"]
            raw.model = doc["interaction"].get("model")
        elif event in ("interaction.completed", "interaction.complete"):
            raw.status = doc["interaction"]["status"]
            raw.usage = doc["interaction"].get("usage")
        elif event in ("step.start", "content.start"):
            _read_step(raw, doc["index"], doc.get("step") or doc.get("content"))
        elif event in ("step.delta", "content.delta"):
            index, delta = doc["index"], doc["delta"]
            kind = delta["type"]
            if kind == "text":
                raw.texts[index] = raw.texts.get(index, "") + delta["text"]
                raw.citations += _count_citations(delta.get("annotations"))
            elif kind in ("text_annotation", "text_annotation_delta"):
                raw.citations += _count_citations(delta.get("annotations"))
            elif kind == "thought_signature":
                raw.signatures[index] = delta["signature"]
            elif kind == "arguments_delta":  # current: a JSON string fragment
                raw.calls[index]["arguments"] += delta["arguments"]
            elif kind == "function_call":  # legacy: the whole call in one delta
                raw.calls[index] = {"id": delta["id"], "name": delta["name"],
                                    "arguments": json.dumps(delta["arguments"])}
    return raw


# --- the adapter -------------------------------------------------------------------------------


def normalize(path: Path, adapter: GeminiInteractionsAdapter | None = None,
              stream_id: str = "s0") -> list[ModelEvent]:
    framing = "json" if path.suffix == ".json" else "jsonl"
    frames = frames_from_bytes(path.read_bytes(), run_key="corpus", provider="google",
                               api="gemini-interactions", framing=framing, stream_id=stream_id)
    adapter = adapter or GeminiInteractionsAdapter("corpus")
    events = [event for frame in frames for event in adapter.feed(frame)]
    return events + adapter.close()


def snapshot_name(path: Path) -> Path:
    return CONFORMANCE_SNAPSHOTS / "gemini-interactions" / f"{path.parent.name}-{path.name}.jsonl"


@pytest.mark.parametrize("path", CORPUS, ids=[corpus_id(p) for p in CORPUS])
def test_recorded_interaction_translates_faithfully(path: Path) -> None:
    require_corpus()
    raw = raw_interaction(raw_documents(path))
    events = normalize(path)
    assert_matches_snapshot(snapshot_name(path), events)

    assert not of_kind(events, "unknown"), of_kind(events, "unknown")
    assert not of_kind(events, "error"), of_kind(events, "error")
    (started,) = of_kind(events, "run.started")
    assert started.provider_object_id == raw.interaction_id
    assert {e.model for e in events} == {raw.model}

    # Text: each output step's text.done parts join to what the provider streamed / returned,
    # and the deltas add up to the same text.
    done: dict[int, str] = {}
    for part in of_kind(events, "text.done"):
        done[part.output_index] = done.get(part.output_index, "") + part.text
    assert done == raw.texts
    assert "".join(d.text for d in of_kind(events, "text.delta")) == "".join(raw.texts.values())

    # Tool calls: names, ids and arguments as the provider sent them.
    calls = of_kind(events, "tool.call")
    assert [(c.output_index, c.tool_name, c.tool_call_id) for c in calls] == [
        (i, c["name"], c["id"]) for i, c in sorted(raw.calls.items())]
    for call in calls:
        expected = raw.calls[call.output_index]["arguments"] or "{}"
        assert json.loads(call.arguments) == json.loads(expected)
        assert call.arguments_valid is True

    # Thought signatures, kept for replay to this model only.
    reasoning = {r.output_index: r for r in of_kind(events, "reasoning.done")}
    assert {i: r.signature for i, r in reasoning.items()} == raw.signatures
    assert {r.valid_for for r in reasoning.values()} <= {f"google/{raw.model}"}

    # Hosted tools are hosted, never function calls; citations one per annotation.
    assert [(h.output_index, h.call_id) for h in of_kind(events, "hosted.call")] == sorted(
        raw.hosted_calls.items())
    assert [(h.output_index, h.call_id) for h in of_kind(events, "hosted.result")] == sorted(
        raw.hosted_results.items())
    assert len(of_kind(events, "citation")) == raw.citations

    # Usage: the provider's final totals (reference A4), as an absolute snapshot.
    usage = of_kind(events, "usage")[-1]
    u = raw.usage
    assert usage.input_tokens == u["total_input_tokens"] + u["total_tool_use_tokens"]
    assert usage.output_tokens == u["total_output_tokens"] + u["total_thought_tokens"]
    assert usage.reasoning_tokens == u["total_thought_tokens"]
    assert usage.cache_read_tokens == u["total_cached_tokens"]
    assert usage.total_tokens == u["total_tokens"] == usage.input_tokens + usage.output_tokens

    # Terminal state: the interaction status, as the last event.
    kind, first, reason = EXPECTED_OUTCOME[raw.status]
    last = events[-1]
    assert last.kind == kind
    if kind == "run.awaiting":
        assert (last.payload.reason, last.payload.raw_reason) == (first, raw.status)
    else:
        assert (last.payload.status, last.payload.reason, last.payload.raw_reason) == (
            first, reason, raw.status)


@pytest.mark.parametrize("folder", FOLDERS)
def test_recorded_tool_loop_is_one_run_across_two_interactions(folder: str) -> None:
    """tool-call-step1 (requires_action) then tool-call-step2 (the answer): one agentic turn."""
    require_corpus()
    adapter = GeminiInteractionsAdapter("corpus")
    step1 = CORPUS_DIR / folder / "tool-call-step1.chunks.txt"
    step2 = CORPUS_DIR / folder / "tool-call-step2.chunks.txt"
    frames = []
    for stream_id, path in (("s1", step1), ("s2", step2)):
        frames += frames_from_bytes(path.read_bytes(), run_key="corpus", provider="google",
                                    api="gemini-interactions", framing="jsonl",
                                    stream_id=stream_id)
    events = [event for frame in frames for event in adapter.feed(frame)] + adapter.close()
    state = run_state_of(events)
    first, second = raw_interaction(raw_documents(step1)), raw_interaction(raw_documents(step2))
    assert state.status == "completed" and not state.needs_reconciliation
    assert state.provider_object_ids == [first.interaction_id, second.interaction_id]
    assert state.usage.total_tokens == first.usage["total_tokens"] + second.usage["total_tokens"]
    assert [e.kind for e in events if e.kind.startswith("run.")] == [
        "run.started", "run.awaiting", "run.started", "run.finished"]
