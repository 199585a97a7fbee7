"""Claude Messages API (``POST /v1/messages``, ``anthropic-version: 2023-06-01``, incl. the beta
blocks of the SDK at 009b0353) → ModelEvents.

Follows the Claude Streaming Messages guide and the Messages API reference: event sequence and
index semantics, delta types, content blocks, stop reasons, usage. One adapter instance follows
one run, which may span several provider calls (a tool loop): every ``message_start`` opens a
provider message (``run.started``), every ``message_stop`` closes it with ``run.awaiting`` or
``run.finished``.

More on this module: docs/adapters.md, ``adapters/anthropic_messages.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from modelevents.adapters.accumulate import Parts
from modelevents.adapters.api_facts import ApiFacts, key_header_auth
from modelevents.adapters.base import Adapter, json_text, stable_id
from modelevents.adapters.provider_errors import classify_error
from modelevents.adapters.requests.anthropic_messages import ANTHROPIC_VERSION
from modelevents.schemas.events import (
    Citation,
    Error,
    Hosted,
    Message,
    Reasoning,
    Refusal,
    RunAwaiting,
    RunFinished,
    RunStarted,
    RunStatus,
    Text,
    ToolCall,
    Usage,
)
from modelevents.schemas.vocabulary import (
    AwaitingReason,
    FinishReason,
    HostedToolType,
    ReasoningForm,
    SourceType,
    TerminalStatus,
)

# --- mappings (check against the reference in one glance) --------------------------------------

# stop_reason -> (status, normalized reason) of run.finished (Messages API reference).
STOP_REASONS: dict[str, tuple[TerminalStatus, FinishReason]] = {
    "end_turn": ("completed", "end_turn"),
    "stop_sequence": ("completed", "stop_sequence"),
    "max_tokens": ("incomplete", "max_tokens"),
    "model_context_window_exceeded": ("incomplete", "context_window_exceeded"),
    # Streaming classifiers intervened: the answer was withheld or cut short, so not "completed"
    # (the same outcome OpenAI reports as incomplete/content_filter). stop_details → `refusal`.
    "refusal": ("incomplete", "refusal"),
}
# stop_reason -> the reason of run.awaiting: the turn ended, the run did not (Messages API
# reference).
STOP_AWAITING: dict[str, AwaitingReason] = {
    "tool_use": "tool_results",
    # "send the response back as-is to continue" — the turn is not over (SDK types/message.py).
    "pause_turn": "continuation",
    # Beta compaction with pause_after_compaction: stops after the compaction block, continues on
    # the next request.
    "compaction": "continuation",
}

# server_tool_use name -> (tool_type, billable unit as counted in usage.server_tool_use) (Messages
# API reference). Code execution is billed by container time, not per call: no per-call unit.
SERVER_TOOLS: dict[str, tuple[HostedToolType, str | None]] = {
    "web_search": ("web_search", "web_search_requests"),
    "web_fetch": ("web_fetch", "web_fetch_requests"),
    "code_execution": ("code_execution", None),
    "bash_code_execution": ("code_execution", None),
    "text_editor_code_execution": ("code_execution", None),
    "tool_search_tool_regex": ("tool_search", None),
    "tool_search_tool_bm25": ("tool_search", None),
    "advisor": ("advisor", None),
}

# citation location type -> neutral source type (Claude streaming guide).
CITATION_SOURCES: dict[str | None, SourceType] = {
    "char_location": "document",
    "page_location": "document",
    "content_block_location": "document",
    "web_search_result_location": "url",
    "search_result_location": "search_result",
}

# Claude 3.7 Sonnet streams its full thinking; Claude 4 and later stream a summary of it (docs
# "Extended thinking: differences in thinking across model versions"). Matched as a substring so
# Bedrock/Vertex ids ("anthropic.claude-3-7-sonnet-…", "claude-3-7-sonnet@…") match too.
RAW_THINKING_MODEL_MARK = "claude-3"


# --- hosted tool evidence (what the provider did, without the opaque blobs) ---------------------


def _error_evidence(content: dict[str, Any]) -> dict[str, Any]:
    evidence = {"error_code": content.get("error_code")}
    if content.get("error_message"):
        evidence["error_message"] = content["error_message"]
    return evidence


def _search_evidence(content: Any) -> dict[str, Any]:
    # Each result's encrypted_content is opaque (kept in the envelope); the sources are the fact.
    return {"sources": [
        {"url": r.get("url"), "title": r.get("title"), "page_age": r.get("page_age")}
        for r in content if isinstance(r, dict)]}


def _fetch_evidence(content: dict[str, Any]) -> dict[str, Any]:
    document = content.get("content") or {}
    source = document.get("source") or {}
    return {"url": content.get("url"), "retrieved_at": content.get("retrieved_at"),
            "title": document.get("title"), "media_type": source.get("media_type")}


def _execution_evidence(content: dict[str, Any]) -> dict[str, Any]:
    return {"stdout": content.get("stdout"), "stderr": content.get("stderr"),
            "return_code": content.get("return_code"),
            "files": [f.get("file_id") for f in content.get("content") or ()
                      if isinstance(f, dict)]}


def _tool_search_evidence(content: dict[str, Any]) -> dict[str, Any]:
    return {"tool_references": [r.get("tool_name") for r in content.get("tool_references") or ()
                                if isinstance(r, dict)]}


def _as_is_evidence(content: Any) -> Any:
    if isinstance(content, dict) and "encrypted_content" in content:
        # Advisor's redacted result: the advice itself is opaque, and its encrypted_content is
        # the evidence (it goes back to the provider as is): kept, marked redacted.
        return content | {"redacted": True}
    return content


def _mcp_evidence(content: Any) -> Any:
    return {"content": content}


# result block type -> (tool_type when the call was not seen, evidence of a success) (Messages API
# reference).
HOSTED_RESULTS: dict[str, tuple[HostedToolType, Callable[[Any], Any]]] = {
    "web_search_tool_result": ("web_search", _search_evidence),
    "web_fetch_tool_result": ("web_fetch", _fetch_evidence),
    "code_execution_tool_result": ("code_execution", _execution_evidence),
    "bash_code_execution_tool_result": ("code_execution", _execution_evidence),
    "text_editor_code_execution_tool_result": ("code_execution", _as_is_evidence),
    "tool_search_tool_result": ("tool_search", _tool_search_evidence),
    "advisor_tool_result": ("advisor", _as_is_evidence),
    "mcp_tool_result": ("mcp", _mcp_evidence),
}



def _count(value: Any) -> int | None:
    """A token count as the provider gave it: an int (never a bool), else unknown."""
    return value if type(value) is int else None


def _text(value: Any) -> str | None:
    return value if type(value) is str else None


# --- per-stream state --------------------------------------------------------------------------


class _Block:
    """One open content block, keyed by the provider's index."""

    __slots__ = ("kind", "index", "parts", "name", "call_id", "start_input", "signature",
                 "hosted")

    def __init__(self, kind: str, index: int) -> None:
        # text | thinking | tool_use | server_tool_use | mcp_tool_use | compaction, or "done"
        # (translated whole at its start) | "opaque" (a block type this revision does not know)
        self.kind = kind
        self.index = index
        self.parts = Parts()  # text / thinking / partial_json fragments / compaction summary
        self.name: str | None = None
        self.call_id: str | None = None
        self.start_input: Any = None
        self.signature: str | None = None  # thinking signature; compaction encrypted_content
        # (tool_type, authority, unit)
        self.hosted: tuple[HostedToolType, str, str | None] | None = None


class AnthropicMessagesAdapter(Adapter):
    name = "anthropic_messages"
    # What each revision's events differ in: 2, usage summed over iterations; advisor evidence;
    # recommended_model. 3, the closed vocabulary — an unknown server tool, result block or citation
    # location is "other".
    revision = "3"
    api = "anthropic-messages"
    default_provider = "anthropic"

    def __init__(self, run_id: str, tenant: str = "default", provider: str | None = None,
                 model: str | None = None) -> None:
        Adapter.__init__(self, run_id, tenant, provider, model)  # no super() object per stream
        self._messages = 0  # provider messages started in this run
        self._message_id: str | None = None
        self._message_open = False
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, Any] = {}
        self._stop_reason: str | None = None
        # Hosted calls of the whole run by id: a code_execution call may get its result in a later
        # message (programmatic tool calling, vercel-ai/anthropic-programmatic-tool-calling).
        self._hosted_calls: dict[str, tuple[str | None, HostedToolType, str, str | None,
                                            str | None]] = {}

    @classmethod
    def recognizes(cls, doc: Any) -> bool:
        if not isinstance(doc, dict):
            return False
        kind = doc.get("type")
        if type(kind) is not str:  # a list or object is no event's name (nor hashable)
            return False
        if kind in _ON_EVENT and kind not in ("message", "error", "ping"):
            return True
        if kind == "message":
            return "stop_reason" in doc and isinstance(doc.get("content"), list)
        if kind == "error":
            # OpenAI Responses' stream error has no nested error object / has a sequence number.
            return isinstance(doc.get("error"), dict) and "sequence_number" not in doc
        return False

    # --- dispatch ---------------------------------------------------------------------------------

    def handle(self, doc: Any) -> None:
        if type(doc) is not dict:
            self.malformed(f"body is JSON {type(doc).__name__}, not an object")
            return
        event_type = doc.get("type") or self.frame.sse_event
        if event_type == "content_block_delta":
            # Most frames of most streams are a text delta: straight to _text_delta, without
            # the dispatch and _on_block_delta's call (a lookup and a call less); the rest goes there.
            try:
                delta = doc["delta"]
                block = self._blocks.get(doc["index"])
                if delta["type"] == "text_delta" and block is not None and block.kind == "text":
                    self._text_delta(block, delta, "text_delta.text")
                else:
                    self._on_block_delta(doc)
            except _SHAPE_ERRORS as exc:
                self._lacks_field(event_type, exc)
            return
        try:
            handler = _ON_EVENT.get(event_type)
        except TypeError:  # a list or object as the type: unhashable, and no event's name
            handler = None
        if handler is None:
            self.unknown(str(event_type), "event type not in the Messages stream reference")
            return
        try:
            handler(self, doc)
        except _SHAPE_ERRORS as exc:
            self._lacks_field(event_type, exc)

    def _lacks_field(self, event_type: Any, exc: Exception) -> None:
        # A frame of a known type without the fields the protocol promises: report, go on.
        self.malformed(f"{event_type} lacks or mistypes a required field ({exc!r})")

    def finish(self) -> None:
        # Input ended. Blocks still open were cut by the transport, not by the provider: their
        # partial tool input must never become an executable tool.call, so nothing is flushed; the
        # base reports stream_truncated and the deltas already emitted keep the partial output.
        self._blocks.clear()

    # --- message lifecycle ------------------------------------------------------------------------

    def _on_message_start(self, doc: dict[str, Any]) -> None:
        message = doc["message"]
        if not self._begin_message(message):
            return
        if isinstance(message.get("usage"), dict):
            self._apply_usage(message["usage"])  # provisional for a stream (Claude streaming guide)
        self._message_content(message)

    def _message_content(self, message: dict[str, Any]) -> None:
        # Programmatic tool calling: a message_start may already hold its whole content and stop
        # reason, followed directly by message_stop (Claude Tool use guide).
        for index, block in enumerate(message.get("content") or ()):
            self._open_block(index, block)
            self._close_block(index)
        if message.get("stop_reason") is not None:
            self._apply_stop(message)

    def _begin_message(self, message: dict[str, Any]) -> bool:
        """Open a provider message; False when it is a duplicate of the open one."""
        message_id = message.get("id")
        if self._message_open:
            if message_id == self._message_id:
                # Duplicate message_start for the open message (Vercel keeps a fixture for it).
                return False
            open_blocks = sorted(self._blocks)
            self.emit("error", Error(
                error_type="message_interrupted", retryable=False,
                message=f"message {message_id} started while message {self._message_id} was "
                        f"still open (no message_stop); its open blocks {open_blocks} are "
                        "abandoned, never turned into tool calls"))
        self._message_open = True
        self.stream_complete = False
        self._message_id = message_id
        self._blocks = {}
        self._usage = {}
        self._stop_reason = None
        if message.get("model"):
            self.model = message["model"]
        # Every message is a provider call; the second and later ones of a run (after tool
        # results or a continuation) resume it, and the run machine banks the previous call's
        # usage on this event (services/run_machine.py).
        self.emit("run.started", RunStarted("in_progress", message_id))
        self.emit("message.started", Message(self._messages, "assistant", message_id))
        self._messages += 1
        return True

    def _on_message_delta(self, doc: dict[str, Any]) -> None:
        # A max_tokens cut can skip content_block_stop (anthropic-sdk-python
        # incomplete_partial_json_response.txt): the provider's last word on those blocks is here.
        self._close_open_blocks()
        if isinstance(doc.get("usage"), dict):
            self._apply_usage(doc["usage"])
        self._apply_stop(doc["delta"])

    def _on_message_stop(self, doc: dict[str, Any]) -> None:
        if not self._message_open and self._messages:
            return  # a second stop for a message already finished: nothing new to say
        self._close_open_blocks()
        self._end_message()

    def _end_message(self) -> None:
        self._message_open = False
        self.stream_complete = True
        self.emit("message.finished", Message(max(self._messages - 1, 0), "assistant",
                                              self._message_id))
        raw = self._stop_reason
        awaiting = STOP_AWAITING.get(raw) if raw is not None else None
        outcome = STOP_REASONS.get(raw) if raw is not None else None
        if awaiting is not None:
            self.emit("run.awaiting", RunAwaiting(awaiting, raw))
        elif outcome is None:
            # No stop reason, or one this revision does not know: the message ended, but whether
            # the run succeeded is unknown — fail safe, never "completed".
            if raw is not None:
                self.unknown(f"stop_reason:{raw}", "stop_reason not in the reference")
            self.emit("run.finished", RunFinished("incomplete", "unknown", raw))
        else:
            self.emit("run.finished", RunFinished(*outcome, raw))

    def _apply_stop(self, delta: dict[str, Any]) -> None:
        raw = delta.get("stop_reason")
        if raw is None:
            return
        repeated = raw == self._stop_reason  # "one or more" message_delta (Claude streaming guide)
        self._stop_reason = raw
        if raw == "refusal" and not repeated:
            details = delta.get("stop_details")
            details = details if isinstance(details, dict) else {}
            explanation = _text(details.get("explanation"))
            recommended = _text(details.get("recommended_model"))
            said = explanation
            if recommended:
                # The model the provider suggests for this request: the Refusal record has no
                # field of its own for it, so the explanation says it, after the provider's words.
                said = f"{explanation} " if explanation else ""
                said += f"(recommended model: {recommended})"
            self.emit("refusal", Refusal(text=explanation or "",
                                         category=_text(details.get("category")),
                                         explanation=said))

    def _apply_usage(self, usage: dict[str, Any]) -> None:
        merged = self._usage
        merged.update(usage)  # message_delta values replace, field by field (streaming guide)
        fresh = _count(merged.get("input_tokens"))
        cache_write = _count(merged.get("cache_creation_input_tokens"))
        cache_read = _count(merged.get("cache_read_input_tokens"))
        output = _count(merged.get("output_tokens"))
        breakdown = self._iterations(merged)
        if breakdown is not None:
            # Server-side compaction (and model fallback) bills one call as several iterations;
            # the top-level numbers are the last one's. What is billed is their sum, per token kind (vercel/ai and
            # pydantic-ai sum them too); each iteration is kept beside it.
            fresh, cache_write, cache_read, output = (
                sum(i[k] or 0 for i in breakdown) for k in
                ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                 "output_tokens"))
        total_input = None if fresh is None else fresh + (cache_write or 0) + (cache_read or 0)
        details = merged.get("output_tokens_details")
        details = details if isinstance(details, dict) else {}
        server_tools = merged.get("server_tool_use")
        server_tools = server_tools if isinstance(server_tools, dict) else {}
        self.emit("usage", Usage(
            input_tokens=total_input, output_tokens=output,
            cache_read_tokens=cache_read, cache_write_tokens=cache_write,
            reasoning_tokens=_count(details.get("thinking_tokens")),
            total_tokens=None if total_input is None or output is None else total_input + output,
            server_tool_units={k: v for k, v in server_tools.items() if type(v) is int},
            iterations=None if breakdown is None else json_text([
                {"type": i["type"], **({"model": i["model"]} if i["model"] else {}),
                 "input_tokens": (i["input_tokens"] or 0) + (i["cache_creation_input_tokens"] or 0)
                 + (i["cache_read_input_tokens"] or 0),
                 "output_tokens": i["output_tokens"],
                 "cache_read_tokens": i["cache_read_input_tokens"],
                 "cache_write_tokens": i["cache_creation_input_tokens"]} for i in breakdown])))

    def _iterations(self, usage: dict[str, Any]) -> list[dict[str, Any]] | None:
        """usage.iterations[] (server-side compaction), each iteration's counts read; None when
        there is none, or when it is not what the reference shows (reported once, and the
        top-level counts are used)."""
        iterations = usage.get("iterations")
        if iterations is None:
            return None
        if type(iterations) is not list or not iterations or \
                not all(type(i) is dict for i in iterations):
            usage.pop("iterations")  # said once; later usage snapshots use the top level
            self.malformed(f"usage.iterations is not a list of objects "
                           f"({type(iterations).__name__}); the top-level usage is reported")
            return None
        return [{"type": _text(i.get("type")) or "unknown", "model": _text(i.get("model")),
                 **{k: _count(i.get(k)) for k in ("input_tokens", "cache_creation_input_tokens",
                                                  "cache_read_input_tokens", "output_tokens")}}
                for i in iterations]

    def _on_message(self, doc: dict[str, Any]) -> None:
        """A complete, non-streaming Message object: the whole sequence at once, in stream order."""
        if not self._begin_message(doc):
            return
        self._message_content(doc)
        if isinstance(doc.get("usage"), dict):
            self._apply_usage(doc["usage"])
        self._end_message()

    def _on_error(self, doc: dict[str, Any]) -> None:
        # Mid-stream `event: error` (no message_stop follows) or an HTTP error body (Claude
        # streaming guide).
        error = doc.get("error")
        error = error if type(error) is dict else {}
        raw = error.get("type") if type(error.get("type")) is str and error.get("type") else "error"
        http_status = self.frame.http_status
        error_type, retryable = classify_error(raw, http_status=http_status)
        self._blocks.clear()  # what was open stays partial: no tool.call from a failed message
        self._message_open = False
        message = str(error.get("message") or "")
        request_id = doc.get("request_id")
        if type(request_id) is str and request_id:
            message = f"{message} (request {request_id})" if message else f"request {request_id}"
        self.emit("error", Error(error_type=error_type, message=message, code=raw,
                                 http_status=http_status, retryable=retryable))
        self.emit("run.finished", RunFinished("failed", "error", raw))
        self.stream_complete = True  # the provider told us the outcome

    def _on_ping(self, doc: dict[str, Any]) -> None:
        """Keep-alive, may appear anywhere (Claude streaming guide): deliberately nothing."""

    # --- content blocks ---------------------------------------------------------------------------

    def _on_block_start(self, doc: dict[str, Any]) -> None:
        self._open_block(doc["index"], doc["content_block"])

    def _on_block_stop(self, doc: dict[str, Any]) -> None:
        index = doc["index"]
        if index not in self._blocks:
            self._orphan("content_block_stop", index)
            return
        self._close_block(index)

    def _on_block_delta(self, doc: dict[str, Any]) -> None:
        # A text delta of an open text block is translated in handle (the hot path).
        delta = doc["delta"]
        block = self._blocks.get(doc["index"])
        if block is None:
            self._orphan("content_block_delta", doc["index"])
            return
        entry = _ON_DELTA.get(delta["type"])
        if entry is None or block.kind == "opaque":
            self.unknown(f"content_block_delta:{delta['type']}",
                         "delta of a block type not in the reference" if block.kind == "opaque"
                         else "delta type not in the reference")
            return
        handler, block_kinds = entry
        if block.kind not in block_kinds:
            self.emit("error", Error(
                error_type="protocol_violation", retryable=False,
                message=f"{delta['type']} for index {block.index}, a {block.kind} block "
                        f"(frame {self.frame.frame_id}); ignored"))
            return
        handler(self, block, delta)

    def _open_block(self, index: int, block_doc: dict[str, Any]) -> None:
        if index in self._blocks:
            # The provider reused an index without stopping the block: finish the old one first.
            self._close_block(index)
        block_type = block_doc["type"]
        opener = _ON_BLOCK.get(block_type)
        if opener is None and block_type in HOSTED_RESULTS:
            opener = AnthropicMessagesAdapter._start_hosted_result
        elif opener is None and block_type.endswith("_tool_result") and "tool_use_id" in block_doc:
            # A newer server tool's result: still provider-executed, keep it as hosted evidence.
            opener = AnthropicMessagesAdapter._start_hosted_result
        if opener is None:
            self.unknown(f"content_block:{block_type}", "content block type not in the reference")
            self._blocks[index] = _Block("opaque", index)
            return
        opener(self, index, block_doc)

    def _close_open_blocks(self) -> None:
        for index in sorted(self._blocks):
            self._close_block(index)

    def _close_block(self, index: int) -> None:
        block = self._blocks.pop(index)
        closer = _ON_BLOCK_CLOSE.get(block.kind)
        if closer is not None:
            closer(self, block)

    # text

    def _start_text(self, index: int, block_doc: dict[str, Any]) -> None:
        block = self._blocks[index] = _Block("text", index)
        if block_doc.get("text"):  # complete Message objects carry the text in the block
            self._text_delta(block, block_doc)
        for citation in block_doc.get("citations") or ():
            self._citation(block, citation)

    def _text_delta(self, block: _Block, delta: dict[str, Any], field: str = "text") -> None:
        text = delta["text"]
        if type(text) is not str:
            raise TypeError(f"{field} is {type(text).__name__}, not a string")
        if text:
            block.parts.add(text)
            self.emit("text.delta", Text(block.index, 0, text, self._message_id))

    def _citations_delta(self, block: _Block, delta: dict[str, Any]) -> None:
        self._citation(block, delta["citation"])

    def _citation(self, block: _Block, citation: dict[str, Any]) -> None:
        # Anthropic cites a whole text block (Claude streaming guide: each cited span is its own
        # block), so the text location is output_index; the char indexes in the citation point into
        # the *source* document and stay in the envelope.
        location = citation.get("type")
        self.emit("citation", Citation(
            output_index=block.index, part_index=0,
            # A location type this revision does not name: the fallback (the envelope has it).
            source_type=CITATION_SOURCES.get(location, "other"),
            url=citation.get("url") or citation.get("source"),
            file_id=citation.get("file_id"),
            title=citation.get("title") or citation.get("document_title"),
            cited_text=citation.get("cited_text")))

    def _end_text(self, block: _Block) -> None:
        self.emit("text.done", Text(block.index, 0, block.parts.text(), self._message_id))
        self.elide_last(block.parts, "text", "text.delta")

    # thinking

    def _reasoning_form(self) -> ReasoningForm:
        return "raw" if self.model and RAW_THINKING_MODEL_MARK in self.model else "summary"

    def _start_thinking(self, index: int, block_doc: dict[str, Any]) -> None:
        block = self._blocks[index] = _Block("thinking", index)
        if block_doc.get("thinking"):
            self._thinking_delta(block, block_doc)
        block.signature = block_doc.get("signature") or None

    def _thinking_delta(self, block: _Block, delta: dict[str, Any]) -> None:
        text = delta["thinking"]
        if text:  # an empty thinking_delta precedes the signature (Claude streaming guide)
            block.parts.add(text)
            self.emit("reasoning.delta", Reasoning(block.index, 0, self._reasoning_form(), text,
                                                   self._message_id))

    def _signature_delta(self, block: _Block, delta: dict[str, Any]) -> None:
        block.signature = (block.signature or "") + delta["signature"]

    def _end_thinking(self, block: _Block) -> None:
        self.emit("reasoning.done", Reasoning(
            block.index, 0, self._reasoning_form(), block.parts.text(), self._message_id,
            block.signature, None, self.valid_for()))  # signature, no encrypted_content
        self.elide_last(block.parts, "text", "reasoning.delta")

    def _start_redacted_thinking(self, index: int, block_doc: dict[str, Any]) -> None:
        # Arrives whole, no deltas (Messages API reference); the data must go back unchanged, to
        # this model only.
        self.emit("reasoning.done", Reasoning(
            index, 0, "redacted", "", self._message_id, encrypted_content=block_doc["data"],
            valid_for=self.valid_for()))
        self._blocks[index] = _Block("done", index)

    # client tools

    def _start_tool_use(self, index: int, block_doc: dict[str, Any]) -> None:
        block = self._blocks[index] = _Block("tool_use", index)
        name = block.name = block_doc["name"]
        call_id = block.call_id = block_doc.get("id") or stable_id(
            self.run_id, self._message_id, index, name)
        block.start_input = block_doc.get("input")
        self.emit("tool.call.started", ToolCall(index, name, call_id, "", self._message_id))

    def _input_json_delta(self, block: _Block, delta: dict[str, Any]) -> None:
        fragment = delta["partial_json"]
        if not fragment:  # the first fragment is often "" (Claude streaming guide)
            return
        block.parts.add(fragment)
        if block.kind == "tool_use" and block.name is not None and block.call_id is not None:
            self.emit("tool.call.delta", ToolCall(block.index, block.name, block.call_id,
                                                  fragment, self._message_id))

    def _arguments(self, block: _Block) -> str:
        # Deltas are the input; without any (no-arg tools stream only "", or the block arrived
        # whole in message_start) the start block's input is the whole input — "{}" at least.
        if block.parts:
            return block.parts.text()
        return json_text(block.start_input if block.start_input is not None else {})

    def _end_tool_use(self, block: _Block) -> None:
        assert block.name is not None and block.call_id is not None  # set by _start_tool_use
        # `caller` (direct / code_execution_20250825) has no field yet: it stays in the envelope.
        self.emit_tool_call(block.index, block.name, block.call_id,
                            block.parts if block.parts else self._arguments(block),
                            self._message_id)

    # hosted (provider-executed) tools

    def _start_server_tool_use(self, index: int, block_doc: dict[str, Any]) -> None:
        block = self._blocks[index] = _Block("server_tool_use", index)
        block.name = block_doc["name"]
        block.call_id = block_doc.get("id") or stable_id(self.run_id, self._message_id, index,
                                                         block.name)
        block.start_input = block_doc.get("input")
        # A tool this revision does not name: the fallback type, its name in Hosted.name.
        tool_type, unit = SERVER_TOOLS.get(block.name, ("other", None))
        block.hosted = (tool_type, "provider", unit)

    def _start_mcp_tool_use(self, index: int, block_doc: dict[str, Any]) -> None:
        block = self._blocks[index] = _Block("mcp_tool_use", index)
        block.name = block_doc["name"]
        block.call_id = block_doc.get("id") or stable_id(self.run_id, self._message_id, index,
                                                         block.name)
        block.start_input = block_doc.get("input")
        block.hosted = ("mcp", f"mcp:{block_doc.get('server_name')}", None)

    def _end_hosted_call(self, block: _Block) -> None:
        # Both set when the block started (_start_server_tool_use, _start_mcp_tool_use).
        assert block.hosted is not None and block.call_id is not None
        tool_type, authority, unit = block.hosted
        arguments = self._arguments(block)
        self.too_large_to_hold(block.parts, f"the input of hosted tool call {block.call_id}")
        self._hosted_calls[block.call_id] = (block.name, tool_type, authority, unit, arguments)
        self.emit("hosted.call", Hosted(
            output_index=block.index, call_id=block.call_id, tool_type=tool_type,
            authority=authority, name=block.name, status="in_progress", billable_unit=unit,
            arguments=arguments))

    def _start_hosted_result(self, index: int, block_doc: dict[str, Any]) -> None:
        block_type = block_doc["type"]
        call_id = block_doc["tool_use_id"]
        # A result type this revision does not name: the fallback type, the raw type as name.
        fallback_type, evidence_of = HOSTED_RESULTS.get(block_type, ("other", _as_is_evidence))
        name, tool_type, authority, unit, arguments = self._hosted_calls.get(
            call_id, (block_type if fallback_type == "other" else None, fallback_type,
                      "provider", None, None))
        content = block_doc.get("content")
        if block_type == "mcp_tool_result":
            is_error = bool(block_doc.get("is_error"))
        else:
            is_error = isinstance(content, dict) and str(content.get("type", "")).endswith("_error")
        evidence = _error_evidence(content) if is_error and isinstance(content, dict) \
            else evidence_of(content)
        self.emit("hosted.result", Hosted(
            output_index=index, call_id=call_id, tool_type=tool_type, authority=authority,
            name=name, status="failed" if is_error else "completed", billable_unit=unit,
            quantity=(0 if is_error else 1) if unit else None, arguments=arguments,
            evidence=json_text(evidence), is_error=is_error))
        self._blocks[index] = _Block("done", index)

    def _start_container_upload(self, index: int, block_doc: dict[str, Any]) -> None:
        # A file placed in the code-execution container (SDK ContainerUploadBlock): provider-side
        # evidence with no call of its own, keyed by the file id.
        file_id = block_doc["file_id"]
        self.emit("hosted.result", Hosted(
            output_index=index, call_id=file_id, tool_type="code_execution",
            authority="provider", name="container_upload", status="completed",
            evidence=json_text({"files": [file_id]})))
        self._blocks[index] = _Block("done", index)

    # beta: server-side context compaction, model fallback

    def _start_compaction(self, index: int, block_doc: dict[str, Any]) -> None:
        block = self._blocks[index] = _Block("compaction", index)
        block.call_id = stable_id(self.run_id, self._message_id, index, "compaction")
        if block_doc.get("content"):
            block.parts.add(block_doc["content"])
        block.signature = block_doc.get("encrypted_content")
        self.emit("hosted.call", Hosted(
            output_index=index, call_id=block.call_id, tool_type="compaction",
            authority="provider", name="compaction", status="in_progress"))

    def _compaction_delta(self, block: _Block, delta: dict[str, Any]) -> None:
        if delta.get("content"):
            block.parts.add(delta["content"])
        if delta.get("encrypted_content"):
            block.signature = delta["encrypted_content"]

    def _end_compaction(self, block: _Block) -> None:
        # The summary replaces earlier context; its encrypted form must be sent back as is.
        assert block.call_id is not None  # set by _start_compaction
        self.too_large_to_hold(block.parts, f"the summary of compaction {block.call_id}")
        evidence = {"summary": block.parts.text(), "encrypted_content": block.signature}
        self.emit("hosted.result", Hosted(
            output_index=block.index, call_id=block.call_id, tool_type="compaction",
            authority="provider", name="compaction", status="completed",
            evidence=json_text(evidence)))

    def _start_fallback(self, index: int, block_doc: dict[str, Any]) -> None:
        # The server switched models (after a refusal, `trigger`); the text that follows is the
        # fallback model's, so events from here on carry that model.
        target = (block_doc.get("to") or {}).get("model")
        if target:
            self.model = target
        self.emit("run.status", RunStatus("in_progress", "fallback"))
        self._blocks[index] = _Block("done", index)

    # --- small helpers ----------------------------------------------------------------------------

    def _orphan(self, what: str, index: Any) -> None:
        self.emit("error", Error(
            error_type="protocol_violation", retryable=False,
            message=f"{what} for index {index}, which no content_block_start opened "
                    f"(frame {self.frame.frame_id})"))



# What a handler raises on a frame of a known type whose fields are missing or mistyped.
_SHAPE_ERRORS = (KeyError, IndexError, TypeError, AttributeError, ValueError)

# Provider event type -> handler. The fall-through (`unknown`) is in `handle`.
_ON_EVENT: dict[str | None, Callable[[AnthropicMessagesAdapter, dict[str, Any]], None]] = {
    "message_start": AnthropicMessagesAdapter._on_message_start,
    "content_block_start": AnthropicMessagesAdapter._on_block_start,
    "content_block_delta": AnthropicMessagesAdapter._on_block_delta,
    "content_block_stop": AnthropicMessagesAdapter._on_block_stop,
    "message_delta": AnthropicMessagesAdapter._on_message_delta,
    "message_stop": AnthropicMessagesAdapter._on_message_stop,
    "ping": AnthropicMessagesAdapter._on_ping,
    "error": AnthropicMessagesAdapter._on_error,
    "message": AnthropicMessagesAdapter._on_message,
}

# content_block_start block type -> opener (result blocks go through HOSTED_RESULTS).
_ON_BLOCK: dict[str, Callable[[AnthropicMessagesAdapter, int, dict[str, Any]], None]] = {
    "text": AnthropicMessagesAdapter._start_text,
    "thinking": AnthropicMessagesAdapter._start_thinking,
    "redacted_thinking": AnthropicMessagesAdapter._start_redacted_thinking,
    "tool_use": AnthropicMessagesAdapter._start_tool_use,
    "server_tool_use": AnthropicMessagesAdapter._start_server_tool_use,
    "mcp_tool_use": AnthropicMessagesAdapter._start_mcp_tool_use,
    "container_upload": AnthropicMessagesAdapter._start_container_upload,
    "compaction": AnthropicMessagesAdapter._start_compaction,
    "fallback": AnthropicMessagesAdapter._start_fallback,
}

# delta type -> (handler(block, delta), the block kinds it may extend) (Claude streaming guide).
_TOOL_BLOCKS = ("tool_use", "server_tool_use", "mcp_tool_use")
_ON_DELTA: dict[str, tuple[Callable[[AnthropicMessagesAdapter, _Block, dict[str, Any]], None], tuple[Any, ...]]] = {
    "text_delta": (AnthropicMessagesAdapter._text_delta, ("text",)),
    "citations_delta": (AnthropicMessagesAdapter._citations_delta, ("text",)),
    "thinking_delta": (AnthropicMessagesAdapter._thinking_delta, ("thinking",)),
    "signature_delta": (AnthropicMessagesAdapter._signature_delta, ("thinking",)),
    "input_json_delta": (AnthropicMessagesAdapter._input_json_delta, _TOOL_BLOCKS),
    "compaction_delta": (AnthropicMessagesAdapter._compaction_delta, ("compaction",)),
}

# block kind -> what its end emits (kinds translated whole at start have none).
_ON_BLOCK_CLOSE: dict[str, Callable[[AnthropicMessagesAdapter, _Block], None]] = {
    "text": AnthropicMessagesAdapter._end_text,
    "thinking": AnthropicMessagesAdapter._end_thinking,
    "tool_use": AnthropicMessagesAdapter._end_tool_use,
    "server_tool_use": AnthropicMessagesAdapter._end_hosted_call,
    "mcp_tool_use": AnthropicMessagesAdapter._end_hosted_call,
    "compaction": AnthropicMessagesAdapter._end_compaction,
}


# What the gateway, the simulator and the registry know of this API (adapters/api_facts.py):
# no object to read back, cancel or resume; the key goes in x-api-key beside the API version.
FACTS = ApiFacts(
    api=AnthropicMessagesAdapter.api, provider=AnthropicMessagesAdapter.default_provider,
    config_provider="anthropic",
    auth_headers=key_header_auth("x-api-key", **{"anthropic-version": ANTHROPIC_VERSION}),
    sse_event_field="type", sse_content_type="text/event-stream; charset=utf-8",
)
