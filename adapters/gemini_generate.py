"""Gemini ``generateContent`` / ``streamGenerateContent`` (Gemini API ``v1beta`` and Vertex AI
``v1``/``v1beta1``) → ModelEvents.

Follows the Gemini generateContent reference (SSE with ``alt=sse``, a streamed JSON array
without it — both cut into one frame per ``GenerateContentResponse`` by ``adapters/framing.py``;
chunks and parts, finishReason, promptFeedback, usageMetadata, groundingMetadata) and the
Function calling guide (call keys). One adapter instance follows one run, which may span several
provider calls (a tool loop): a chunk with a new ``responseId`` after a terminal one starts the
next call.

More on this module: docs/adapters.md, ``adapters/gemini_generate.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from modelevents.adapters.accumulate import Parts
from modelevents.adapters.api_facts import ApiFacts, key_header_auth
from modelevents.adapters.base import Adapter, json_text, stable_id
from modelevents.adapters.encodings import byte_to_char, decode_base64
from modelevents.adapters.google_status import status_error
from modelevents.adapters.streamed_arguments import (
    StreamedArguments,
    parse_json_path,
    partial_value,
)
from modelevents.schemas.events import (
    Citation,
    Error,
    Hosted,
    Media,
    Message,
    Reasoning,
    Refusal,
    RunAwaiting,
    RunFinished,
    RunStarted,
    Text,
    ToolCall,
    ToolResult,
    Usage,
)
from modelevents.schemas.vocabulary import (
    FinishReason,
    HostedStatus,
    HostedToolType,
    SourceType,
    TerminalStatus,
)

# --- mappings (check against the reference in one glance) --------------------------------------

# finishReason -> (status, normalized reason, the model refused). reference "finishReason"; SDK
# FinishReason. STOP after function calls is not here: it is run.awaiting (reference, function
# calling guide).
FINISH_REASONS: dict[str, tuple[TerminalStatus, FinishReason, bool]] = {
    "STOP": ("completed", "end_turn", False),
    "MAX_TOKENS": ("incomplete", "max_tokens", False),
    "SAFETY": ("incomplete", "content_filter", True),
    "RECITATION": ("incomplete", "content_filter", False),
    "LANGUAGE": ("incomplete", "unsupported_language", False),
    "OTHER": ("incomplete", "other", False),
    "BLOCKLIST": ("incomplete", "content_filter", True),
    "PROHIBITED_CONTENT": ("incomplete", "content_filter", True),
    "SPII": ("incomplete", "content_filter", True),
    "MALFORMED_FUNCTION_CALL": ("failed", "error", False),
    "UNEXPECTED_TOOL_CALL": ("failed", "error", False),
    "TOO_MANY_TOOL_CALLS": ("failed", "error", False),
    "IMAGE_SAFETY": ("incomplete", "content_filter", True),
    "IMAGE_PROHIBITED_CONTENT": ("incomplete", "content_filter", True),
    "IMAGE_RECITATION": ("incomplete", "content_filter", False),
    "NO_IMAGE": ("incomplete", "no_image", False),
    "IMAGE_OTHER": ("incomplete", "other", False),
    "FINISH_REASON_UNSPECIFIED": ("incomplete", "unknown", False),
}
# A finishReason not above: the outcome is not known to be a success (schemas/vocabulary.py:
# the fallback reason `other`, the raw value in raw_reason).
UNMAPPED_FINISH: tuple[TerminalStatus, FinishReason, bool] = ("incomplete", "other", False)

# Server-side tool invocation toolType -> (tool_type, billable unit). reference "Parts" (SDK
# ToolType). Google Search grounding is billed per search query (Gemini 3 pricing); the others have
# no per-call unit. Names as in the Interactions adapter (schemas/vocabulary.py HostedToolType); a
# toolType not here is `other`, its raw name in Hosted.name.
HOSTED_TOOL_TYPES: dict[str, tuple[HostedToolType, str | None]] = {
    "GOOGLE_SEARCH_WEB": ("web_search", "search_query"),
    "GOOGLE_SEARCH_IMAGE": ("image_search", "search_query"),
    "URL_CONTEXT": ("web_fetch", None),
    "GOOGLE_MAPS": ("maps_search", None),
    "FILE_SEARCH": ("file_search", None),
}
UNMAPPED_TOOL: tuple[HostedToolType, str | None] = ("other", None)

# codeExecutionResult.outcome -> (hosted status, is_error). SDK Outcome.
CODE_OUTCOMES: dict[str, tuple[HostedStatus, bool]] = {
    "OUTCOME_OK": ("completed", False),
    "OUTCOME_FAILED": ("failed", True),
    "OUTCOME_DEADLINE_EXCEEDED": ("failed", True),
}

# groundingChunks[] member -> neutral citation source type. reference "groundingMetadata". A Maps
# chunk is a place (as Interactions' place_citation); a member not here is `other`.
GROUNDING_SOURCES: dict[str, SourceType] = {
    "web": "url",
    "retrievedContext": "document",
    "maps": "place",
    "image": "image",
}

# Part members that qualify a part instead of being its content.
PART_MODIFIERS = frozenset({"thought", "thoughtSignature", "partMetadata", "videoMetadata",
                            "mediaResolution"})

# Top-level members of a GenerateContentResponse (SDK GenerateContentResponse).
RESPONSE_KEYS = ("candidates", "promptFeedback", "usageMetadata", "responseId", "modelVersion")

# Kinds of an open block. Ints compared with ==: identity of strings does not survive pickling
# (adapter state is pickled between frames).
_TEXT, _THOUGHT, _CALL = 1, 2, 3



# --- per-stream state --------------------------------------------------------------------------


class _Call:
    """A function call whose arguments are still streaming (Vertex ``willContinue``)."""

    __slots__ = ("name", "call_id", "index", "args", "valid")

    def __init__(self, name: str, call_id: str, index: int, args: StreamedArguments) -> None:
        self.name = name
        self.call_id = call_id
        self.index = index
        self.args = args
        self.valid = True  # False once a partial argument could not be placed


class _Candidate:
    """One candidate of the current provider response: one model message."""

    __slots__ = ("index", "item_id", "message", "kind", "block", "parts", "signature", "texts",
                 "call", "calls", "names", "finish", "code_calls", "server_calls",
                 "hosted_types", "searched", "cited", "url_context")

    def __init__(self, index: int, item_id: str | None) -> None:
        self.index = index
        self.item_id = item_id
        self.message: int | None = None  # the message's ordinal in the run, once started
        self.kind: int | None = None  # the open block: _TEXT | _THOUGHT | _CALL | None
        self.block = -1  # output_index of the open block
        self.parts = Parts()  # fragments of the open text / thought block
        self.signature: str | None = None  # thoughtSignature of the open thought block
        self.texts: list[tuple[int, Parts]] = []  # every text block, for citation offsets
        self.call: _Call | None = None  # the open streamed function call
        self.calls = 0  # function calls in this response
        self.names: dict[str, str] = {}  # function name -> its last tool_call_id
        self.finish: str | None = None  # finishReason, once seen
        self.code_calls: dict[str, tuple[str, str]] = {}  # open executableCode: key -> (id, args)
        # Open server-side toolCall parts: id -> (tool_type, billable unit, arguments).
        self.server_calls: dict[str, tuple[HostedToolType, str | None, str | None]] = {}
        self.hosted_types: set[str] = set()  # tool types reported by toolCall parts
        self.searched = False  # grounding's web search already reported
        self.cited: set[tuple[Any, ...]] = set()  # citations already emitted (metadata may repeat)
        self.url_context: Any = None  # urlContextMetadata already reported


# --- the adapter -------------------------------------------------------------------------------


class GeminiGenerateAdapter(Adapter):
    name = "gemini_generate"
    revision = "2"  # 2: closed vocabulary (maps_search, place, error classes)
    api = "gemini-generate"
    default_provider = "google"

    def __init__(self, run_id: str, tenant: str = "default", provider: str | None = None,
                 model: str | None = None) -> None:
        Adapter.__init__(self, run_id, tenant, provider, model)  # no super() object per stream
        self._messages = 0  # messages started in the run
        self._response_id: str | None = None
        self._reset_response()

    def _reset_response(self) -> None:
        self._response_open = False  # run.started / run.status emitted for this response
        self._terminal = False
        self._cands: dict[int, _Candidate] = {}
        self._unfinished = 0  # candidates without a finishReason yet
        self._finishing = False  # a finishReason or a prompt block arrived in this frame
        self._blocked: str | None = None  # promptFeedback.blockReason
        self._outputs = 0  # next output_index of this response
        self._usage_seen: Any = None  # the latest usageMetadata
        self._usage_sent: Any = None  # the usageMetadata last emitted as `usage`

    @classmethod
    def recognizes(cls, doc: Any) -> bool:
        if type(doc) is list:  # a whole streamed array
            return bool(doc) and cls.recognizes(doc[0])
        # `candidates`, `promptFeedback` and `usageMetadata` are generateContent's alone (the
        # Interactions API says `usage`, Chat Completions `choices`). Google error bodies are
        # shared with other Google APIs: not claimed.
        return type(doc) is dict and (
            "candidates" in doc or "promptFeedback" in doc or "usageMetadata" in doc)

    # --- dispatch ---------------------------------------------------------------------------------

    def handle(self, doc: Any) -> None:
        # A member missing or mistyped raises: the base's guard reports it (unexpected_shape).
        if type(doc) is not dict:
            self._not_an_object(doc)
            return
        if "error" in doc:
            self._on_error(doc["error"])
            return
        # What remains is a GenerateContentResponse: every chunk of a stream, translated here
        # inline (a call less per frame).
        candidates = doc.get("candidates")
        if candidates is None and not any(key in doc for key in RESPONSE_KEYS):
            self.unknown("response:" + ",".join(sorted(doc)),
                         "object is not a GenerateContentResponse (no candidates, promptFeedback, "
                         "usageMetadata)")
            return
        response_id = doc.get("responseId")
        if self._terminal and response_id != self._response_id:
            # The next provider call of the run (after tool results were sent).
            self._reset_response()
            self.stream_complete = False
        model = doc.get("modelVersion")
        if model and model != self.model:
            self.model = model
        if not self._response_open:
            self._open_response(response_id)
        if candidates:
            for candidate in candidates:
                self._on_candidate(candidate)
        else:
            feedback = doc.get("promptFeedback")
            if feedback and feedback.get("blockReason"):
                self._on_blocked(feedback)
        usage = doc.get("usageMetadata")
        if usage is not None:
            self._usage_seen = usage
        if self._finishing:
            self._finishing = False
            if not self._unfinished and not self._terminal:
                self._emit_usage()
                self._terminate()
        elif self._terminal and usage is not None:
            self._emit_usage()  # a late chunk of a finished response corrects its usage

    def _not_an_object(self, doc: Any) -> None:
        if type(doc) is list:
            # The whole streamed array as one body (framing "json"): one response per element,
            # each under the guard of its own, so one bad element does not lose the others.
            for element in doc:
                if type(element) is dict:
                    try:
                        self.handle(element)
                    except Exception as exc:
                        self._guard_caught(exc)
                else:
                    self.malformed(
                        f"array element is JSON {type(element).__name__}, not an object")
        else:
            self.malformed(f"body is JSON {type(doc).__name__}, not an object")

    def finish(self) -> None:
        # Input ended. Blocks still open were cut by the transport: a partial streamed call must
        # never become an executable tool.call, so nothing is flushed; the base reports
        # stream_truncated when no finishReason came.
        for cand in self._cands.values():
            cand.kind = None
            cand.call = None
        if not self.stream_complete:
            self._emit_usage()  # the last snapshot the provider sent before the cut

    # --- the response ----------------------------------------------------------------------------

    def _open_response(self, response_id: str | None) -> None:
        # Every provider call of the run opens with run.started (the base's contract).
        self._response_open = True
        self._response_id = response_id
        self.emit("run.started", RunStarted("in_progress", response_id))

    def _terminate(self) -> None:
        self._terminal = True
        self.stream_complete = True
        if self._blocked is not None:
            # Blocked prompt: the provider answered, with no output at all (reference:
            # promptFeedback).
            self.emit("run.finished", RunFinished("incomplete", "content_filter", self._blocked))
            return
        first = self._cands[min(self._cands)]
        raw = first.finish
        status, reason, _ = FINISH_REASONS.get(raw, UNMAPPED_FINISH) if raw else UNMAPPED_FINISH
        if status == "completed" and first.calls:
            # No TOOL_CALLS reason exists: a function-call turn ends STOP (reference, function
            # calling guide).
            self.emit("run.awaiting", RunAwaiting("tool_results", raw))
        else:
            self.emit("run.finished", RunFinished(status, reason, raw))

    def _on_blocked(self, feedback: dict[str, Any]) -> None:
        reason = feedback["blockReason"]
        explanation = feedback.get("blockReasonMessage")  # Vertex only
        self.emit("refusal", Refusal(text=explanation or "", category=reason,
                                     explanation=explanation))
        self._blocked = str(reason)
        self._finishing = True

    def _emit_usage(self) -> None:
        # Once per response, when it ends: usageMetadata is a running snapshot whose mid-stream
        # values are not even monotonic (promptTokenCount 169 then 79, totalTokenCount 102 → 9
        # → 165; reference usageMetadata), so the last one is the step's usage. Every chunk's own
        # snapshot stays in its envelope.
        usage = self._usage_seen
        if usage is None or usage == self._usage_sent:
            return
        self._usage_sent = usage
        prompt = usage.get("promptTokenCount")
        total = usage.get("totalTokenCount")
        if prompt is None and total is None:
            return  # Vertex partial-args chunks carry only {trafficType} (reference: usageMetadata)
        thoughts = usage.get("thoughtsTokenCount")
        self.emit("usage", Usage(
            (prompt or 0) + (usage.get("toolUsePromptTokenCount") or 0),  # input_tokens
            (usage.get("candidatesTokenCount") or 0) + (thoughts or 0),  # output_tokens
            usage.get("cachedContentTokenCount"),  # cache_read_tokens
            None,  # cache_write_tokens
            thoughts,  # reasoning_tokens
            total,  # total_tokens
            {}))  # server_tool_units

    def _on_error(self, error: Any) -> None:
        # An HTTP error body, or an error chunk after partial content on HTTP 200 (reference).
        for cand in self._cands.values():  # what was open stays partial: no tool.call from it
            cand.kind = None
            cand.call = None
        failure = status_error(error, self.frame.http_status)
        self.emit("error", failure)
        self._emit_usage()  # what the failed call consumed, as last reported
        self.emit("run.finished", RunFinished("failed", "error", failure.code))
        self._terminal = True
        self.stream_complete = True  # the provider told us the outcome

    # --- candidates ------------------------------------------------------------------------------

    def _on_candidate(self, doc: dict[str, Any]) -> None:
        index = doc.get("index") or 0
        cand = self._cands.get(index)
        if cand is None:
            cand = self._new_candidate(index)
        # A candidate of content alone (every Vertex argument fragment) skips the lookups of
        # the members that qualify a candidate.
        qualified = len(doc) > 1 or "content" not in doc
        if qualified:
            url_context = doc.get("urlContextMetadata")
            if url_context and url_context != cand.url_context:
                self._on_url_context(cand, url_context)
        content = doc.get("content")
        if content:
            parts = content.get("parts")
            if parts:
                if cand.message is None:
                    self._start_message(cand)
                for part in parts:
                    text = part.get("text")
                    if type(text) is str and len(part) == 1:  # the hot path: a plain text part
                        if text:
                            if cand.kind != _TEXT:
                                self._open_block(cand, _TEXT)
                            cand.parts.add(text)
                            self.emit("text.delta", Text(cand.block, 0, text, cand.item_id))
                    else:
                        self._on_part(cand, part)
        if not qualified:
            return
        grounding = doc.get("groundingMetadata")
        if grounding:
            self._on_grounding(cand, grounding)
        citations = doc.get("citationMetadata")
        if citations:
            self._on_citation_metadata(cand, citations)
        finish = doc.get("finishReason")
        if finish is not None and cand.finish is None:
            self._finish_candidate(cand, finish, doc)

    def _new_candidate(self, index: int) -> _Candidate:
        if index == 0:
            item_id = self._response_id
        else:
            item_id = f"{self._response_id or ''}/{index}"
        cand = self._cands[index] = _Candidate(index, item_id)
        self._unfinished += 1
        return cand

    def _start_message(self, cand: _Candidate) -> None:
        cand.message = self._messages
        self._messages += 1
        # Gemini's role "model" is the neutral "assistant".
        self.emit("message.started", Message(cand.message, "assistant", cand.item_id))

    def _finish_candidate(self, cand: _Candidate, raw: str, doc: dict[str, Any]) -> None:
        cand.finish = raw
        self._unfinished -= 1
        self._finishing = True
        self._close_block(cand)
        if cand.message is not None:
            self.emit("message.finished", Message(cand.message, "assistant", cand.item_id))
        outcome = FINISH_REASONS.get(raw)
        explanation = doc.get("finishMessage")
        if outcome is None:
            self.unknown(f"finishReason:{raw}", "finishReason not in the reference")
        elif outcome[2]:
            # SAFETY and kin: the output was withheld; the blocked rating names the category.
            blocked = [r.get("category") for r in doc.get("safetyRatings") or ()
                       if type(r) is dict and r.get("blocked")]
            self.emit("refusal", Refusal(text=explanation or "", category=blocked[0] if blocked
                                         else raw, explanation=explanation))
        elif outcome[0] == "failed":
            # MALFORMED_FUNCTION_CALL and kin: the model's tool calling failed.
            self.emit("error", Error(error_type="tool_call_error", code=raw, retryable=False,
                                     message=explanation or f"the model stopped with {raw}"))

    # --- blocks ----------------------------------------------------------------------------------

    def _next_output(self) -> int:
        index = self._outputs
        self._outputs += 1
        return index

    def _open_block(self, cand: _Candidate, kind: int) -> None:
        self._close_block(cand)
        cand.kind = kind
        cand.block = self._next_output()
        cand.parts = Parts()
        cand.signature = None
        if kind == _TEXT:
            cand.texts.append((cand.block, cand.parts))

    def _close_block(self, cand: _Candidate) -> None:
        kind = cand.kind
        if kind is None:
            return
        cand.kind = None
        if kind == _TEXT:
            self.emit("text.done", Text(cand.block, 0, cand.parts.text(), cand.item_id))
            self.elide_last(cand.parts, "text", "text.delta")
        elif kind == _THOUGHT:
            self.emit("reasoning.done", Reasoning(
                cand.block, 0, "summary", cand.parts.text(), cand.item_id,
                cand.signature, None, self.valid_for()))  # signature, no encrypted_content
            self.elide_last(cand.parts, "text", "reasoning.delta")
        else:
            self._end_call(cand)

    # --- parts -----------------------------------------------------------------------------------

    def _on_part(self, cand: _Candidate, part: dict[str, Any]) -> None:
        if len(part) == 1:
            # One member and no signature (every Vertex argument fragment): its handler, if any.
            for key in part:
                handler = _ON_PART.get(key)
                if handler is not None:
                    handler(self, cand, part)
                    return
        handler = None
        stranger = None
        for key in part:
            handler = _ON_PART.get(key)
            if handler is not None:
                break
            if key not in PART_MODIFIERS:
                stranger = key
        signature = part.get("thoughtSignature")
        if handler is None:
            if stranger is not None:
                self._close_block(cand)  # whatever it is, it is a part of its own
                self.unknown(f"part:{stranger}", "part kind not in the generateContent reference")
            if signature:  # a part that carries nothing but a signature
                self._signature(cand, signature, None, None)
            return
        where = handler(self, cand, part)
        if signature and where is not None:
            self._signature(cand, signature, *where)

    def _signature(self, cand: _Candidate, signature: str, output_index: int | None,
                   item_id: str | None) -> None:
        # The signature stays with the part that carried it: output_index, and the call id for a
        # call (Gemini 3 rejects a replayed call whose signature moved; function calling guide).
        self.emit("reasoning.done", Reasoning(
            self._next_output() if output_index is None else output_index, 0, "redacted", "",
            item_id or cand.item_id, signature, None, self.valid_for()))

    def _on_text_part(self, cand: _Candidate, part: dict[str, Any]) -> tuple[Any, ...] | None:
        text = part["text"]
        if type(text) is not str:
            raise TypeError(f"text part holds {type(text).__name__}")
        if part.get("thought") is True:  # a thought summary (includeThoughts)
            if text:
                if cand.kind != _THOUGHT:
                    self._open_block(cand, _THOUGHT)
                cand.parts.add(text)
                self.emit("reasoning.delta", Reasoning(cand.block, 0, "summary", text,
                                                       cand.item_id))
            if cand.kind == _THOUGHT:
                if cand.signature is None:
                    cand.signature = part.get("thoughtSignature")
                    return None
                return (cand.block, None)  # a second signature in one block: keep both
            return (None, None)
        if text:
            if cand.kind != _TEXT:
                self._open_block(cand, _TEXT)
            cand.parts.add(text)
            self.emit("text.delta", Text(cand.block, 0, text, cand.item_id))
        if cand.kind == _TEXT:
            return (cand.block, None)
        # An empty text part (the last chunk's signature carrier, reference): no text block of its
        # own.
        return (None, None)

    def _on_function_call(self, cand: _Candidate, part: dict[str, Any]) -> tuple[Any, ...] | None:
        call = part["functionCall"]
        name = call.get("name")
        more = call.get("willContinue") is True
        if name is None:
            # A Vertex argument fragment, or the terminal {} (function calling guide), of the open
            # streamed call.
            streamed = cand.call if cand.kind == _CALL else None
            if streamed is None:
                if call.get("partialArgs") or call.get("args"):
                    self.protocol_violation(
                        "functionCall fragment without a name and no streamed call open; "
                        "ignored")
                return (None, None)
        else:
            self._close_block(cand)  # a name starts a new call, even without the terminal {}
            # Gemini API calls have no id (function calling guide): derive one that replays and
            # retries reproduce.
            call_id = call.get("id") or stable_id(self.run_id, self._response_id, cand.index,
                                                  cand.calls, name)
            cand.calls += 1
            cand.names[name] = call_id
            args = call.get("args")
            index = self._next_output()
            self.emit("tool.call.started", ToolCall(index, name, call_id, "", cand.item_id))
            if not (more or call.get("partialArgs")):
                self.emit_tool_call(index, name, call_id,
                                    None if args is None else json_text(args), cand.item_id)
                return (index, call_id)
            streamed = _Call(name, call_id, index,
                             StreamedArguments(args if type(args) is dict else None))
            cand.kind, cand.block, cand.call = _CALL, index, streamed
        # The streamed call's partial arguments in this part (here, not in a helper: most
        # Vertex frames are one fragment).
        for arg in call.get("partialArgs") or ():
            if "stringValue" in arg:  # the common case, ahead of partial_value's search
                value = arg["stringValue"]
            else:
                value, present = partial_value(arg)
                if not present:
                    continue
            path = arg.get("jsonPath")
            segments = parse_json_path(path) if type(path) is str else None
            fragment = None if segments is None else streamed.args.put(
                segments, value, arg.get("willContinue") is True)
            if fragment is None:
                streamed.valid = False
                self.emit("error", Error(
                    error_type="malformed_tool_arguments", retryable=False,
                    message=f"partial argument {json_text(arg)} of call {streamed.name} "
                            f"({streamed.call_id}) cannot be placed in the arguments built so "
                            f"far (frame {self.frame.frame_id}); tool.call reports "
                            f"arguments_valid=false"))
            elif fragment:
                self.emit("tool.call.delta", ToolCall(streamed.index, streamed.name,
                                                      streamed.call_id, fragment, cand.item_id))
        if not more:
            self._close_block(cand)
        return (streamed.index, streamed.call_id)

    def _end_call(self, cand: _Candidate) -> None:
        call, cand.call = cand.call, None
        if call is None:
            return  # no call open: nothing to finalize
        tail = call.args.close()
        if tail:
            self.emit("tool.call.delta", ToolCall(call.index, call.name, call.call_id, tail,
                                                  cand.item_id))
        self.emit_tool_call(call.index, call.name, call.call_id, json_text(call.args.tree),
                            cand.item_id, valid=call.valid)

    def _on_function_response(self, cand: _Candidate, part: dict[str, Any]) -> tuple[Any, ...] | None:
        # Not expected in model output (it is how results go *to* the model); if a server echoes
        # one, it is a result keyed by name (function calling guide).
        response = part["functionResponse"]
        self._close_block(cand)
        name = str(response.get("name") or "")
        body = response.get("response")
        call_id = response.get("id") or cand.names.get(name) or stable_id(
            self.run_id, self._response_id, cand.index, "function_response", name)
        self.emit("tool.result", ToolResult(name, call_id, json_text(body),
                                            is_error=type(body) is dict and "error" in body))
        return (None, call_id)

    def _on_executable_code(self, cand: _Candidate, part: dict[str, Any]) -> tuple[Any, ...] | None:
        code = part["executableCode"]
        self._close_block(cand)
        index = self._next_output()
        provider_id = code.get("id")
        call_id = provider_id or stable_id(self.run_id, self._response_id, cand.index,
                                           "code_execution", index)
        arguments = json_text({"language": code.get("language"), "code": code.get("code")})
        cand.code_calls[provider_id or call_id] = (call_id, arguments)
        self.emit("hosted.call", Hosted(index, call_id, "code_execution", "provider",
                                        name="code_execution", status="in_progress",
                                        arguments=arguments))
        return (index, call_id)

    def _on_code_result(self, cand: _Candidate, part: dict[str, Any]) -> tuple[Any, ...] | None:
        result = part["codeExecutionResult"]
        self._close_block(cand)
        index = self._next_output()
        key = result.get("id")
        entry = cand.code_calls.pop(key, None) if key else None
        if entry is None and not key and cand.code_calls:
            # Results without ids follow their code part in order (Gemini API before 2026).
            entry = cand.code_calls.pop(next(iter(cand.code_calls)))
        call_id, arguments = entry or (key or stable_id(
            self.run_id, self._response_id, cand.index, "code_execution_result", index), None)
        outcome = result.get("outcome")
        status, is_error = CODE_OUTCOMES.get(outcome, ("failed", True))
        self.emit("hosted.result", Hosted(
            index, call_id, "code_execution", "provider", name="code_execution", status=status,
            arguments=arguments, is_error=is_error,
            evidence=json_text({"outcome": outcome, "output": result.get("output")})))
        return (index, call_id)

    def _on_tool_call(self, cand: _Candidate, part: dict[str, Any]) -> tuple[Any, ...] | None:
        # A server-side tool invocation (includeServerSideToolInvocations, reference).
        call = part["toolCall"]
        self._close_block(cand)
        index = self._next_output()
        raw_type = str(call.get("toolType"))
        tool_type, unit = HOSTED_TOOL_TYPES.get(raw_type, UNMAPPED_TOOL)
        cand.hosted_types.add(tool_type)
        call_id = call.get("id") or stable_id(self.run_id, self._response_id, cand.index,
                                              raw_type, index)
        args = call.get("args")
        arguments = json_text(args if args is not None else {})
        cand.server_calls[call_id] = (tool_type, unit, arguments)
        self.emit("hosted.call", Hosted(index, call_id, tool_type, "provider", name=raw_type,
                                        status="in_progress", billable_unit=unit,
                                        arguments=arguments))
        return (index, call_id)

    def _on_tool_response(self, cand: _Candidate, part: dict[str, Any]) -> tuple[Any, ...] | None:
        response = part["toolResponse"]
        self._close_block(cand)
        index = self._next_output()
        raw_type = str(response.get("toolType"))
        call_id = response.get("id") or stable_id(self.run_id, self._response_id, cand.index,
                                                  raw_type, index)
        tool_type, unit, arguments = cand.server_calls.pop(
            call_id, HOSTED_TOOL_TYPES.get(raw_type, UNMAPPED_TOOL) + (None,))
        quantity = None
        if unit == "search_query" and arguments:
            queries = orjson.loads(arguments).get("queries")
            quantity = len(queries) if type(queries) is list else None
        self.emit("hosted.result", Hosted(
            index, call_id, tool_type, "provider", name=raw_type, status="completed",
            billable_unit=unit, quantity=quantity, arguments=arguments,
            evidence=json_text(response.get("response"))))
        return (index, call_id)

    def _on_inline_data(self, cand: _Candidate, part: dict[str, Any]) -> tuple[Any, ...] | None:
        blob = part["inlineData"]
        self._close_block(cand)
        index = self._next_output()
        data = decode_base64(blob.get("data") or "")
        if data is None:
            self.emit("error", Error(
                error_type="malformed_media", retryable=False,
                message=f"inlineData of frame {self.frame.frame_id} is not base64; the "
                        "envelope keeps it"))
        # Image models stream draft images as thought parts: those are partial.
        self.emit("media.done", Media(index, str(blob.get("mimeType") or ""), cand.item_id,
                                      data=data, partial=part.get("thought") is True))
        return (index, None)

    def _on_file_data(self, cand: _Candidate, part: dict[str, Any]) -> tuple[Any, ...] | None:
        file = part["fileData"]
        self._close_block(cand)
        index = self._next_output()
        self.emit("media.done", Media(index, str(file.get("mimeType") or ""), cand.item_id,
                                      uri=file.get("fileUri"),
                                      partial=part.get("thought") is True))
        return (index, None)

    # --- grounding, URL context, recitation ------------------------------------------------------

    def _on_url_context(self, cand: _Candidate, metadata: dict[str, Any]) -> None:
        # The URL-context tool reports its fetches on the first chunk (reference:
        # groundingMetadata).
        cand.url_context = metadata
        if "web_fetch" in cand.hosted_types:
            return  # already reported by toolCall/toolResponse parts
        entries = [e for e in metadata.get("urlMetadata") or () if type(e) is dict]
        urls = [e.get("retrievedUrl") for e in entries]
        fetched = [e for e in entries
                   if e.get("urlRetrievalStatus") == "URL_RETRIEVAL_STATUS_SUCCESS"]
        index = self._next_output()
        call_id = stable_id(self.run_id, self._response_id, cand.index, "url_context", *urls)
        arguments = json_text({"urls": urls})
        self.emit("hosted.call", Hosted(index, call_id, "web_fetch", "provider",
                                        name="url_context", status="in_progress",
                                        arguments=arguments))
        self.emit("hosted.result", Hosted(
            index, call_id, "web_fetch", "provider", name="url_context",
            status="completed" if fetched else "failed", arguments=arguments,
            is_error=not fetched,
            evidence=json_text({"urls": [{"url": e.get("retrievedUrl"),
                                          "status": e.get("urlRetrievalStatus")}
                                         for e in entries]})))

    def _on_grounding(self, cand: _Candidate, grounding: dict[str, Any]) -> None:
        sources = grounding.get("groundingChunks") or []
        queries = [q for q in grounding.get("webSearchQueries") or () if q]
        if queries and not cand.searched and "web_search" not in cand.hosted_types:
            # Google Search grounding ran server-side; without toolCall parts this metadata is
            # the only evidence of it (reference: "hosted tool").
            cand.searched = True
            index = self._next_output()
            call_id = stable_id(self.run_id, self._response_id, cand.index, "google_search")
            arguments = json_text({"queries": queries})
            self.emit("hosted.call", Hosted(index, call_id, "web_search", "provider",
                                            name="google_search", status="in_progress",
                                            billable_unit="search_query", arguments=arguments))
            evidence = {"queries": queries,
                        "sources": [_grounding_source(s)[1] for s in sources if type(s) is dict]}
            self.emit("hosted.result", Hosted(
                index, call_id, "web_search", "provider", name="google_search",
                status="completed", billable_unit="search_query", quantity=len(queries),
                arguments=arguments, evidence=json_text(evidence)))
        supports = grounding.get("groundingSupports")
        if supports:
            self._ground_citations(cand, supports, sources)

    def _ground_citations(self, cand: _Candidate, supports: list[Any], sources: list[Any]) -> None:
        for support in supports:
            segment = support.get("segment") or {}
            start_byte = segment.get("startIndex") or 0
            end_byte = segment.get("endIndex") or start_byte
            located = None
            for chunk_index in support.get("groundingChunkIndices") or ():
                key = ("grounding", start_byte, end_byte, segment.get("partIndex"), chunk_index)
                if key in cand.cited:
                    continue
                cand.cited.add(key)
                if located is None:
                    located = _locate(cand.texts, start_byte, end_byte)
                source = sources[chunk_index] if (type(chunk_index) is int
                                                  and 0 <= chunk_index < len(sources)) else {}
                source_type, fields = _grounding_source(source)
                output_index, start, end = located
                self.emit("citation", Citation(
                    output_index, source_type, part_index=segment.get("partIndex"), start=start,
                    end=end, url=fields.get("uri"), file_id=fields.get("documentName"),
                    title=fields.get("title"), cited_text=segment.get("text")))

    def _on_citation_metadata(self, cand: _Candidate, metadata: dict[str, Any]) -> None:
        # Recitation sources: Vertex says `citations`, the Gemini API `citationSources`.
        for item in metadata.get("citations") or metadata.get("citationSources") or ():
            start_byte = item.get("startIndex") or 0
            end_byte = item.get("endIndex") or start_byte
            key = ("recitation", start_byte, end_byte, item.get("uri"))
            if key in cand.cited:
                continue
            cand.cited.add(key)
            output_index, start, end = _locate(cand.texts, start_byte, end_byte)
            self.emit("citation", Citation(
                output_index, "url" if item.get("uri") else "document", start=start, end=end,
                url=item.get("uri"), title=item.get("title")))

    # --- small helpers ----------------------------------------------------------------------------



def _grounding_source(chunk: dict[str, Any]) -> tuple[SourceType, dict[str, Any]]:
    """A groundingChunks member → (neutral source type, its fields)."""
    for key, source_type in GROUNDING_SOURCES.items():
        fields = chunk.get(key)
        if type(fields) is dict:
            return source_type, fields
    return "other", {}


def _locate(texts: list[tuple[int, Parts]], start_byte: int,
            end_byte: int) -> tuple[int, int, int]:
    """Byte offsets into the candidate's whole text (reference: segment indices are bytes, over the
    concatenated text of all chunks) → (output_index of the text block where the span starts,
    start and end in characters from that block's start). A span may run on into the next block."""
    offset = 0
    # A block too large to hold (adapters/accumulate.py) counts its bytes; characters are then
    # counted as bytes within it.
    blocks = [(index, b" " * parts.size if parts.elided else parts.text().encode())
              for index, parts in texts]
    for position, (index, raw) in enumerate(blocks):
        if start_byte < offset + len(raw) or position == len(blocks) - 1:
            rest = b"".join(raw for _, raw in blocks[position:])
            start = byte_to_char(rest, start_byte - offset)
            end = byte_to_char(rest, end_byte - offset)
            return index, start, end
        offset += len(raw)
    return 0, start_byte, end_byte  # no text at all: the provider's offsets as they are


# Part kind -> handler. A handler returns where a thoughtSignature on the part belongs
# (output_index or None for a new one, item_id), or None when it took the signature itself.
# The fall-through (`unknown`) is in `_on_part`.
_ON_PART: dict[str, Callable[[GeminiGenerateAdapter, _Candidate, dict[str, Any]],
                             tuple[Any, ...] | None]] = {
    "text": GeminiGenerateAdapter._on_text_part,
    "functionCall": GeminiGenerateAdapter._on_function_call,
    "functionResponse": GeminiGenerateAdapter._on_function_response,
    "executableCode": GeminiGenerateAdapter._on_executable_code,
    "codeExecutionResult": GeminiGenerateAdapter._on_code_result,
    "toolCall": GeminiGenerateAdapter._on_tool_call,
    "toolResponse": GeminiGenerateAdapter._on_tool_response,
    "inlineData": GeminiGenerateAdapter._on_inline_data,
    "fileData": GeminiGenerateAdapter._on_file_data,
}


# What the gateway, the simulator and the registry know of this API (adapters/api_facts.py):
# no object to read back, cancel or resume (reference); SSE events end in CRLF, with no ``event:``
# line.
FACTS = ApiFacts(
    api=GeminiGenerateAdapter.api, provider=GeminiGenerateAdapter.default_provider,
    config_provider="gemini", auth_headers=key_header_auth("x-goog-api-key"),
    sse_line_end=b"\r\n",
)
