"""OpenAI Chat Completions (``POST /v1/chat/completions``) and the servers that imitate it.

Speaks the ``stream: true`` chunk stream (``chat.completion.chunk`` frames ending in
``data: [DONE]``), the complete ``chat.completion`` object (non-streaming, transport ``poll``)
and error bodies, as OpenAI (API version 2020-10-01, SDK types of openai-python 3.57) and the
compatible servers send them (docs/compatible-servers.md). Follows the OpenAI Chat Completions
API reference and streaming reference (docs/design-notes.md).

What maps to what (``output_index`` is the choice index; one choice is one assistant message):

    first chunk with choices       run.started (provider_object_id = the chatcmpl id)
    first delta of a choice        message.started (role)
    delta.content                  text.delta; text.done when other output starts or the
                                     choice finishes (text after that is the next part_index)
    delta.reasoning_content        reasoning.delta (form raw); reasoning.done likewise
      / delta.reasoning
    delta.reasoning_details        the same, reasoning.summary as summary, the signature on
                                     the done; reasoning.encrypted: reasoning.done redacted
    delta.refusal                  gathered; one ``refusal`` when the choice finishes
    delta.tool_calls[index]        tool.call.started + tool.call.delta; tool.call (whole argument
      / delta.function_call          JSON, arguments_valid) when the choice finishes
    delta.annotations              citation (url_citation of the search models)
    content_filter_results         refusal (category content_filter) for a filtered choice (Azure)
    finish_reason                  message.finished; the choice's outcome (FINISH_REASONS)
    usage / x_groq.usage           usage
    {"error": …} / object "error"  error, then run.finished failed
    [DONE] (or close after every   run.finished, or run.awaiting tool_results when the turn asks
      choice finished)               for tool results ([DONE] after usage: as if `stop`)

More on this module: docs/adapters.md, ``adapters/openai_chat.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import orjson

from modelevents.adapters.accumulate import Parts
from modelevents.adapters.api_facts import ApiFacts, bearer_auth
from modelevents.adapters.base import DONE, Adapter, is_done, stable_id
from modelevents.adapters.provider_errors import classify_error
from modelevents.schemas.events import (
    Citation,
    Error,
    Message,
    Reasoning,
    Refusal,
    RunAwaiting,
    RunFinished,
    RunStarted,
    Text,
    ToolCall,
    Usage,
)
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.vocabulary import FinishReason, ReasoningForm, TerminalStatus

# --- mappings ----------------------------------------------------------------------------------

# finish_reason → (status, reason); those of AWAITING_FINISH become run.awaiting (tool_results).
# Any other literal is reason "other" (raw_reason keeps it) and counts as incomplete: an ending
# we cannot name is no success.
FINISH_REASONS: dict[str, tuple[TerminalStatus, FinishReason]] = {
    "stop": ("completed", "end_turn"),
    "length": ("incomplete", "max_tokens"),
    "content_filter": ("incomplete", "content_filter"),
    "error": ("failed", "error"),  # OpenRouter ends a choice that failed mid-stream this way
}
AWAITING_FINISH = frozenset({"tool_calls", "function_call"})  # function_call: `functions` API
# When n>1 choices end differently the run reports the most consequential ending.
OUTCOME_RANK = {"failed": 0, "awaiting": 1, "incomplete": 2, "completed": 3}
# OpenRouter's delta.reasoning_details item type → (form, field holding its text). The third
# type, reasoning.encrypted, is opaque (its `data` becomes encrypted_content).
REASONING_DETAILS: dict[str, tuple[ReasoningForm, str]] = {
    "reasoning.text": ("raw", "text"),
    "reasoning.summary": ("summary", "summary"),
}
ENCRYPTED_DETAIL = "reasoning.encrypted"
RAW_STRING: tuple[ReasoningForm, Any] = ("raw", None)  # the key of reasoning sent as a string


def _rank(ending: RunAwaiting | RunFinished) -> int:
    return OUTCOME_RANK["awaiting" if isinstance(ending, RunAwaiting) else ending.status]



# --- per-stream state --------------------------------------------------------------------------


class _Tool:
    """One tool call of a choice, assembled from argument fragments."""

    __slots__ = ("slot", "call_id", "name", "arguments", "started")

    def __init__(self, slot: int, call_id: str | None) -> None:
        self.slot = slot  # arrival position within the choice: names synthesized ids
        self.call_id = call_id
        self.name: str | None = None
        self.arguments = Parts()
        self.started = False


class _Choice:
    """One choice (``choices[].index``): its open parts and what its finish needs."""

    __slots__ = ("index", "text", "text_part", "reasoning", "reasoning_part", "reasoning_key",
                 "reasoning_form", "reasoning_item", "signature", "refusal", "tools", "tool_order",
                 "tool_ids", "filtered", "finish_reason", "finished")

    # A state stored before a slot existed (services/processor/plain_state.py) reads with these:
    # a part open then was reasoning sent as a string.
    state_defaults: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "reasoning_key": lambda choice: RAW_STRING if choice.reasoning else None,
        "reasoning_form": lambda choice: "raw",
        "reasoning_item": lambda choice: None,
        "signature": lambda choice: None,
        "tool_ids": lambda choice: _ids_of(choice.tool_order),
    }

    def __init__(self, index: int) -> None:
        self.index = index
        # The open text / reasoning part, empty when none is open. A part closes when other
        # output begins; output of its kind after that opens the next part_index.
        self.text = Parts()
        self.text_part = 0
        self.reasoning = Parts()
        self.reasoning_part = 0
        # What the open reasoning part is, None while none is: (form, reasoning_details index)
        # — another key closes it — with its item id and signature (reasoning_details only). A
        # part opens only for text or a signature to add, so an open part is never empty.
        self.reasoning_key: tuple[ReasoningForm, Any] | None = None
        self.reasoning_form: ReasoningForm = "raw"
        self.reasoning_item: str | None = None
        self.signature: str | None = None
        self.refusal: list[str] = []
        self.tools: dict[Any, _Tool] = {}  # provider tool-call index → current call
        self.tool_order: list[_Tool] = []
        self.tool_ids: dict[str, _Tool] = {}  # provider tool-call id → call
        self.filtered = False
        self.finish_reason: str | None = None
        self.finished = False


class OpenAIChatAdapter(Adapter):
    name = "openai_chat"
    # What each revision's events differ in: 2, mistyped fields are malformed_frame; empty
    # arguments "{}". 3, an unknown finish_reason is "other"; arguments that are not a JSON object
    # are not valid. 4, compatible servers (docs/compatible-servers.md): a repeated finish under
    # a new id stays in its call, [DONE] after usage ends choices without a finish_reason,
    # reasoning_details are reasoning, a repeated call header under another index is one call.
    revision = "4"
    api = "openai-chat"
    default_provider = "openai"

    def __init__(self, run_id: str, tenant: str = "default", provider: str | None = None,
                 model: str | None = None) -> None:
        Adapter.__init__(self, run_id, tenant, provider, model)  # no super() object per stream
        self._reported: set[str] = set()  # unknown fields already reported once
        self._reset_call()

    def _reset_call(self) -> None:
        """State of one provider call; a run may hold several (a tool loop on one adapter)."""
        self._started = False
        self._object_id: str | None = None
        self._call_key = ""  # what synthesized tool-call ids hash besides the run id
        self._choices: dict[int, _Choice] = {}
        self._open = 0  # choices without their finish_reason yet
        self._prompt_filtered = False
        self._usage_seen = False  # the call reported usage: servers do so once output is over
        self._whole_message = False  # reading a complete chat.completion, not deltas
        self._terminal = False

    # --- decoding and dispatch ----------------------------------------------------------------

    def undecodable(self, frame: ProviderFrame, error: orjson.JSONDecodeError) -> Any:
        # The SDK stops on any data starting with [DONE] (sdk:src/openai/_streaming.py).
        if is_done(frame.body):
            return DONE
        return super().undecodable(frame, error)  # reports the malformed frame

    def handle(self, doc: Any) -> None:
        if doc is DONE:
            self._on_done()
            return
        if type(doc) is dict:
            try:
                handler = _OBJECTS.get(doc.get("object"))
            except TypeError:  # a list or object as "object": unhashable, no object's name
                handler = None
            if handler is not None:
                handler(self, doc)
            elif "choices" in doc:
                # Azure's first chunk has object "" (fx:vercel-ai/azure-model-router.1.chunks.txt).
                self._on_chunk(doc)
            elif "error" in doc:
                self._on_error(doc["error"])
            else:
                self.unknown(str(doc.get("object") or "(no object)"),
                             detail="keys: " + ", ".join(sorted(doc)[:20]))
        else:
            self.unknown(f"(json {type(doc).__name__})")

    @classmethod
    def recognizes(cls, doc: Any) -> bool:
        if type(doc) is not dict:
            return False
        if doc.get("object") in ("chat.completion.chunk", "chat.completion"):
            return True
        if doc.get("object") == "error" and "message" in doc:
            return True  # vLLM's OpenAI-compatible server answers errors in its own shape
        choices = doc.get("choices")
        if "prompt_filter_results" in doc and choices == []:
            return True
        return (type(choices) is list and bool(choices) and type(choices[0]) is dict
                and ("delta" in choices[0] or "message" in choices[0]))

    # --- frames -------------------------------------------------------------------------------

    def _on_chunk(self, doc: dict[str, Any]) -> None:
        if self._terminal:
            self._reset_call()  # the next provider call of the same run
        model = doc.get("model")
        if model and model != self.model:
            self.model = model
        choices = doc.get("choices")
        if choices is not None and type(choices) is not list:
            self._mistyped("choices", choices, "a list")
            choices = None  # the rest of the chunk (usage, error) is still read
        if choices:
            if not self._started:
                self._start(doc)
            elif not self._open:
                self._on_next_call(doc)
            for position, choice in enumerate(choices):
                self._on_choice(choice, position)
            if self._open and doc.get("usage") is None and "error" not in doc:
                return  # the common delta chunk: nothing more to read in it
        self._on_chunk_facts(doc)

    def _on_next_call(self, doc: dict[str, Any]) -> None:
        # Calls concatenated without [DONE] between them (a recorder's file, a proxy): a new id
        # after every choice finished starts the next call.
        object_id = doc.get("id")
        if object_id and self._object_id and object_id != self._object_id \
                and not self._repeats_finish(doc["choices"]):
            self._terminate()
            self._reset_call()
            self._start(doc)

    def _repeats_finish(self, choices: list[Any]) -> bool:
        # OpenRouter sends the finish chunk twice, the second time with usage, and the id may
        # change between chunks of one response (LiteLLM gives every chunk a new one): a chunk
        # that only repeats how finished choices ended belongs to the call they ended.
        for raw in choices:
            if type(raw) is not dict or not raw.get("finish_reason"):
                return False
            choice = self._choices.get(raw.get("index") or 0)
            if choice is None or not choice.finished or _carries_output(raw.get("delta")):
                return False
        return True

    def _on_chunk_facts(self, doc: dict[str, Any]) -> None:
        """What a chunk may carry besides deltas: in the usage chunk, finish chunks, filters."""
        filters = doc.get("prompt_filter_results")
        if filters:
            self._on_prompt_filter(filters)
        usage = doc.get("usage")
        if usage is None:
            groq = doc.get("x_groq")
            # Groq reports usage under x_groq.usage (fx:vercel-ai/groq-tool-call.chunks.txt).
            usage = groq.get("usage") if type(groq) is dict else None
        if usage:
            self._usage_seen = True
            self._on_usage(usage)
        moderation = doc.get("moderation")
        if moderation:
            self._on_moderation(moderation)
        error = doc.get("error")
        if error:
            # OpenRouter reports a mid-stream failure inside an ordinary chunk.
            self._on_error(error)

    def _on_completion(self, doc: dict[str, Any]) -> None:
        """A whole ``chat.completion`` object: the same path as a stream that ends at once."""
        if self._terminal:
            self._reset_call()
        model = doc.get("model")
        if model:
            self.model = model
        self._start(doc)
        for choice in doc.get("choices") or ():
            if type(choice) is not dict:
                continue
            message = dict(choice.get("message") or {})
            calls = message.get("tool_calls")
            if type(calls) is list:
                # Complete calls carry no index; their position is their identity.
                message["tool_calls"] = [dict(call, index=i) for i, call in enumerate(calls)
                                         if type(call) is dict]
            self._whole_message = True  # its calls are whole: two never merge by id
            try:
                self._on_choice({"index": choice.get("index", 0), "delta": message,
                                 "finish_reason": choice.get("finish_reason"),
                                 "content_filter_results": choice.get("content_filter_results")})
            finally:
                self._whole_message = False
        filters = doc.get("prompt_filter_results")
        if filters:
            self._on_prompt_filter(filters)
        usage = doc.get("usage")
        if usage:
            self._on_usage(usage)
        self._terminate()

    def _on_done(self) -> None:
        if not self._terminal:
            # [DONE] after the usage chunk is a normal end even without a finish_reason (a
            # compatible server that never sends one); [DONE] alone says nothing of the output.
            self._terminate(ended=self._usage_seen)
        self.stream_complete = True

    def finish(self) -> None:
        # No [DONE] (vercel-ai chunk files, servers that close after the finish chunk): the
        # stream is whole when every choice said how it ended.
        if not self._terminal and self._choices and not self._open:
            self._terminate()

    # --- choices ------------------------------------------------------------------------------

    def _mistyped(self, where: str, value: Any, expected: str) -> None:
        """A field of the wrong JSON type: said precisely; the caller goes on without it."""
        self.malformed(f"{where} is a {type(value).__name__}, not {expected}")

    def _on_choice(self, raw: Any, position: int = 0) -> None:
        if type(raw) is not dict:
            self._mistyped(f"choices[{position}]", raw, "an object")
            return
        index = raw.get("index") or 0
        if type(index) is not int:
            self._mistyped(f"choices[{position}].index", index, "an integer")
            index = position
        choice = self._choices.get(index)
        delta = raw.get("delta")
        if delta is not None and type(delta) is not dict:
            self._mistyped(f"choices[{index}].delta", delta, "an object")
            delta = None  # the choice's finish_reason and filters are still read
        if choice is None:
            choice = self._choices[index] = _Choice(index)
            self._open += 1
            # A completion's message is the assistant's whatever `role` a server puts there
            # (Message.role is closed: the vocabulary has no other).
            self.emit("message.started", Message(index, "assistant"))
        if delta:
            for key, value in delta.items():
                if value is not None:
                    handler = _DELTA_FIELDS.get(key)
                    if handler is None:
                        self._unknown_once("delta." + key, f"choice {index}")
                    else:
                        handler(self, choice, value, delta)
        filters = raw.get("content_filter_results")
        if filters:
            self._on_content_filter(choice, filters)
        finish_reason = raw.get("finish_reason")
        if finish_reason:
            self._finish_choice(choice, finish_reason)

    def _on_content(self, choice: _Choice, text: Any, delta: dict[str, Any]) -> None:
        if type(text) is not str:
            self._mistyped(f"choices[{choice.index}].delta.content", text, "a string")
        elif text:  # OpenAI's role chunk carries content "" (fx:openai-python/e2aad469….bin)
            if choice.reasoning_key is not None:
                self._close_reasoning(choice)
            choice.text.add(text)
            self.emit("text.delta", Text(choice.index, choice.text_part, text))

    def _on_reasoning(self, choice: _Choice, text: Any, delta: dict[str, Any]) -> None:
        if type(text) is not str:
            self._mistyped(f"choices[{choice.index}].delta.reasoning", text, "a string")
        elif text:
            if "reasoning_details" in delta and delta["reasoning_details"]:
                # OpenRouter (and MiniMax) send the text beside reasoning_details as a plain
                # copy: the details, which carry signatures, are read instead.
                return
            if choice.reasoning_key is not RAW_STRING:  # open, text never is (it closes it)
                self._open_reasoning(choice, RAW_STRING, "raw")
            choice.reasoning.add(text)
            self.emit("reasoning.delta",
                      Reasoning(choice.index, choice.reasoning_part, "raw", text))

    def _open_reasoning(self, choice: _Choice, key: tuple[ReasoningForm, Any],
                        form: ReasoningForm) -> None:
        if choice.text:
            self._close_text(choice)
        if choice.reasoning_key != key:
            if choice.reasoning_key is not None:
                self._close_reasoning(choice)
            choice.reasoning_key = key
            choice.reasoning_form = form

    def _on_reasoning_details(self, choice: _Choice, details: Any,
                              delta: dict[str, Any]) -> None:
        # OpenRouter's structured reasoning (its reasoning-tokens guide): items of a type, each
        # with its `index` in the message's reasoning_details; a text item's signature comes in
        # a later fragment of the same index, encrypted items arrive whole.
        where = f"choices[{choice.index}].delta.reasoning_details"
        if type(details) is not list:
            self._mistyped(where, details, "a list")
            return
        for position, detail in enumerate(details):
            if type(detail) is not dict:
                self._mistyped(f"{where}[{position}]", detail, "an object")
                continue
            kind = detail.get("type")
            known = REASONING_DETAILS.get(kind) if type(kind) is str else None
            if known is not None:
                self._on_reasoning_detail(choice, detail, *known)
            elif kind == ENCRYPTED_DETAIL:
                self._on_encrypted_detail(choice, detail, f"{where}[{position}]")
            else:
                self._unknown_once(f"reasoning_details:{kind}", f"choice {choice.index}")

    def _on_reasoning_detail(self, choice: _Choice, detail: dict[str, Any], form: ReasoningForm,
                             field: str) -> None:
        text = detail.get(field)
        if text is not None and type(text) is not str:
            self._mistyped(f"choices[{choice.index}].delta.reasoning_details[].{field}", text,
                           "a string")
            text = None
        signature = detail.get("signature")
        if type(signature) is not str or not signature:
            signature = None
        if not text and signature is None:
            return  # nothing to add (the empty item beside a role chunk)
        self._open_reasoning(choice, (form, detail.get("index")), form)
        item_id = detail.get("id")
        if choice.reasoning_item is None and type(item_id) is str and item_id:
            choice.reasoning_item = item_id
        if signature is not None:
            # Pieces of one signature are joined, as Anthropic's signature_delta are.
            choice.signature = (choice.signature or "") + signature
        if text:
            choice.reasoning.add(text)
            self.emit("reasoning.delta", Reasoning(choice.index, choice.reasoning_part, form, text,
                                                   choice.reasoning_item))

    def _on_encrypted_detail(self, choice: _Choice, detail: dict[str, Any], where: str) -> None:
        data = detail.get("data")
        if type(data) is not str:
            if data is not None:
                self._mistyped(where + ".data", data, "a string")
            return
        if choice.text:
            self._close_text(choice)
        if choice.reasoning_key is not None:
            self._close_reasoning(choice)
        item_id = detail.get("id")
        # Opaque: valid only where it came from, sent back unchanged (like Responses'
        # encrypted_content and Claude's redacted_thinking).
        self.emit("reasoning.done", Reasoning(
            choice.index, choice.reasoning_part, "redacted", "",
            item_id if type(item_id) is str and item_id else None,
            encrypted_content=data, valid_for=self.valid_for()))
        choice.reasoning_part += 1

    def _on_reasoning_alias(self, choice: _Choice, text: Any, delta: dict[str, Any]) -> None:
        # Groq (fx:pydantic-ai/test_tool_use_failed_error_streaming.yaml), OpenRouter and vLLM
        # >= 0.19.1 name it `reasoning`; a server sending both names means one text, and
        # clients prefer reasoning_content (strands-agents/harness-sdk#2191).
        if delta.get("reasoning_content") is None:
            self._on_reasoning(choice, text, delta)

    def _on_refusal(self, choice: _Choice, text: Any, delta: dict[str, Any]) -> None:
        # The refusal's first chunk carries refusal "" (Chat Completions streaming reference); it
        # ends with finish_reason stop (fx:openai-python/569c877e….bin).
        if type(text) is str and text:
            self._close_parts(choice)
            choice.refusal.append(text)

    def _on_tool_calls(self, choice: _Choice, calls: Any, delta: dict[str, Any]) -> None:
        where = f"choices[{choice.index}].delta.tool_calls"
        if type(calls) is not list:
            self._mistyped(where, calls, "a list")
            return
        self._close_parts(choice)
        for position, call in enumerate(calls):
            if type(call) is not dict:
                self._mistyped(f"{where}[{position}]", call, "an object")
            else:
                function = call.get("function")
                if type(function) is not dict:
                    if function is not None:
                        self._mistyped(f"{where}[{position}].function", function, "an object")
                    function = {}
                self._on_tool_fragment(choice, call.get("index"), call.get("id"),
                                       function.get("name"), function.get("arguments"))

    def _on_function_call(self, choice: _Choice, call: Any, delta: dict[str, Any]) -> None:
        # The deprecated `functions` API: one call per choice, no id.
        if type(call) is not dict:
            self._mistyped(f"choices[{choice.index}].delta.function_call", call, "an object")
            return
        self._close_parts(choice)
        self._on_tool_fragment(choice, "function_call", None, call.get("name"),
                               call.get("arguments"))

    def _on_tool_fragment(self, choice: _Choice, key: Any, call_id: Any, name: Any,
                          arguments: Any) -> None:
        # Accumulate by the provider's index, which need not start at 0: Anthropic's compatible
        # endpoint starts at 1 after text (fx:vercel-ai/anthropic-fallback-tool-call.sse). A new
        # id under a known index is a new call (servers that send no index at all).
        call_id = call_id if type(call_id) is str and call_id else None
        if key is not None and type(key) not in (int, str):
            self._mistyped(f"choices[{choice.index}].delta.tool_calls[].index", key, "an integer")
            key = None
        tool = choice.tools.get(key)
        if call_id and (tool is None or tool.call_id != call_id) and not self._whole_message:
            # Servers that resend the header (id, name) on every delta may put it under another
            # index or none (LocalAI, LiteLLM's proxy, Fireworks): the id names the call.
            known = choice.tool_ids.get(call_id)
            if known is not None and (type(name) is not str or not name or known.name is None
                                      or name == known.name):
                tool = choice.tools[key] = known
        if tool is None or (call_id and tool.call_id and call_id != tool.call_id):
            tool = _Tool(len(choice.tool_order), call_id)
            choice.tools[key] = tool
            choice.tool_order.append(tool)
            if call_id:
                choice.tool_ids.setdefault(call_id, tool)
        elif call_id and tool.call_id is None:
            tool.call_id = call_id
            choice.tool_ids.setdefault(call_id, tool)
        if type(name) is str and name and tool.name is None:
            tool.name = name
        fragment = arguments if type(arguments) is str else ""
        if tool.started:
            if fragment:
                tool.arguments.add(fragment)
                assert tool.name is not None and tool.call_id is not None  # set by _start_tool
                self.emit("tool.call.delta", ToolCall(choice.index, tool.name, tool.call_id,
                                                      fragment))
            return
        if fragment:
            tool.arguments.add(fragment)
        if tool.name is not None:
            # Fragments that came before the name are flushed as one delta.
            self._start_tool(choice, tool)

    def _start_tool(self, choice: _Choice, tool: _Tool) -> None:
        tool.started = True
        if tool.name is None:
            tool.name = ""  # the provider never named it; kept, never dropped
        if tool.call_id is None:
            tool.call_id = self._synthesize_call_id(choice, tool)
        self.emit("tool.call.started", ToolCall(choice.index, tool.name, tool.call_id, ""))
        if tool.arguments:
            self.emit("tool.call.delta", ToolCall(choice.index, tool.name, tool.call_id,
                                                  tool.arguments.text()))

    def _synthesize_call_id(self, choice: _Choice, tool: _Tool) -> str:
        # Stable: the same frames give the same id. The call key (completion id, else the call's
        # first frame) keeps calls of later provider calls in the same run apart.
        return stable_id(self.run_id, self._call_key, choice.index, tool.slot, tool.name)

    def _on_annotations(self, choice: _Choice, annotations: Any, delta: dict[str, Any]) -> None:
        for note in annotations if type(annotations) is list else ():
            citation = note.get("url_citation") if type(note) is dict else None
            if type(citation) is dict:
                self.emit("citation", Citation(
                    output_index=choice.index, source_type="url", part_index=0,
                    start=citation.get("start_index"), end=citation.get("end_index"),
                    url=citation.get("url"), title=citation.get("title")))
            else:
                self._unknown_once("annotation", str(note)[:200])

    def _ignore(self, choice: _Choice, value: Any, delta: dict[str, Any]) -> None:
        pass

    def _on_content_filter(self, choice: _Choice, results: Any) -> None:
        # Azure annotates every choice chunk; a filtered category means the output was cut
        # (fx:vercel-ai/azure-model-router.1.chunks.txt shows the unfiltered shape).
        if choice.filtered or type(results) is not dict:
            return
        hits = _filtered_categories(results)
        if hits:
            choice.filtered = True
            self.emit("refusal", Refusal(
                text="", category="content_filter", output_index=choice.index,
                explanation="Azure content filter: " + ", ".join(hits)))

    def _on_prompt_filter(self, filters: Any) -> None:
        hits: list[str] = []
        for entry in filters if type(filters) is list else ():
            if type(entry) is dict and type(entry.get("content_filter_results")) is dict:
                hits.extend(_filtered_categories(entry["content_filter_results"]))
        if hits and not self._prompt_filtered:
            self._prompt_filtered = True
            self.emit("refusal", Refusal(
                text="", category="content_filter",
                explanation="Azure prompt filter: " + ", ".join(hits)))

    def _on_moderation(self, moderation: Any) -> None:
        # The moderation chunk of moderated completions (openai-python 3.57 ChatCompletionChunk):
        # a flag is reported; the finish_reason says what became of the output.
        if type(moderation) is not dict:
            return
        for side in ("input", "output"):
            report = moderation.get(side)
            results = report.get("results") if type(report) is dict else None
            for result in results if type(results) is list else ():
                if type(result) is dict and result.get("flagged"):
                    flagged = [name for name, hit in (result.get("categories") or {}).items()
                               if hit]
                    self.emit("refusal", Refusal(
                        text="", category="moderation",
                        explanation=f"{side} flagged: " + ", ".join(flagged)))

    # --- ends ---------------------------------------------------------------------------------

    def _close_parts(self, choice: _Choice) -> None:
        if choice.reasoning_key is not None:
            self._close_reasoning(choice)
        if choice.text:
            self._close_text(choice)

    def _close_text(self, choice: _Choice) -> None:
        self.emit("text.done", Text(choice.index, choice.text_part, choice.text.text()))
        self.elide_last(choice.text, "text", "text.delta")
        choice.text = Parts()
        choice.text_part += 1

    def _close_reasoning(self, choice: _Choice) -> None:
        signature = choice.signature
        self.emit("reasoning.done", Reasoning(
            choice.index, choice.reasoning_part, choice.reasoning_form, choice.reasoning.text(),
            choice.reasoning_item, signature, None,
            self.valid_for() if signature is not None else None))
        self.elide_last(choice.reasoning, "text", "reasoning.delta")
        choice.reasoning = Parts()
        choice.reasoning_part += 1
        choice.reasoning_key = choice.reasoning_item = choice.signature = None

    def _finish_choice(self, choice: _Choice, finish_reason: Any) -> None:
        if choice.finished:
            return  # some servers repeat the finish chunk
        choice.finished = True
        self._open -= 1
        choice.finish_reason = finish_reason if type(finish_reason) is str else None
        self._close_parts(choice)
        if choice.refusal:
            self.emit("refusal", Refusal(text="".join(choice.refusal),
                                         output_index=choice.index))
        for tool in choice.tool_order:
            if not tool.started:
                self._start_tool(choice, tool)
            assert tool.name is not None and tool.call_id is not None  # set by _start_tool
            self.emit_tool_call(choice.index, tool.name, tool.call_id, tool.arguments)
        self.emit("message.finished", Message(choice.index, "assistant"))

    def _outcome(self, choice: _Choice, ended: bool) -> RunAwaiting | RunFinished:
        raw = choice.finish_reason
        if choice.filtered:
            return RunFinished("incomplete", "content_filter", raw)
        if raw is None and not ended:
            return RunFinished("incomplete", "unknown", None)
        if raw in AWAITING_FINISH:
            return RunAwaiting("tool_results", raw)
        # A choice that ended normally without naming how is read as `stop` (raw_reason None).
        status, reason = (FINISH_REASONS.get(raw, ("incomplete", "other")) if raw is not None
                          else ("completed", "end_turn"))
        if status == "completed" and choice.tool_order:
            # A turn that asks for tools awaits their results whatever the literal says
            # (docs/design-notes.md, a turn that asks for tools); compatible servers end such turns
            # with `stop`.
            return RunAwaiting("tool_results", raw)
        if status == "completed" and choice.refusal:
            return RunFinished("completed", "refusal", raw)
        return RunFinished(status, reason, raw)

    def _terminate(self, ended: bool = False) -> None:
        """The call's terminal event: every open choice is flushed, then one run-level ending.
        ``ended``: the server said the output is over, so a choice without a finish_reason
        ended normally rather than being cut."""
        self._terminal = True
        self.stream_complete = True
        for choice in self._choices.values():
            if not choice.finished:
                self._finish_choice(choice, None)
        outcomes = [self._outcome(choice, ended) for choice in self._choices.values()]
        if self._prompt_filtered:
            outcomes.append(RunFinished("incomplete", "content_filter", None))
        if not outcomes:
            outcomes.append(RunFinished("incomplete", "unknown", None))  # [DONE] alone
        ending = min(outcomes, key=_rank)
        self.emit("run.awaiting" if isinstance(ending, RunAwaiting) else "run.finished", ending)

    def _on_error(self, error: Any) -> None:
        """An error body: HTTP error (before any chunk), mid-stream error frame, vLLM object."""
        if type(error) is not dict:
            error = {"message": str(error)}  # e.g. Ollama: {"error": "model not found"}
        code = error.get("code")
        # Groq's mid-stream error names its status in the body; the frame's own status is 200
        # for any error inside a stream.
        http_status = error.get("status_code")
        frame_status = self.frame.http_status if self._frame is not None else None
        if http_status is None and type(frame_status) is int and frame_status >= 400:
            http_status = frame_status
        if type(code) is int:
            http_status = http_status or code  # vLLM: {"object": "error", "code": 400}
            code = None
        http_status = http_status if type(http_status) is int else None
        raw_type = error.get("type")
        error_type, retryable = classify_error(code, raw_type, http_status=http_status)
        raw = code if code is not None else raw_type
        self.emit("error", Error(
            error_type=error_type, message=str(error.get("message") or ""),
            code=str(raw) if raw is not None else None, http_status=http_status,
            retryable=retryable))
        self._terminal = True
        self.stream_complete = True
        self.emit("run.finished", RunFinished("failed", "error", str(raw or error_type)))

    # --- run-level facts ----------------------------------------------------------------------

    def _start(self, doc: dict[str, Any]) -> None:
        object_id = doc.get("id") or None
        self._started = True
        self._object_id = object_id
        self._call_key = object_id or (self.frame.frame_id if self._frame else "")
        self.emit("run.started", RunStarted("in_progress", object_id))

    def _usage_object(self, usage: dict[str, Any], key: str) -> dict[str, Any]:
        value = usage.get(key)
        if value is None:
            return {}
        if type(value) is not dict:
            self._mistyped(f"usage.{key}", value, "an object")
            return {}
        return value

    def _usage_count(self, usage: dict[str, Any], key: str, where: str = "usage") -> int | None:
        value = usage.get(key)
        if value is None or type(value) is int:
            return value
        self._mistyped(f"{where}.{key}", value, "an integer")
        return None

    def _on_usage(self, usage: Any) -> None:
        if type(usage) is not dict:
            self._mistyped("usage", usage, "an object")
            return
        prompt = self._usage_count(usage, "prompt_tokens")
        completion = self._usage_count(usage, "completion_tokens")
        total = self._usage_count(usage, "total_tokens")
        prompt_details = self._usage_object(usage, "prompt_tokens_details")
        completion_details = self._usage_object(usage, "completion_tokens_details")
        reasoning = self._usage_count(completion_details, "reasoning_tokens",
                                      "usage.completion_tokens_details")
        output = completion
        if reasoning and prompt is not None and completion is not None \
                and total == prompt + completion + reasoning:
            # xAI counts reasoning outside completion_tokens: 307+26+227=560
            # (fx:vercel-ai/xai-tool-call.chunks.txt); output includes it everywhere.
            output = completion + reasoning
        if total is None and prompt is not None and output is not None:
            total = prompt + output
        cache_read = self._usage_count(prompt_details, "cached_tokens",
                                       "usage.prompt_tokens_details")
        if cache_read is None:
            cache_read = self._usage_count(usage, "prompt_cache_hit_tokens")  # DeepSeek
        units: dict[str, int] = {}
        sources = usage.get("num_sources_used")  # xAI live search, billed per source
        if type(sources) is int and sources:
            units["search_sources"] = sources
        self.emit("usage", Usage(
            input_tokens=prompt, output_tokens=output, cache_read_tokens=cache_read,
            cache_write_tokens=self._usage_count(prompt_details, "cache_write_tokens",
                                                 "usage.prompt_tokens_details"),
            reasoning_tokens=reasoning, total_tokens=total, server_tool_units=units))

    def _unknown_once(self, provider_type: str, detail: str | None = None) -> None:
        # Compatible servers repeat their extra fields on every chunk: report each once.
        if provider_type not in self._reported:
            self._reported.add(provider_type)
            self.unknown(provider_type, detail)


def _filtered_categories(results: dict[str, Any]) -> list[str]:
    return [name for name, result in results.items()
            if type(result) is dict and result.get("filtered")]


def _ids_of(tools: list[_Tool]) -> dict[str, _Tool]:
    ids: dict[str, _Tool] = {}
    for tool in tools:
        if tool.call_id:
            ids.setdefault(tool.call_id, tool)
    return ids


def _carries_output(delta: Any) -> bool:
    """Whether a delta holds output, not just a role, empty strings or empty argument
    fragments (vLLM's finish chunk repeats the call with arguments "")."""
    if type(delta) is not dict:
        return False
    for key, value in delta.items():
        if key == "role" or not value:
            continue
        if key == "tool_calls" and type(value) is list and not any(
                type(call) is dict and type(call.get("function")) is dict
                and call["function"].get("arguments") for call in value):
            continue
        return True
    return False


# Top-level `object` → handler. Anything else with `choices` is a chunk (Azure sends object "").
_OBJECTS: dict[str | None, Callable[[OpenAIChatAdapter, Any], None]] = {
    "chat.completion.chunk": OpenAIChatAdapter._on_chunk,
    "chat.completion": OpenAIChatAdapter._on_completion,
    # vLLM's error body: {"object": "error", "message", "type", "param", "code": 400}.
    "error": OpenAIChatAdapter._on_error,
}

# Delta field → handler(self, choice, value, delta). Null values never reach a handler. A field
# not listed is reported once as `unknown`.
_DELTA_FIELDS = {
    "content": OpenAIChatAdapter._on_content,
    "refusal": OpenAIChatAdapter._on_refusal,
    "reasoning_content": OpenAIChatAdapter._on_reasoning,  # xAI, DeepSeek (streaming reference)
    "reasoning": OpenAIChatAdapter._on_reasoning_alias,
    "reasoning_details": OpenAIChatAdapter._on_reasoning_details,  # OpenRouter
    "tool_calls": OpenAIChatAdapter._on_tool_calls,
    "function_call": OpenAIChatAdapter._on_function_call,
    "annotations": OpenAIChatAdapter._on_annotations,
    "role": OpenAIChatAdapter._ignore,  # read when the choice opens (message.started)
    # Groq gpt-oss names the harmony channel beside `reasoning`
    # (fx:pydantic-ai/test_tool_use_failed_error_streaming.yaml).
    "channel": OpenAIChatAdapter._ignore,
}


# What the gateway, the simulator and the registry know of this API (adapters/api_facts.py):
# no object to read back, cancel or resume (Chat Completions streaming reference); SSE events
# without an ``event:`` line.
FACTS = ApiFacts(
    api=OpenAIChatAdapter.api, provider=OpenAIChatAdapter.default_provider,
    config_provider="openai", auth_headers=bearer_auth,
    sse_content_type="text/event-stream; charset=utf-8",
)
