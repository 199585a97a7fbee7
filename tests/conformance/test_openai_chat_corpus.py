"""adapters/openai_chat.py against every recorded Chat Completions stream in the corpus.

For each recorded response the expectations are computed here from the raw provider JSON (never
through the adapter): text, reasoning and refusal per choice, tool calls (id, name, arguments),
finish reasons, the final usage and error bodies. The full event sequence is compared with a
reviewed snapshot beside that.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from modelevents.adapters.cassette import read_cassette
from modelevents.adapters.framing import frames_from_bytes
from modelevents.adapters.openai_chat import OpenAIChatAdapter
from modelevents.schemas.events import ModelEvent
from tests.corpus import CORPUS_DIR, corpus_files, corpus_id, require_corpus
from tests.helpers import feed_all
from tests.paths import CONFORMANCE_SNAPSHOTS
from tests.snapshots import assert_matches_snapshot

pytestmark = pytest.mark.corpus

# The vercel-ai folder mixes Responses and Chat recordings; these are the Chat ones
# (SOURCES.md: packages/openai/src/chat, openai-compatible/src/chat, groq).
VERCEL_CHAT = {
    "openai-text.chunks.txt",
    "azure-model-router.1.chunks.txt",
    "xai-tool-call.chunks.txt",
    "groq-tool-call.chunks.txt",
    "anthropic-fallback-tool-call.sse",
    "reasoning-model-legacy-parameter-error.json",
}


def _is_chat_cassette(path: Path) -> bool:
    return path.suffix == ".yaml" and b"/chat/completions" in path.read_bytes()


def chat_recordings() -> list[Path]:
    files = corpus_files("openai")
    return [p for p in files
            if (p.parent.name == "openai-python" and p.suffix == ".bin")
            or (p.parent.name == "vercel-ai" and p.name in VERCEL_CHAT)
            or (p.parent.name == "pydantic-ai" and _is_chat_cassette(p))]


RECORDINGS = chat_recordings()


def responses_of(path: Path) -> list[tuple[bytes, int | None]]:
    """(body, HTTP status) of every Chat Completions response the file recorded."""
    if path.suffix == ".yaml":
        return [(i.body, i.status) for i in read_cassette(path) if "/chat/completions" in i.uri]
    return [(path.read_bytes(), None)]


def frames(body: bytes, status: int | None, stream_id: str):
    return frames_from_bytes(body, run_key="corpus", provider="openai", api="openai-chat",
                             stream_id=stream_id, http_status=status)


def normalize(body: bytes, status: int | None, stream_id: str,
              adapter: OpenAIChatAdapter | None = None) -> list[ModelEvent]:
    return feed_all(adapter or OpenAIChatAdapter("corpus"), frames(body, status, stream_id))


# --- the provider's own account, read from the raw JSON ------------------------------------


def raw_facts(body: bytes, status: int | None) -> dict:
    choices: dict[int, dict] = {}
    usage = error = None
    for frame in frames(body, status, "raw"):
        if frame.body.startswith(b"[DONE]"):
            continue
        doc = orjson.loads(frame.body)
        if "error" in doc:
            error = doc["error"]
            continue
        for choice in doc.get("choices") or []:
            facts = choices.setdefault(choice["index"], {
                "text": "", "reasoning": "", "refusal": "", "tools": {}, "finish": None})
            delta = choice.get("delta") or choice.get("message") or {}
            facts["text"] += delta.get("content") or ""
            facts["reasoning"] += delta.get("reasoning_content") or delta.get("reasoning") or ""
            facts["refusal"] += delta.get("refusal") or ""
            for n, call in enumerate(delta.get("tool_calls") or []):
                tool = facts["tools"].setdefault(call.get("index", n),
                                                 {"id": None, "name": None, "arguments": ""})
                tool["id"] = tool["id"] or call.get("id")
                tool["name"] = tool["name"] or call["function"].get("name")
                tool["arguments"] += call["function"].get("arguments") or ""
            facts["finish"] = choice.get("finish_reason") or facts["finish"]
        usage = doc.get("usage") or (doc.get("x_groq") or {}).get("usage") or usage
    return {"choices": choices, "usage": usage, "error": error}


# What each recorded finish_reason must become (reference/openai.md §6, §12; DESIGN.md).
EXPECTED_END = {
    "stop": ("run.finished", "completed", "end_turn"),
    "length": ("run.finished", "incomplete", "max_tokens"),
    "tool_calls": ("run.awaiting", None, "tool_results"),
}


def check_against_raw(events: list[ModelEvent], facts: dict, where: str) -> None:
    kinds = [e.kind for e in events]
    assert "unknown" not in kinds, (where, [e.payload for e in events if e.kind == "unknown"])
    assert kinds.count("run.finished") + kinds.count("run.awaiting") == 1, where
    end = events[-1]

    if facts["error"] is not None:
        error = next(e.payload for e in events if e.kind == "error")
        assert error.message == facts["error"]["message"], where
        assert error.code == facts["error"].get("code"), where
        assert (end.kind, end.payload.status, end.payload.reason) == (
            "run.finished", "failed", "error"), where
        return

    for index, choice in facts["choices"].items():
        mine = [e.payload for e in events if getattr(e.payload, "output_index", None) == index]
        kinds_here = [e.kind for e in events if getattr(e.payload, "output_index", None) == index]
        deltas = [p for p, k in zip(mine, kinds_here) if k == "text.delta"]
        dones = [p for p, k in zip(mine, kinds_here) if k == "text.done"]
        assert "".join(p.text for p in deltas) == choice["text"], where
        assert "".join(p.text for p in dones) == choice["text"], where
        reasoning = [p for p, k in zip(mine, kinds_here) if k == "reasoning.done"]
        assert "".join(p.text for p in reasoning) == choice["reasoning"], where
        refusals = [p.text for p, k in zip(mine, kinds_here) if k == "refusal"]
        assert refusals == ([choice["refusal"]] if choice["refusal"] else []), where
        calls = [(p.tool_call_id, p.tool_name, p.arguments)
                 for p, k in zip(mine, kinds_here) if k == "tool.call"]
        assert calls == [(t["id"], t["name"], t["arguments"])
                         for _, t in sorted(choice["tools"].items())], where
        assert all(p.arguments_valid for p, k in zip(mine, kinds_here) if k == "tool.call")

    first = facts["choices"][min(facts["choices"])]
    kind, status, reason = EXPECTED_END[first["finish"]]
    if first["refusal"] and first["finish"] == "stop":
        reason = "refusal"
    assert end.kind == kind and end.payload.reason == reason, (where, end.payload)
    assert end.payload.raw_reason == first["finish"], where
    if status:
        assert end.payload.status == status, where
    assert not [e for e in events if e.kind == "citation"], where  # no annotations recorded

    usages = [e.payload for e in events if e.kind == "usage"]
    raw = facts["usage"]
    if raw is None:
        assert not usages, where
        return
    usage = usages[-1]
    reasoning = (raw.get("completion_tokens_details") or {}).get("reasoning_tokens")
    assert (usage.input_tokens, usage.total_tokens, usage.reasoning_tokens) == (
        raw["prompt_tokens"], raw["total_tokens"], reasoning), where
    outside = reasoning and raw["prompt_tokens"] + raw["completion_tokens"] != raw["total_tokens"]
    assert usage.output_tokens == raw["completion_tokens"] + (reasoning if outside else 0), where
    assert usage.input_tokens + usage.output_tokens == usage.total_tokens, where
    cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens")
    assert usage.cache_read_tokens == cached, where


def snapshot_name(path: Path) -> Path:
    stem = path.name.split(".")[0]
    if path.parent.name == "openai-python":
        stem = stem[:8]
    return CONFORMANCE_SNAPSHOTS / "openai-chat" / f"{path.parent.name}__{stem}.jsonl"


# --- tests ---------------------------------------------------------------------------------------


def test_the_chat_corpus_is_there():
    require_corpus()
    assert len(RECORDINGS) >= 15, [corpus_id(p) for p in RECORDINGS]


def test_no_chat_recording_is_left_out():
    """A Chat recording added to the corpus later must be added here too."""
    require_corpus()
    for path in (CORPUS_DIR / "openai" / "vercel-ai").glob("*"):
        if b'"chat.completion' in path.read_bytes():
            assert path.name in VERCEL_CHAT, path.name


@pytest.mark.parametrize("path", RECORDINGS, ids=corpus_id)
def test_recording_matches_the_raw_provider_data(path: Path):
    require_corpus()
    events: list[ModelEvent] = []
    for n, (body, status) in enumerate(responses_of(path)):
        mine = normalize(body, status, f"s{n}")
        check_against_raw(mine, raw_facts(body, status), f"{corpus_id(path)} response {n}")
        events += mine
    assert_matches_snapshot(snapshot_name(path), events)


def test_a_tool_loop_on_one_adapter_is_two_provider_calls_of_one_run():
    require_corpus()
    path = CORPUS_DIR / "openai" / "pydantic-ai" / "test_run_stream_sync_streams_real_model.yaml"
    adapter = OpenAIChatAdapter("corpus")
    events: list[ModelEvent] = []
    for n, (body, status) in enumerate(responses_of(path)):
        for frame in frames(body, status, f"call{n}"):
            events += adapter.feed(frame)
    events += adapter.close()
    assert [e.kind for e in events if e.kind.startswith("run.")] == [
        "run.started", "run.awaiting", "run.started", "run.finished"]
    assert "error" not in [e.kind for e in events]
    [call] = [e.payload for e in events if e.kind == "tool.call"]
    assert (call.tool_name, call.tool_call_id) == ("get_capital", "call_ZR5UUuTt3pf61kjwAJIYdVMj")


def test_groq_mid_stream_error_fails_the_call():
    require_corpus()
    path = CORPUS_DIR / "openai" / "pydantic-ai" / "test_tool_use_failed_error_streaming.yaml"
    body, status = responses_of(path)[0]
    events = normalize(body, status, "s0")
    error = next(e.payload for e in events if e.kind == "error")
    assert (error.code, error.http_status, error.retryable) == ("tool_use_failed", 400, False)
    assert events[-1].kind == "run.finished" and events[-1].payload.status == "failed"
