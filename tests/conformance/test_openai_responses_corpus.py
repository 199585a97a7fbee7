"""adapters/openai_responses.py against the recorded OpenAI Responses corpus.

Every Responses recording in ../shared/fixtures/openai (vercel/ai ``*.chunks.txt`` streams, the
Responses error bodies, the pydantic-ai cassettes' ``/responses`` interactions) is normalized
whole, then checked against the provider's own data, parsed here independently of the adapter:
final texts, tool calls, citation counts, usage, terminal state, no ``unknown`` — and the full
event sequence against a reviewed snapshot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest

from modelevents.adapters.cassette import read_cassette
from modelevents.adapters.framing import frames_from_bytes
from modelevents.adapters.openai_responses import OpenAIResponsesAdapter
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame
from tests.corpus import CORPUS_DIR, corpus_files, corpus_id, require_corpus
from tests.helpers import feed_all
from tests.paths import CONFORMANCE_SNAPSHOTS
from tests.snapshots import assert_matches_snapshot

pytestmark = pytest.mark.corpus

RUN = "run-corpus"
# Error bodies recorded for the Responses API (vercel/ai packages/openai/src/responses/...);
# the Chat Completions one beside them belongs to the openai-chat corpus.
RESPONSES_ERROR_BODIES = {"openai-error.1.json", "reasoning-model-temperature-error.json"}
# `unknown` events that are right, with the reason.
EXPECTED_UNKNOWN = {
    # HAND-EDITED cassette (SOURCES.md): `status: complete` is no Response status (§6).
    "openai/pydantic-ai/test_openai_previous_response_id.yaml": ["response.status:complete"] * 2,
}
# `sequence_gap` errors that are right (the missing sequence numbers, in order), with the reason.
# Every other recording must have none: each response is numbered 0..N without a hole.
EXPECTED_SEQUENCE_GAPS = {
    # REAL but TRIMMED by vercel/ai: 17 of the response's ~130 events were kept, so
    # sequence_number jumps 5→41, 43→49 and 52→126. Those events really are missing from the
    # recording, so since adapter revision 2 each hole is reported once (the adapter waits for
    # the missing frames, and at the end of input translates what it held, in order). Apart from
    # these three errors the events are what they were: the same texts (output_text.done fills
    # in what the lost deltas carried), items, usage and run.finished.
    "openai/vercel-ai/openai-phase.1.chunks.txt": ["6..40", "44..48", "53..125"],
}
_GAP_NUMBERS = re.compile(r"sequence_number (\d+(?:\.\.\d+)?) never arrived")
_RESPONSES_PATH = re.compile(r"/responses(/[^/]+)?$")
CLIENT_ITEMS = {"function_call", "custom_tool_call", "apply_patch_call", "computer_call",
                "local_shell_call"}
# Provider tools the application runs (issue #12): item type → tool_name of their tool.call, whose
# arguments are the item's own request fields.
CLIENT_TOOLS = {"apply_patch_call": ("apply_patch", ("operation",)),
                "local_shell_call": ("local_shell", ("action",)),
                "computer_call": ("computer", ("action", "actions", "pending_safety_checks"))}


def _is_responses_stream_lines(path: Path) -> bool:
    return any(b'"type":"response.' in line for line in path.read_bytes().splitlines()[:3])


def _responses_interactions(path: Path) -> list:
    return [(n, i) for n, i in enumerate(read_cassette(path))
            if _RESPONSES_PATH.search(urlsplit(i.uri).path)]


def responses_corpus() -> list[Path]:
    out = []
    for path in corpus_files("openai"):
        if path.name.endswith(".chunks.txt") and _is_responses_stream_lines(path):
            out.append(path)
        elif path.name in RESPONSES_ERROR_BODIES:
            out.append(path)
        elif path.suffix == ".yaml" and _responses_interactions(path):
            out.append(path)
    return out


CORPUS = responses_corpus()


# --- reading the recordings: the adapter's input, and the raw documents for the checks -------


@dataclass
class Recording:
    frames: list[ProviderFrame] = field(default_factory=list)
    docs: list = field(default_factory=list)  # raw JSON documents in order; None = unparsable


def _sse_docs(body: bytes) -> list:
    docs = []
    for line in body.splitlines():
        if line.startswith(b"data:"):
            data = line[5:].strip()
            if data != b"[DONE]":
                docs.append(_loads(data))
    return docs


def _loads(data: bytes):
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def read_recording(path: Path) -> Recording:
    rec = Recording()
    common = dict(run_key=RUN, provider="openai", api="openai-responses")
    if path.suffix == ".yaml":
        for n, interaction in _responses_interactions(path):
            rec.frames += frames_from_bytes(interaction.body, stream_id=f"i{n}",
                                            http_status=interaction.status, **common)
            if interaction.content_type.startswith("text/event-stream"):
                rec.docs += _sse_docs(interaction.body)
            else:
                rec.docs.append(_loads(interaction.body))
        return rec
    body = path.read_bytes()
    rec.frames = frames_from_bytes(body, **common)
    if path.suffix == ".json":
        rec.docs = [_loads(body)]
    else:
        rec.docs = [_loads(line) for line in body.splitlines() if line.strip()]
    return rec


def normalize(frames: list[ProviderFrame]) -> list[ModelEvent]:
    return feed_all(OpenAIResponsesAdapter(RUN), frames)


# --- what the provider says, independently of the adapter -------------------------------------


@dataclass
class Response:
    """One provider call as the raw documents describe it."""
    texts_streamed: list[str] = field(default_factory=list)
    done_items: dict[str, dict] = field(default_factory=dict)  # output_item.done by item id
    final: dict | None = None  # the last Response object seen (event payload or poll)
    status: str | None = None


@dataclass
class Expected:
    responses: list[Response] = field(default_factory=list)
    http_error: dict | None = None
    malformed: int = 0
    gaps: list[str] = field(default_factory=list)  # holes in a response's sequence numbers

    def items(self, response: Response) -> list[dict]:
        """The response's final items: streamed .done items, then final-object items not seen."""
        items = list(response.done_items.values())
        final_output = (response.final or {}).get("output") or []
        if not items:
            return final_output
        return items + [i for i in final_output
                        if i.get("id") not in response.done_items and i.get("type") not in
                        {d.get("type") for d in items}]

    def texts(self) -> list[str]:
        out = []
        for response in self.responses:
            if response.texts_streamed:
                out += response.texts_streamed
                continue
            for item in self.items(response):
                if item.get("type") == "message":
                    out += [p["text"] for p in item.get("content") or []
                            if p.get("type") == "output_text"]
        return out

    def tool_calls(self) -> list[tuple[str, str, str]]:
        out = []
        for response in self.responses:
            for item in self.items(response):
                if item.get("type") in ("function_call", "custom_tool_call"):
                    arguments = item.get("arguments", item.get("input"))
                    out.append((item["name"], item.get("call_id"), arguments))
                elif item.get("type") in CLIENT_TOOLS:
                    name, fields = CLIENT_TOOLS[item["type"]]
                    request = {k: item[k] for k in fields if k in item}
                    out.append((name, item.get("call_id"), orjson.dumps(request).decode()))
        return out

    def citation_count(self) -> int:
        return sum(len(part.get("annotations") or [])
                   for response in self.responses for item in self.items(response)
                   if item.get("type") == "message" for part in item.get("content") or [])

    def usages(self) -> list[dict]:
        return [r.final["usage"] for r in self.responses
                if r.status in ("completed", "incomplete", "failed", "cancelled")
                and r.final and r.final.get("usage")]

    def ending(self) -> tuple[str, str | None]:
        """(kind of the last event, its status or reason)."""
        if self.http_error is not None:
            return "run.finished", "failed"
        last = self.responses[-1] if self.responses else None
        if last is None or last.status not in ("completed", "incomplete", "failed", "cancelled"):
            return "error", "stream_truncated"
        if last.status != "completed":
            return "run.finished", last.status
        items = self.items(last)
        approved = {i.get("approval_request_id") for i in items if i.get("type") == "mcp_call"}
        if any(i.get("type") == "mcp_approval_request" and i.get("id") not in approved
               for i in items):
            return "run.awaiting", "approval"
        if any(i.get("type") in CLIENT_ITEMS for i in items):
            return "run.awaiting", "tool_results"
        return "run.finished", "completed"


def expected_from(docs: list) -> Expected:
    expected = Expected()
    by_id: dict[str, Response] = {}
    current: Response | None = None
    next_seq = 0
    for doc in docs:
        if not isinstance(doc, dict):
            expected.malformed += 1
            continue
        kind = doc.get("type")
        seq = doc.get("sequence_number")
        if kind == "response.created":
            next_seq = 0  # every response is numbered from 0 (§1.1)
        if type(seq) is int:
            if seq > next_seq:
                expected.gaps.append(str(next_seq) if seq == next_seq + 1
                                     else f"{next_seq}..{seq - 1}")
            next_seq = max(next_seq, seq + 1)
        response_object = doc.get("response") if kind else doc
        if kind is None and isinstance(doc.get("error"), dict) and "output" not in doc:
            expected.http_error = doc["error"]
            continue
        if isinstance(response_object, dict) and (kind is None or "response" in doc):
            rid = response_object.get("id")
            if rid not in by_id:
                by_id[rid] = Response()
                expected.responses.append(by_id[rid])
            current = by_id[rid]
            current.final = response_object
            current.status = {"response.completed": "completed",
                              "response.incomplete": "incomplete",
                              "response.failed": "failed"}.get(kind, response_object.get("status"))
            continue
        if current is None:
            current = Response()
            expected.responses.append(current)
        if kind == "response.output_text.done":
            current.texts_streamed.append(doc["text"])
        elif kind == "response.output_item.done":
            item = doc["item"]
            current.done_items[item.get("id") or str(len(current.done_items))] = item
    return expected


# --- the checks -------------------------------------------------------------------------------


def _calls(events: list[ModelEvent]) -> list[list[ModelEvent]]:
    """Events split per provider call (at each run.started)."""
    calls: list[list[ModelEvent]] = [[]]
    for event in events:
        if event.kind == "run.started":
            calls.append([])
        calls[-1].append(event)
    return calls


def _snapshot_name(path: Path) -> Path:
    stem = corpus_id(path).removeprefix("openai/").replace("/", "__")
    stem = re.sub(r"(\.chunks\.txt|\.yaml|\.json)$", "", stem)
    return CONFORMANCE_SNAPSHOTS / "openai-responses" / (re.sub(r"[^A-Za-z0-9._-]", "_", stem) + ".jsonl")


@pytest.mark.parametrize("path", CORPUS, ids=corpus_id)
def test_corpus_file_translates_faithfully(path: Path):
    require_corpus()
    recording = read_recording(path)
    events = normalize(recording.frames)
    expected = expected_from(recording.docs)
    payloads = lambda kind: [e.payload for e in events if e.kind == kind]  # noqa: E731

    # Final texts, and the deltas of every text part reassemble to its final text.
    assert [p.text for p in payloads("text.done")] == expected.texts()
    for call in _calls(events):
        streamed: dict[tuple, str] = {}
        for e in call:
            if e.kind == "text.delta":
                key = (e.payload.output_index, e.payload.part_index)
                streamed[key] = streamed.get(key, "") + e.payload.text
        for e in call:
            if e.kind == "text.done":
                key = (e.payload.output_index, e.payload.part_index)
                assert streamed.get(key, "") == e.payload.text

    # Tool calls: names, ids, whole arguments (Azure's `parallel` wrapper is expanded and
    # checked on its own below).
    calls = payloads("tool.call")
    if not any(name == "parallel" for name, _, _ in expected.tool_calls()):
        assert [(c.tool_name, c.tool_call_id, c.arguments) for c in calls] == \
            expected.tool_calls()
    for call in calls:
        assert call.tool_name and call.tool_call_id
        fragments = [d.arguments for d in payloads("tool.call.delta")
                     if d.tool_call_id == call.tool_call_id]
        if fragments:
            assert "".join(fragments) == call.arguments

    assert len(payloads("citation")) == expected.citation_count()

    usages = [(u["input_tokens"], u["output_tokens"],
               (u.get("input_tokens_details") or {}).get("cached_tokens"),
               (u.get("output_tokens_details") or {}).get("reasoning_tokens"), u["total_tokens"])
              for u in expected.usages()]
    assert [(u.input_tokens, u.output_tokens, u.cache_read_tokens, u.reasoning_tokens,
             u.total_tokens) for u in payloads("usage")] == usages

    kind, detail = expected.ending()
    last = events[-1]
    assert last.kind == kind
    if kind == "run.finished":
        assert last.payload.status == detail
    elif kind == "run.awaiting":
        assert last.payload.reason == detail
    else:
        assert last.payload.error_type == detail
    terminal_kinds = ("run.finished", "run.awaiting")
    assert sum(e.kind in terminal_kinds for e in events) == sum(
        r.status in ("completed", "incomplete", "failed", "cancelled")
        for r in expected.responses) + (expected.http_error is not None)

    assert [e.payload.provider_type for e in events if e.kind == "unknown"] == \
        EXPECTED_UNKNOWN.get(corpus_id(path), [])
    assert len([e for e in payloads("error") if e.error_type == "malformed_frame"]) == \
        expected.malformed
    gaps = [e for e in payloads("error") if e.error_type == "sequence_gap"]
    assert [_GAP_NUMBERS.search(e.message).group(1) for e in gaps] == expected.gaps == \
        EXPECTED_SEQUENCE_GAPS.get(corpus_id(path), [])
    assert not any(e.retryable for e in gaps)
    assert len({e.event_id for e in events}) == len(events)

    assert_matches_snapshot(_snapshot_name(path), events)


# --- facts of particular recordings, asserted beside their snapshots -------------------------


def _events(relative: str) -> list[ModelEvent]:
    require_corpus()
    return normalize(read_recording(CORPUS_DIR / "openai" / relative).frames)


def _of(events: list[ModelEvent], kind: str) -> list:
    return [e.payload for e in events if e.kind == kind]


def test_four_concatenated_responses_are_four_calls_of_one_run():
    events = _events("vercel-ai/openai-reasoning-encrypted-content.1.chunks.txt")
    assert [e.kind for e in events if e.kind.startswith("run.")] == [
        "run.started", "run.awaiting", "run.started", "run.awaiting", "run.started",
        "run.awaiting", "run.started", "run.finished"]
    assert [u.input_tokens for u in _of(events, "usage")] == [134, 221, 260, 299]
    (encrypted,) = [r for r in _of(events, "reasoning.done") if r.form == "redacted"]
    assert encrypted.valid_for == "openai/gpt-5.1-codex-max"
    assert encrypted.encrypted_content.startswith("gAAAAABpPDIVOKrs")  # the .done blob


def test_encrypted_reasoning_comes_from_the_done_item_not_the_added_one():
    events = _events("pydantic-ai/test_openai_responses_streaming_usage.yaml")
    (encrypted,) = [r for r in _of(events, "reasoning.done") if r.form == "redacted"]
    assert encrypted.encrypted_content.startswith("gAAAAABoyXvxI6jw")


def test_mcp_approval_request_awaits_approval_then_the_approved_call_runs():
    first = _events("vercel-ai/openai-mcp-tool-approval.1.chunks.txt")
    (request,) = _of(first, "approval.requested")
    assert (request.tool_name, request.server) == ("create_short_url", "zip1")
    assert (first[-1].kind, first[-1].payload.reason) == ("run.awaiting", "approval")
    after = _events("vercel-ai/openai-mcp-tool-approval.4.chunks.txt")
    (resolved,) = _of(after, "approval.resolved")
    assert resolved.decision == "approved"
    results = [h for h in _of(after, "hosted.result") if h.name == "create_short_url"]
    assert results and results[0].authority == "mcp:zip1" and "zip1.io" in results[0].evidence
    assert not _of(after, "tool.call")


def test_image_generation_partial_then_final_media():
    events = _events("vercel-ai/openai-image-generation-tool.1.chunks.txt")
    media = _of(events, "media.done")
    assert [(m.partial, m.mime_type) for m in media] == [(True, "image/webp"),
                                                         (False, "image/webp")]
    assert media[1].data[:4] == b"RIFF"
    (result,) = _of(events, "hosted.result")
    assert (result.tool_type, result.quantity) == ("image_generation", 1)
    assert "revised_prompt" in result.evidence and "result" not in orjson.loads(result.evidence)


def test_hosted_shell_reports_commands_and_stdout():
    events = _events("vercel-ai/openai-shell-skills.1.chunks.txt")
    results = _of(events, "hosted.result")
    assert [r.tool_type for r in results] == ["shell", "shell"]
    assert orjson.loads(results[0].arguments)["action"]["commands"][0].startswith("ls -R")
    assert orjson.loads(results[0].evidence)["output"][0]["outcome"]["exit_code"] == 0


def test_apply_patch_is_a_tool_call_the_application_runs_with_the_whole_diff():
    events = _events("vercel-ai/openai-apply-patch-tool.1.chunks.txt")
    (call,) = _of(events, "tool.call")
    assert (call.tool_name, call.tool_call_id) == ("apply_patch", "call_kA46f91ZwocQyMCKyyZqRyC5")
    assert orjson.loads(call.arguments)["operation"]["diff"].startswith("+## Shopping Checklist")
    assert not _of(events, "hosted.call")  # hosted.* is for what the provider runs
    assert events[-1].payload.reason == "tool_results"


def test_azure_parallel_wrapper_is_expanded_into_its_calls():
    events = _events("vercel-ai/parallel-tool-call-wrapper.1.chunks.txt")
    calls = _of(events, "tool.call")
    assert [(c.tool_name, c.arguments) for c in calls] == [
        ("weather", '{"location":"San Francisco"}'), ("cityAttractions", '{"city":"Rome"}')]
    assert len({c.tool_call_id for c in calls}) == 2


def test_file_and_url_citations_keep_their_positions():
    events = _events("vercel-ai/openai-file-search-tool.1.chunks.txt")
    assert [(c.source_type, c.start, c.title) for c in _of(events, "citation")] == [
        ("file", 154, "ai.pdf"), ("file", 382, "ai.pdf")]
    assert _of(events, "usage")[0].server_tool_units == {"file_search": 1}
    web = _events("pydantic-ai/test_openai_include_raw_annotations_streaming.yaml")
    first = _of(web, "citation")[0]
    assert (first.source_type, first.start, first.end) == ("url", 77, 162)
    assert first.url.startswith("https://www.britannica.com/")


def test_background_stream_then_get_of_the_same_response_adds_nothing():
    events = _events("pydantic-ai/test_background_mode_streaming_continuation_vcr.yaml")
    assert [e.kind for e in events if e.kind.startswith("run.")] == [
        "run.started", "run.status", "run.finished"]
    assert len(_of(events, "text.done")) == 1 and len(_of(events, "usage")) == 1


def test_openrouter_done_sentinel_and_renamed_items_are_harmless():
    events = _events("pydantic-ai/test_openai_responses_raw_cot_stream_openrouter.yaml")
    assert not _of(events, "error")
    assert [r.form for r in _of(events, "reasoning.done")] == ["raw"]


def test_corpus_selection_covers_every_responses_recording():
    require_corpus()
    names = {p.name for p in CORPUS}
    assert {"azure-tool-call.1.chunks.txt", "lmstudio-tool-call.1.chunks.txt",
            "openai-error.1.json", "test_background_mode_vcr.yaml"} <= names
    assert not {"openai-text.chunks.txt", "xai-tool-call.chunks.txt",
                "test_run_stream_sync_streams_real_model.yaml"} & names
