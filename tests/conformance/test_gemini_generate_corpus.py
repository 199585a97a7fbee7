"""adapters/gemini_generate.py against every recorded generateContent stream and object in
../shared/fixtures/gemini (vercel-ai/generate-content, llm-gemini, pydantic-ai).

Each recording is normalized (all frames, then close) and checked against facts read from the
raw provider JSON *here*, with the standard library and without the adapter: the text, the thought
summaries, every function call (name, arguments — Vertex partialArgs rebuilt by this module's own
builder), hosted tool parts, citations, thought signatures, the terminal outcome and the final
usage. Then the whole event sequence is compared with its reviewed snapshot.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from modelevents.adapters.cassette import read_cassette
from modelevents.adapters.framing import frames_from_bytes
from modelevents.adapters.gemini_generate import GeminiGenerateAdapter
from modelevents.adapters.google_status import RPC_ERROR_TYPES
from modelevents.schemas.events import ModelEvent
from tests.corpus import CORPUS_DIR, corpus_files, corpus_id, require_corpus
from tests.helpers import feed_all
from tests.paths import CONFORMANCE_SNAPSHOTS
from tests.snapshots import assert_matches_snapshot

pytestmark = pytest.mark.corpus

FILES = (corpus_files("gemini/vercel-ai/generate-content") + corpus_files("gemini/llm-gemini")
         + corpus_files("gemini/pydantic-ai"))

# What the reference (gemini.md B2) says each finishReason in the corpus means.
EXPECTED_FINISH = {
    "STOP": ("completed", "end_turn"),
    "MAX_TOKENS": ("incomplete", "max_tokens"),
    "SAFETY": ("incomplete", "content_filter"),
}


# --- the recordings ------------------------------------------------------------------------------


def recordings(path: Path) -> list[tuple[str, bytes, str, int]]:
    """(name, body, framing, http status) of every generateContent response in a corpus file."""
    if path.suffix == ".yaml":
        out = []
        for number, interaction in enumerate(read_cassette(path)):
            if ":generateContent" in interaction.uri:
                framing = "json"
            elif ":streamGenerateContent" in interaction.uri:
                framing = "sse" if "alt=sse" in interaction.uri else "json-array"
            else:
                continue  # e.g. the OAuth token fetch of a Vertex cassette
            out.append((f"{path.stem}.{number}", interaction.body, framing, interaction.status))
        return out
    body = path.read_bytes()
    if path.name.endswith(".chunks.txt"):
        return [(path.name, body, "jsonl", 200)]
    if path.name.endswith(".json-array.txt"):
        return [(path.name, body, "json-array", 200)]
    status = 200
    document = json.loads(body)
    if isinstance(document, dict) and isinstance(document.get("error"), dict):
        status = document["error"].get("code", 500)
    return [(path.name, body, "json", status)]


def raw_documents(body: bytes, framing: str) -> list[dict]:
    """The provider's JSON documents, parsed here without modelevents' framing code."""
    text = body.decode("utf-8")
    if framing == "sse":
        blocks = [b for b in re.split(r"\r?\n\r?\n", text) if b.strip()]
        return [json.loads(b.strip()[len("data:"):]) for b in blocks]
    if framing == "jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    if framing == "json-array":
        return json.loads(text)
    return [json.loads(text)]


def normalize(body: bytes, framing: str, status: int, run_id: str) -> list[ModelEvent]:
    return feed_all(GeminiGenerateAdapter(run_id), frames_from_bytes(
        body, run_key=run_id, provider="google", api="gemini-generate", framing=framing,
        http_status=None if status == 200 else status))


# --- independent reading of the raw documents ------------------------------------------------------


def parts_of(documents: list[dict]) -> list[dict]:
    return [part for document in documents for candidate in document.get("candidates") or []
            for part in (candidate.get("content") or {}).get("parts") or []]


def _path_tokens(path: str) -> list[Any]:
    tokens: list[Any] = []
    for name, index, quoted in re.findall(r"\.([^.\[]+)|\[(\d+)\]|\['([^']*)'\]", path[1:]):
        tokens.append(int(index) if index else (name or quoted))
    return tokens


def _assign(tree: dict, tokens: list[Any], value: Any) -> None:
    node: Any = tree
    for token, following in zip(tokens, tokens[1:]):
        if isinstance(node, list):
            while len(node) <= token:
                node.append(None)
            if node[token] is None:
                node[token] = [] if isinstance(following, int) else {}
            node = node[token]
        else:
            node = node.setdefault(token, [] if isinstance(following, int) else {})
    last = tokens[-1]
    if isinstance(node, list):
        while len(node) <= last:
            node.append(None)
    node[last] = value


def expected_calls(documents: list[dict]) -> list[dict]:
    """Function calls as the provider meant them: name, id, arguments (streamed or whole)."""
    calls: list[dict] = []
    for part in parts_of(documents):
        call = part.get("functionCall")
        if call is None:
            continue
        if "name" in call:
            calls.append({"name": call["name"], "id": call.get("id"), "args": call.get("args"),
                          "flat": {}, "growing": None})
        current = calls[-1]
        for arg in call.get("partialArgs") or []:
            path = arg["jsonPath"]
            value = next((arg[k] for k in ("stringValue", "numberValue", "boolValue") if k in arg),
                         None)
            if isinstance(value, str) and current["growing"] == path:
                current["flat"][path] += value
            else:
                current["flat"][path] = value
            current["growing"] = path if isinstance(value, str) and arg.get("willContinue") else None
    for call in calls:
        if call["args"] is None:
            tree: dict = {}
            for path, value in call["flat"].items():
                _assign(tree, _path_tokens(path), value)
            call["args"] = tree
    return calls


def expected_usage(documents: list[dict]) -> dict | None:
    snapshots = [d["usageMetadata"] for d in documents if "usageMetadata" in d]
    if not snapshots or ("promptTokenCount" not in snapshots[-1]
                         and "totalTokenCount" not in snapshots[-1]):
        return None
    last = snapshots[-1]
    return {
        "input_tokens": last.get("promptTokenCount", 0) + last.get("toolUsePromptTokenCount", 0),
        "output_tokens": last.get("candidatesTokenCount", 0) + last.get("thoughtsTokenCount", 0),
        "reasoning_tokens": last.get("thoughtsTokenCount"),
        "cache_read_tokens": last.get("cachedContentTokenCount"),
        "total_tokens": last.get("totalTokenCount"),
    }


def of(events: list[ModelEvent], kind: str) -> list:
    return [e.payload for e in events if e.kind == kind]


# --- the test --------------------------------------------------------------------------------------


def test_corpus_is_present() -> None:
    require_corpus()
    assert FILES, f"no generateContent recordings under {CORPUS_DIR / 'gemini'}"


@pytest.mark.parametrize("path", FILES, ids=corpus_id)
def test_recording_translates_faithfully(path: Path) -> None:
    require_corpus()
    cases = recordings(path)
    assert cases, f"{path} holds no generateContent response"
    source = path.relative_to(CORPUS_DIR).parts[1]  # vercel-ai | llm-gemini | pydantic-ai
    for name, body, framing, status in cases:
        documents = raw_documents(body, framing)
        events = normalize(body, framing, status, run_id=f"corpus:{name}")
        check_facts(name, documents, events)
        assert [(e.event_id, e.payload) for e in events] == [
            (e.event_id, e.payload) for e in normalize(body, framing, status, f"corpus:{name}")]
        assert_matches_snapshot(CONFORMANCE_SNAPSHOTS / "gemini-generate" / f"{source}.{name}.jsonl",
                                events)


def check_facts(name: str, documents: list[dict], events: list[ModelEvent]) -> None:
    where = f"recording {name}"
    assert not of(events, "unknown"), f"{where}: unknown events {of(events, 'unknown')}"
    kinds = [e.kind for e in events]
    last = documents[-1]

    # Errors: an HTTP error body is the whole story.
    if "error" in last:
        error = last["error"]
        (reported,) = of(events, "error")
        # The rpc status name is kept raw in `code`; error_type is its class in the closed
        # vocabulary (adapters/google_status.py, schemas/vocabulary.py).
        assert reported.code == error["status"] and reported.http_status == error["code"]
        assert reported.error_type == RPC_ERROR_TYPES[error["status"]]
        assert reported.retryable is (error["code"] == 429 or error["code"] >= 500)
        delays = [d["retryDelay"] for d in error.get("details", []) if "retryDelay" in d]
        assert all(delay in reported.message for delay in delays), where
        assert kinds[-1] == "run.finished" and events[-1].payload.status == "failed"
        return
    assert not of(events, "error"), f"{where}: {of(events, 'error')}"
    assert kinds[0] == "run.started"
    assert events[0].payload.provider_object_id == documents[0]["responseId"]
    assert events[-1].model == last["modelVersion"]

    parts = parts_of(documents)
    text = "".join(p["text"] for p in parts if "text" in p and not p.get("thought"))
    thoughts = "".join(p["text"] for p in parts if "text" in p and p.get("thought"))
    assert "".join(t.text for t in of(events, "text.done")) == text, where
    assert "".join(t.text for t in of(events, "text.delta")) == text, where
    assert "".join(r.text for r in of(events, "reasoning.done") if r.form == "summary") == thoughts

    # Every signature is kept, in order, tagged with the model it is valid for.
    signatures = [p["thoughtSignature"] for p in parts if "thoughtSignature" in p]
    carried = [r for r in of(events, "reasoning.done") if r.signature]
    assert [r.signature for r in carried] == signatures, where
    assert all(r.valid_for == f"google/{last['modelVersion']}" for r in carried)

    # Function calls: names, arguments, ids (synthesized: present, distinct, stable).
    calls = expected_calls(documents)
    reported = of(events, "tool.call")
    assert [c.tool_name for c in reported] == [c["name"] for c in calls], where
    assert [json.loads(c.arguments) for c in reported] == [c["args"] for c in calls], where
    assert all(c.arguments_valid for c in reported)
    ids = [c.tool_call_id for c in reported]
    assert all(ids) and len(set(ids)) == len(ids)
    assert [i for i, c in zip(ids, calls) if c["id"]] == [c["id"] for c in calls if c["id"]]
    for call in reported:
        deltas = [d.arguments for d in of(events, "tool.call.delta")
                  if d.tool_call_id == call.tool_call_id]
        assert not deltas or "".join(deltas) == call.arguments, where
    assert len(of(events, "tool.call.started")) == len(calls)

    # Hosted tools: provider-executed, never tool calls.
    hosted_calls, hosted_results = of(events, "hosted.call"), of(events, "hosted.result")
    code = [p["executableCode"] for p in parts if "executableCode" in p]
    code_results = [p["codeExecutionResult"] for p in parts if "codeExecutionResult" in p]
    server = [p["toolCall"] for p in parts if "toolCall" in p]
    server_results = [p["toolResponse"] for p in parts if "toolResponse" in p]
    assert [h.call_id for h in hosted_calls if h.tool_type == "code_execution"] == [
        c["id"] for c in code]
    assert [h.call_id for h in hosted_results if h.tool_type == "code_execution"] == [
        r["id"] for r in code_results]
    assert [h.call_id for h in hosted_calls if h.name == "GOOGLE_SEARCH_WEB"] == [
        c["id"] for c in server]
    assert [h.call_id for h in hosted_results if h.name == "GOOGLE_SEARCH_WEB"] == [
        r["id"] for r in server_results]
    url_context = [c["urlContextMetadata"] for d in documents for c in d.get("candidates", [])
                   if "urlContextMetadata" in c]
    assert len([h for h in hosted_results if h.tool_type == "web_fetch"]) == len(url_context)

    # Citations: one per (grounding support, source it cites).
    groundings = [c["groundingMetadata"] for d in documents for c in d.get("candidates", [])
                  if c.get("groundingMetadata")]
    expected_citations = sum(len(s.get("groundingChunkIndices", []))
                             for g in groundings for s in g.get("groundingSupports", []))
    assert len(of(events, "citation")) == expected_citations, where
    for citation in of(events, "citation"):
        block = next(t for t in of(events, "text.done") if t.output_index == citation.output_index)
        assert block.text[citation.start:citation.end] == citation.cited_text

    # Usage: one absolute snapshot, the provider's last.
    usage = expected_usage(documents)
    if usage is None:
        assert not of(events, "usage")
    else:
        (reported_usage,) = of(events, "usage")
        assert {k: getattr(reported_usage, k) for k in usage} == usage, where

    # The terminal outcome is the last event.
    feedback = last.get("promptFeedback") or {}
    if feedback.get("blockReason") and not last.get("candidates"):
        assert len(of(events, "refusal")) == 1
        outcome = events[-1].payload
        assert (events[-1].kind, outcome.status, outcome.reason, outcome.raw_reason) == (
            "run.finished", "incomplete", "content_filter", feedback["blockReason"])
        return
    finish = [c["finishReason"] for d in documents for c in d.get("candidates", [])
              if "finishReason" in c]
    assert len(finish) == 1, where
    if finish[0] == "STOP" and calls:
        assert events[-1].kind == "run.awaiting", where
        assert (events[-1].payload.reason, events[-1].payload.raw_reason) == ("tool_results", "STOP")
    else:
        assert events[-1].kind == "run.finished", where
        outcome = events[-1].payload
        assert (outcome.status, outcome.reason) == EXPECTED_FINISH[finish[0]], where
        assert outcome.raw_reason == finish[0]
    if finish[0] == "SAFETY":
        assert len(of(events, "refusal")) == 1
    assert kinds.count("run.finished") + kinds.count("run.awaiting") == 1
