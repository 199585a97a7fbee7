"""OpenAI Responses API → ModelEvents.

Speaks ``POST /v1/responses``: the streamed SSE events, the ``Response`` object itself (a
non-streaming create, a background poll ``GET /v1/responses/{id}``, a cancel) and the HTTP error
body ``{"error": {...}}``, as of the OpenAPI spec @ f85dbe22 / openai-python @ e43b4224 (Aug 2026).
It follows the OpenAI Responses API reference, the Responses streaming events reference and
the Background mode guide (docs/design-notes.md). Compatible servers (Azure, LM Studio, OpenRouter,
DeepSeek) speak the same events; their quirks are handled where they occur.

One adapter follows one run, which may take several provider calls: every ``response.created``
(or a polled object with a new id) starts the next call of the same run. Within a call, items are
keyed by ``output_index`` (item ids are not stable behind some proxies, Responses API reference),
and every item is translated by one "sync" function that is given the item as the provider last
described it and emits only what was not emitted yet. Streams, successive polls and the final
``Response.output`` all go through it, which is how polls dedupe and how a terminal object fills in
whatever a stream left out.

More on this module: docs/adapters.md, ``adapters/openai_responses.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import orjson

from modelevents.adapters.accumulate import Parts
from modelevents.adapters.api_facts import (
    ApiFacts,
    FollowUp,
    Webhooks,
    bearer_auth,
    body_field_cursor,
)
from modelevents.adapters.base import DONE, Adapter, is_done, json_text, json_valid, stable_id
from modelevents.adapters.encodings import decode_base64
from modelevents.adapters.provider_errors import classify_error
from modelevents.schemas.events import (
    Approval,
    Citation,
    Envelope,
    Error,
    Hosted,
    Media,
    Message,
    ModelEvent,
    Reasoning,
    Refusal,
    RunAwaiting,
    RunFinished,
    RunStarted,
    RunStatus,
    Structured,
    Text,
    ToolCall,
    ToolResult,
    Usage,
)
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.pieces import split_events
from modelevents.schemas.vocabulary import (
    HOSTED_STATUSES,
    HOSTED_TOOL_TYPES,
    Executor,
    FinishReason,
    HostedStatus,
    HostedToolType,
    ReasoningForm,
    RunStartedStatus,
    TerminalStatus,
    normalized,
)

# --- mappings (checked against the OpenAI Responses streaming events reference in one glance) ---

# Response.status values that keep the run going (Responses API reference).
# (a mapping onto itself, so that the status read is typed as the vocabulary's once found here)
LIVE_STATUSES: dict[str, RunStartedStatus] = {"queued": "queued", "in_progress": "in_progress"}

# Terminal Response.status → (run.finished status, normalized reason). "completed" may instead
# become run.awaiting (tool calls or an MCP approval pending), or reason "refusal"; "incomplete"
# takes its reason from incomplete_details (INCOMPLETE_REASONS); "failed" keeps error.code raw.
TERMINAL_STATUSES: dict[str, tuple[TerminalStatus, FinishReason]] = {
    "completed": ("completed", "end_turn"),
    "incomplete": ("incomplete", "other"),
    "failed": ("failed", "error"),
    "cancelled": ("cancelled", "cancelled"),
}

# incomplete_details.reason → normalized reason (Responses API reference).
INCOMPLETE_REASONS: dict[str, FinishReason] = {
    "max_output_tokens": "max_tokens",
    "max_tokens": "max_tokens",  # the spec's own example says this, against its enum
    "content_filter": "content_filter",
}

# Terminal stream event → the status it announces. There is no response.cancelled stream event
# in the spec (Responses API reference); it is accepted in case a server sends one.
TERMINAL_EVENTS = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
    "response.cancelled": "cancelled",
}

# Output items that are tools the provider runs (Responses API reference): item type → (tool_type,
# billable unit, quantity per call, executor, argument fields). Whatever else the item carries
# (minus bookkeeping) is the evidence.
HOSTED_ITEMS: dict[str, tuple[HostedToolType, str | None, float | None, Executor,
                             tuple[str, ...]]] = {
    "web_search_call": ("web_search", "call", 1, "provider", ()),
    "file_search_call": ("file_search", "call", 1, "provider", ()),
    "code_interpreter_call": ("code_execution", "container", None, "provider", ("code",)),
    "image_generation_call": ("image_generation", "image", 1, "provider", ()),
    "mcp_call": ("mcp", None, None, "provider", ("arguments",)),
    "mcp_list_tools": ("mcp", None, None, "provider", ()),
    "tool_search_call": ("tool_search", None, None, "provider", ("arguments",)),
    # shell_call is the provider's when its environment is a container, else the client's.
    "shell_call": ("shell", "container", None, "provider", ("action", "environment")),
}
# A hosted item's status → Hosted.status: the vocabulary's words as they are, the item types'
# own words for work under way (web search "searching", code interpreter "interpreting", image
# generation "generating", MCP "calling") in_progress; any other word is no status (None).
_WORKING_STATUSES = frozenset({"searching", "interpreting", "generating", "calling"})


def _hosted_status(raw: str | None) -> HostedStatus | None:
    return "in_progress" if raw in _WORKING_STATUSES else normalized(raw, HOSTED_STATUSES, None)


# Output items carrying the outcome of an earlier hosted call item (matched by call_id).
HOSTED_RESULT_ITEMS = frozenset({"shell_call_output", "tool_search_output"})
# Output items in which the provider asks the application to run one of the provider's tools
# (apply_patch, local shell, computer use; a shell_call whose environment is local or not given):
# item type → the tool.call's tool_name. The application runs it like a function call, so it is a
# tool.call whose arguments are what the item carries beside its bookkeeping (the operation, the
# action, the safety checks), and the response then awaits tool results.
CLIENT_TOOL_ITEMS = {"apply_patch_call": "apply_patch", "local_shell_call": "local_shell",
                     "computer_call": "computer", "shell_call": "shell"}
# What the application's run of such a tool gave (an input item, in listings): a tool.result.
CLIENT_RESULT_ITEMS = {"apply_patch_call_output": "apply_patch",
                       "local_shell_call_output": "local_shell",
                       "computer_call_output": "computer"}
# Item fields that identify or stage an item rather than describe the tool's work.
_BOOKKEEPING = frozenset({"id", "type", "status", "call_id", "name", "server_label", "result",
                          "approval_request_id", "created_by", "caller"})

# Frames of a response held while an earlier sequence_number is missing: enough for a log replayed
# out of order or a resumed stream interleaved with the original; bounded so state stays small
# (a held frame keeps its body) and a gap that never closes is reported soon.
REORDER_WINDOW = 16

IMAGE_MIME = {"png": "image/png", "webp": "image/webp", "jpeg": "image/jpeg", "jpg": "image/jpeg"}


# What reading a field of an unexpected shape raises: reported as `unexpected_shape`.
_SHAPE_ERRORS = (AttributeError, KeyError, TypeError, ValueError, IndexError)


# --- per-call state ----------------------------------------------------------------------------


class _Part:
    """One content part (message text / refusal, reasoning text) or reasoning summary part."""

    __slots__ = ("chunks", "done", "citations")

    def __init__(self) -> None:
        self.chunks = Parts()
        self.done = False
        self.citations = 0  # annotations emitted so far (annotation_index is dense)

    def text(self) -> str:
        return self.chunks.text()


class _Item:
    """One output item of the current call, keyed by output_index."""

    __slots__ = ("index", "type", "id", "announced", "done", "parts", "summaries", "args", "name",
                 "call_id", "encrypted_done", "hosted_args", "executor", "extra")

    def __init__(self, index: int, item_type: str | None, item_id: str | None) -> None:
        self.index = index
        self.type = item_type
        self.id = item_id
        self.announced = False  # message.started / tool.call.started / hosted.call emitted
        self.done = False
        self.parts: dict[int, _Part] = {}
        self.summaries: dict[int, _Part] = {}
        self.args = Parts()  # streamed argument / input / code / diff fragments
        self.name: str | None = None
        self.call_id: str | None = None
        self.encrypted_done = False
        self.hosted_args: str | None = None
        self.executor: str | None = None
        self.extra: dict[str, Any] = {}  # audio fragments, approval flag


class _Call:
    """One provider call (one Response) within the run."""

    __slots__ = ("response_id", "aliases", "status", "items", "by_id", "finished", "errored",
                 "refused", "awaits_tools", "approvals", "text_format", "calls", "tool_units")

    # A state stored before a slot existed (services/plain_state.py) reads with these.
    state_defaults: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "aliases": lambda call: {call.response_id} if call.response_id is not None else set(),
    }

    def __init__(self, response_id: str | None) -> None:
        self.response_id = response_id
        # Every id this response was given: behind some proxies each event names it anew (Responses
        # API reference).
        self.aliases: set[str] = {response_id} if response_id is not None else set()
        self.status: str | None = None
        self.items: dict[int, _Item] = {}
        self.by_id: dict[str | None, int] = {}
        self.finished = False
        self.errored = False  # an `error` event was already emitted for this call
        self.refused = False
        self.awaits_tools = False
        self.approvals: set[str] = set()  # pending mcp_approval_request ids
        self.text_format: dict[str, Any] | None = None
        self.calls: dict[str, _Item] = {}  # hosted call items by call_id, for result items
        self.tool_units: dict[str, int] = {}


# A held frame: the frame, its decoded document, and what decoding already said about it.
_Held = tuple[ProviderFrame, dict[str, Any], list[ModelEvent]]


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if type(value) is int else None


class OpenAIResponsesAdapter(Adapter):
    name = "openai_responses"
    # What each revision's events differ in: 2, frames put back in sequence_number order;
    # sequence_gap errors. 3, rotating ids are one response; client-executed tools are
    # tool.call; empty arguments "{}"; a mistyped item or output_index is a malformed_frame.
    # 4, hosted statuses and result types in the closed vocabulary; non-object arguments are
    # not valid.
    revision = "4"
    api = "openai-responses"
    default_provider = "openai"

    def __init__(self, run_id: str, tenant: str = "default", provider: str | None = None,
                 model: str | None = None) -> None:
        Adapter.__init__(self, run_id, tenant, provider, model)  # no super() object per stream
        self._call = _Call(None)
        self._finished_ids: set[str] = set()
        # Sequencing (see the module docstring). `_next_seq` is the number expected next in the
        # current response, None when unknown (a call adopted from a poll: the next frame sets
        # it). `_fast_seq` is what the hot path compares against: `_next_seq` while nothing is
        # held, None while frames are held, so that every frame (also the one that closes the
        # gap, which must drain the held ones) takes the slow path.
        self._next_seq: int | None = 0
        self._fast_seq: int | None = 0
        self._held: dict[int, _Held] = {}
        # The response whose numbering `_next_seq` follows, when its frames are held before the
        # call adopted it (its response.created is late); else None: the current call's.
        self._seq_rid: str | None = None

    @classmethod
    def recognizes(cls, doc: Any) -> bool:
        if not isinstance(doc, dict):
            return False
        event_type = doc.get("type")
        if isinstance(event_type, str):
            # The nested `error` event looks like Anthropic's; only OpenAI's is sequenced.
            return event_type.startswith("response.") or (
                event_type == "error" and "sequence_number" in doc)
        return doc.get("object") == "response"

    # --- decoding ---------------------------------------------------------------------------

    def undecodable(self, frame: ProviderFrame, error: orjson.JSONDecodeError) -> Any:
        # Broken UTF-8 never gets here: the base repaired it (adapters/base.py).
        if is_done(frame.body):
            # OpenRouter ends its Responses stream so (compatible servers); OpenAI itself never
            # does (streaming events reference).
            return DONE
        return super().undecodable(frame, error)

    # --- dispatch ---------------------------------------------------------------------------

    def handle(self, doc: Any) -> None:
        if doc is DONE:
            return
        if type(doc) is not dict:
            self.unknown("(not a JSON object)", detail=type(doc).__name__)
            return
        seq = doc.get("sequence_number")
        if type(seq) is not int:
            self._unsequenced(doc)
            return
        if seq != self._fast_seq:
            self._resequence(doc, seq)
            return
        # The hot path: the next frame in order, nothing held. Kept flat (`_dispatch` inlined).
        self._fast_seq = self._next_seq = seq + 1
        event_type = doc.get("type")
        try:
            handler = self._DISPATCH.get(event_type)
        except TypeError:  # a list or object as the type: unhashable, and no event's name
            handler = None
        if handler is None:
            self._fall_through(doc, event_type)
            return
        try:
            handler(self, doc)
        except _SHAPE_ERRORS as exc:
            self._guard_caught(exc, str(event_type))

    def _dispatch(self, doc: dict[str, Any]) -> None:
        """Translate a decoded event (what the hot path of ``handle`` does inline)."""
        event_type = doc.get("type")
        try:
            handler = self._DISPATCH.get(event_type)
        except TypeError:  # unhashable (a list or object): what handle's lookup does
            handler = None
        if handler is None:
            self._fall_through(doc, event_type)
            return
        try:
            handler(self, doc)
        except _SHAPE_ERRORS as exc:
            # Caught here, not only by the base's guard around handle: a frame released from
            # the reorder window must not stop the frames released after it.
            self._guard_caught(exc, str(event_type))

    def _unsequenced(self, doc: dict[str, Any]) -> None:
        """A document without a sequence number: translated as it comes."""
        call = self._call
        if self._held and (rid := self._other_response(doc)) and rid not in self._finished_ids:
            self._release_before(doc, rid, None)
        else:
            self._dispatch(doc)
        if self._call is not call:
            # A poll or an error body began the next call: whatever is streamed for it next
            # (a resumed stream starts anywhere) sets the expectation.
            self._next_seq = None
            self._fast_seq = None
            self._seq_rid = None

    # --- sequencing (streaming events reference, OpenAI Background mode guide)
    # ----------------------------------------------------------------

    def _resequence(self, doc: dict[str, Any], seq: int) -> None:
        """The slow path: a frame out of order, a duplicate, the first frame of another response,
        or any frame while others are held."""
        expected = self._next_seq
        rid = self._other_response(doc)
        if rid is not None:
            if rid in self._finished_ids:
                return  # a late replay of a response already finished
            # The next response (streaming events reference: a log may hold several): numbering
            # starts afresh at 0, and nothing more of the current one can come.
            if self._held:
                self._release_before(doc, rid, seq)
                return
            expected = self._next_seq = 0
            self._seq_rid = rid
        elif expected is None:
            expected = self._next_seq = seq
        elif seq < expected or seq in self._held:
            # Seen already: a resumed stream replays events re-serialised (other bytes, so
            # another frame id), or a frame arrived after its gap was reported (by then the
            # frames after it were translated without it; the sequence_gap error stands).
            return
        out = self._out  # what feed() returns for this frame
        held: _Held = (self.frame, doc, out[:])  # with what undecodable() already said of it
        out.clear()
        if seq == expected:
            self._translate(held, out)
            self._drain(out)
        else:
            self._held[seq] = held
            while len(self._held) > REORDER_WINDOW:
                self._skip_gap(out)
        self._fast_seq = None if self._held else self._next_seq

    def _other_response(self, doc: dict[str, Any]) -> str | None:
        """The id of the response a lifecycle event (or a polled object) is about, when it is
        another response than the one whose numbering is followed; else None."""
        response = doc.get("response")
        if type(response) is not dict:
            if doc.get("object") != "response":
                return None
            response = doc
        rid = response.get("id")
        current = self._seq_rid or self._call.response_id
        if type(rid) is not str or current is None or rid == current or \
                rid in self._call.aliases:
            return None
        if "type" in doc and self._renamed(doc, rid):
            return None
        return rid

    def _renamed(self, doc: dict[str, Any], rid: str) -> bool:
        """A lifecycle event naming the response being followed by yet another id: GitHub
        Copilot's endpoint and proxies before it give ids anew on every event (Responses API
        reference), while one stream's sequence_number runs 0..n. Only what really starts a response
        starts one: its response.created, or any lifecycle event once the response followed has
        ended. The id of
        a response that ended is never another name of the one followed (a late replay)."""
        if doc.get("type") == "response.created" or type(doc.get("sequence_number")) is not int \
                or rid in self._finished_ids:
            return False
        if not self._follows_call():
            return True  # the response followed has not begun here yet: it has not ended
        call = self._call
        return call.response_id is not None and not call.finished

    def _follows_call(self) -> bool:
        """Whether the numbering followed is the current call's (else its response.created is
        late: the response whose frames are held or awaited is not adopted yet)."""
        return self._seq_rid is None or self._seq_rid in self._call.aliases

    def _release_before(self, doc: dict[str, Any], rid: str, seq: int | None) -> None:
        """Response `rid` begins while frames of the current one are held: those can only be
        translated now, with their gaps reported, before this frame."""
        out = self._out
        this: _Held = (self.frame, doc, out[:])
        out.clear()
        self._release(out)
        self._next_seq = 0 if seq is not None else None
        self._seq_rid = rid
        if seq is None or seq == 0:
            self._translate(this, out)
        else:
            self._held[seq] = this
        self._fast_seq = None if self._held else self._next_seq

    def _release(self, out: list[ModelEvent]) -> None:
        """Translate every held frame in order, reporting each gap once."""
        while self._held:
            self._skip_gap(out)

    def _skip_gap(self, out: list[ModelEvent]) -> None:
        """Give up waiting for the lowest gap: report it, translate what follows it."""
        first = min(self._held)
        self._translate(self._held.pop(first), out, gap_from=self._next_seq)
        self._drain(out)

    def _drain(self, out: list[ModelEvent]) -> None:
        """Translate the held frames that follow on in order."""
        held = self._held
        while held:
            entry = held.pop(self._next_seq, None)  # type: ignore[arg-type]
            if entry is None:
                return
            self._translate(entry, out)

    def _translate(self, held: _Held, out: list[ModelEvent], gap_from: int | None = None
                   ) -> None:
        """Translate a frame as feed() would, in its own context (envelope, frame id, cursor,
        event index), appending its events to `out`."""
        frame, doc, events = held
        self.carry(frame)  # released with another frame's events: cut as its own feed would
        self._frame = frame
        self._source_id = frame.frame_id
        self._cursor = frame.cursor
        self._envelope = Envelope(frame.content_type, frame.body)
        outer, self._out = self._out, events
        try:
            seq = doc.get("sequence_number")
            if type(seq) is int:
                if gap_from is not None and gap_from < seq:
                    self._gap(doc, gap_from, seq - 1)
                self._next_seq = seq + 1
            self._dispatch(doc)
        except Exception as exc:
            # The base's guard around handle() is not around close(): a held frame that cannot
            # be read is reported with its own events, and the frames after it still translate.
            self._guard_caught(exc)
        # What is emitted after this frame (the type check's error) goes to the caller's list
        # again, not to this frame's, which is already counted.
        self._out = outer
        out += events

    def _gap(self, doc: dict[str, Any], first: int, last: int) -> None:
        """One error for the numbers first..last, emitted with the frame that follows them."""
        response = doc.get("response")
        rid = response.get("id") if type(response) is dict else None
        rid = rid or self._seq_rid or self._call.response_id or "(not yet identified)"
        numbers = str(first) if first == last else f"{first}..{last}"
        count = last - first + 1
        self.emit("error", Error(
            error_type="sequence_gap", retryable=False,
            message=f"response {rid}: the event{'s' if count > 1 else ''} with sequence_number "
                    f"{numbers} never arrived; the stream was translated without "
                    f"{'them' if count > 1 else 'it'}"))

    def close(self) -> list[ModelEvent]:
        if not self._held or self._closed:
            return super().close()
        # The input ended: nothing held can be completed any more.
        out: list[ModelEvent] = []
        self._out = out
        self._release(out)
        self._fast_seq = self._next_seq
        # Released here, not by feed(): the base's type check (adapters/base.py) has not seen
        # these events, and one that does not fit its schema must not reach the encoder.
        self._typed(out)
        self._carries_large = False  # cut here
        return split_events(out) + super().close()  # what a large held frame gave, in pieces

    def _fall_through(self, doc: dict[str, Any], event_type: Any) -> None:
        if event_type is None:
            if isinstance(doc.get("error"), dict):
                self._http_error(doc["error"])
                return
            if doc.get("object") == "response" or ("output" in doc and "status" in doc):
                self._on_response(doc, None)
                return
        self.unknown(str(event_type), detail=None)

    # --- lifecycle --------------------------------------------------------------------------

    def _on_lifecycle(self, doc: dict[str, Any]) -> None:
        event_type = doc["type"]
        response = doc.get("response")
        if not isinstance(response, dict):
            if doc.get("object") == "event" or (
                    isinstance(doc.get("data"), dict) and "response" not in doc):
                # A webhook notification (OpenAI Webhooks guide:
                # {"object":"event","type":"response.completed",
                # "data":{"id":...}}, `object` optional) names the event but carries only the
                # response id. It is understood and deliberately says nothing: the gateway
                # fetches GET /v1/responses/{id}, and that poll frame carries the content and
                # the terminal state (and dedupes against a stream that already said it).
                return
            else:
                self.unknown(event_type, detail="lifecycle event without a response object")
            return
        if event_type == "response.created":
            call = self._call
            rid = response.get("id")
            if rid is not None and rid in call.aliases:
                return  # the same response created twice: a replay
            self._on_response(response, None)
            return
        rid = response.get("id")
        if type(rid) is str and rid not in self._call.aliases and self._follows_call() and \
                self._renamed(doc, rid):
            self._call.aliases.add(rid)  # the response followed, under another id
        status = TERMINAL_EVENTS.get(event_type) or event_type.rpartition(".")[2]
        self._on_response(response, status)

    def _on_response(self, response: dict[str, Any], status: str | None) -> None:
        """A Response object: from a lifecycle event, a poll or a non-streaming create."""
        call = self._adopt(response)
        if call is None:
            return
        status = status or response.get("status")
        if status in LIVE_STATUSES:
            if call.status != status:
                call.status = status
                self.emit("run.status", RunStatus(LIVE_STATUSES[status], status))
        elif status not in TERMINAL_STATUSES:
            self.unknown(f"response.status:{status}", detail=_str(response.get("id")))
        output = response.get("output")
        if isinstance(output, list) and output:
            self._sync_output(output, status in TERMINAL_STATUSES)
        if status in TERMINAL_STATUSES:
            self._terminate(call, response, status)

    def _adopt(self, response: dict[str, Any]) -> _Call | None:
        """The call this Response belongs to; starts the next call of the run when it is new."""
        rid = response.get("id")
        call = self._call
        model = response.get("model")
        if isinstance(model, str) and model:
            self.model = model
        if rid is not None and rid in call.aliases:
            return call
        if rid in self._finished_ids:
            return None  # a late poll of a call already finished
        status = response.get("status")
        live = LIVE_STATUSES.get(status, "in_progress") if type(status) is str else "in_progress"
        if call.response_id is None and not call.finished:
            call.response_id = rid  # events of this response arrived before its object
            if rid is not None:
                call.aliases.add(rid)
        else:
            if not call.finished:
                # The previous call never reached its terminal event: say so where it happened.
                self.emit("error", Error(
                    error_type="stream_truncated", retryable=True,
                    message=f"response {call.response_id} ended without its terminal event "
                            f"before response {rid} started; its outcome is unknown"))
            followed = None if self._follows_call() else self._seq_rid
            call = self._call = _Call(rid)
            if followed is not None:
                call.aliases.add(followed)  # the response numbered so far, named anew
        self.stream_complete = False
        call.status = live
        text = response.get("text")
        if isinstance(text, dict) and isinstance(text.get("format"), dict):
            call.text_format = text["format"]
        # Also the next provider call of the same run (after tool results, an approval, ...):
        # the run machine banks the previous call's usage on it.
        self.emit("run.started", RunStarted(live, _str(rid)))
        return call

    def _sync_output(self, output: list[Any], terminal: bool) -> None:
        call = self._call
        last = len(output) - 1
        for position, item in enumerate(output):
            if not isinstance(item, dict):
                continue
            item_id = item.get("id")
            index = call.by_id.get(item_id) if item_id is not None else None
            if index is None:
                known = call.items.get(position)
                if known is None or known.type == item.get("type"):
                    # Same slot: OpenRouter renames items between .done and completed (Responses
                    # API reference).
                    index = position
                else:
                    index = max(call.items) + 1
            state = call.items.get(index)
            if state is not None and state.done:
                continue
            status = item.get("status")
            final = terminal or status in ("completed", "failed", "incomplete") or (
                status is None and position < last)
            self._sync_item(index, item, final)

    def _terminate(self, call: _Call, response: dict[str, Any], status: str) -> None:
        if call.finished:
            return
        call.finished = True
        self._finished_ids.update(call.aliases)
        self.stream_complete = True
        usage = response.get("usage")
        if isinstance(usage, dict):
            self._usage(usage, call)
        final_status, reason = TERMINAL_STATUSES[status]
        raw: str | None = status
        if status == "failed":
            error = response.get("error")
            if not isinstance(error, dict):
                error = {}
            if not call.errored:  # the `error` event before response.failed said it already
                self._error(error, None)
            raw = _str(error.get("code")) or _str(error.get("type"))
        elif status == "incomplete":
            details = response.get("incomplete_details")
            raw = _str(details.get("reason")) if isinstance(details, dict) else None
            reason = INCOMPLETE_REASONS.get(raw or "", reason)
        elif status == "completed":
            # A response that ends asking for something is not the end of the run (DESIGN).
            if call.approvals:
                self.emit("run.awaiting", RunAwaiting("approval", "mcp_approval_request"))
                return
            if call.awaits_tools:
                self.emit("run.awaiting", RunAwaiting("tool_results", "completed"))
                return
            if call.refused:
                reason = "refusal"
        self.emit("run.finished", RunFinished(final_status, reason, raw))

    def _usage(self, usage: dict[str, Any], call: _Call) -> None:
        # Responses API reference: cached ⊂ input and reasoning ⊂ output; total = input + output.
        # Per response.
        inputs = usage.get("input_tokens_details")
        outputs = usage.get("output_tokens_details")
        inputs = inputs if isinstance(inputs, dict) else {}
        outputs = outputs if isinstance(outputs, dict) else {}
        self.emit("usage", Usage(  # the fields in their order (positional: see base.emit)
            _int(usage.get("input_tokens")),
            _int(usage.get("output_tokens")),
            _int(inputs.get("cached_tokens")),  # cache_read_tokens
            _int(inputs.get("cache_write_tokens")),
            _int(outputs.get("reasoning_tokens")),
            _int(usage.get("total_tokens")),
            dict(call.tool_units)))  # server_tool_units

    # --- errors -----------------------------------------------------------------------------

    def _error(self, error: dict[str, Any], http_status: int | None) -> None:
        code = _str(error.get("code"))
        raw_type = _str(error.get("type"))
        error_type, retryable = classify_error(code, raw_type, http_status=http_status)
        self.emit("error", Error(
            error_type=error_type, message=_str(error.get("message")) or "",
            code=code or raw_type, http_status=http_status, retryable=retryable))

    def _on_error_event(self, doc: dict[str, Any]) -> None:
        # OpenAI Error codes guide: the wire nests the fields under "error"; the spec has them
        # flat. Read both.
        nested = doc.get("error")
        if not isinstance(nested, dict):
            nested = {"code": doc.get("code"), "message": doc.get("message")}  # `type` is "error"
        self._error(nested, None)
        self._call.errored = True

    def _http_error(self, error: dict[str, Any]) -> None:
        """An HTTP error body (OpenAI Error codes guide), or a mid-stream `{"error":...}` the SDK
        raises on (streaming events reference):
        either way the provider call is over."""
        frame = self._frame
        self._error(error, frame.http_status if frame is not None else None)
        call = self._call
        if call.finished:
            # A later request of the run failed (e.g. the POST carrying the tool results).
            call = self._call = _Call(None)
        call.finished = True
        self.stream_complete = True
        self.emit("run.finished", RunFinished(
            status="failed", reason="error",
            raw_reason=_str(error.get("code")) or _str(error.get("type"))))

    # --- items ------------------------------------------------------------------------------

    def _item_state(self, index: int, item_id: Any, item_type: Any) -> _Item:
        call = self._call
        state = call.items.get(index)
        if state is None:
            state = call.items[index] = _Item(index, item_type, _str(item_id))
        elif state.type is None:
            state.type = item_type
        if isinstance(item_id, str):
            call.by_id[item_id] = index
            if state.id is None:
                state.id = item_id
        return state

    def _state_for(self, doc: dict[str, Any]) -> _Item:
        """The item an item-level event is about: by output_index, else by item_id."""
        index = doc.get("output_index")
        call = self._call
        if type(index) is not int:
            index = call.by_id.get(doc.get("item_id"), -1)
        state = call.items.get(index)
        if state is None:
            state = self._item_state(index, doc.get("item_id"), None)
        return state

    def _on_item_added(self, doc: dict[str, Any]) -> None:
        item = doc.get("item")
        if isinstance(item, dict):
            self._sync_item(self._index_of(doc, item), item, False)
        else:
            self.malformed(f"{doc['type']}.item is a {type(item).__name__}, not an object")

    def _on_item_done(self, doc: dict[str, Any]) -> None:
        item = doc.get("item")
        if isinstance(item, dict):
            self._sync_item(self._index_of(doc, item), item, True)
        else:
            self.malformed(f"{doc['type']}.item is a {type(item).__name__}, not an object")

    def _index_of(self, doc: dict[str, Any], item: dict[str, Any]) -> int:
        index = doc.get("output_index")
        if type(index) is int:
            return index
        if index is not None:
            self.malformed(f"{doc['type']}.output_index is a {type(index).__name__}, "
                           "not an integer")
        return self._call.by_id.get(item.get("id"), len(self._call.items))

    def _sync_item(self, index: int, item: dict[str, Any], final: bool) -> None:
        item_type = item.get("type")
        state = self._item_state(index, item.get("id"), item_type)
        if state.done:
            return
        sync = self._ITEM_SYNC.get(item_type)
        if sync is not None:
            sync(self, state, item, final)
        elif item_type in CLIENT_TOOL_ITEMS and self._runs_locally(state, item):
            self._sync_client_tool(state, item, final)
        elif item_type in HOSTED_ITEMS:
            self._sync_hosted(state, item, final)
        elif item_type in HOSTED_RESULT_ITEMS or item_type in CLIENT_RESULT_ITEMS:
            self._sync_hosted_result(state, item, final)
        elif not state.announced:
            state.announced = True
            self.unknown(f"output_item:{item_type}", detail=_str(item.get("id")))
        if final:
            state.done = True

    # message ---------------------------------------------------------------------------------

    def _announce_message(self, state: _Item, item: dict[str, Any] | None = None) -> None:
        state.announced = True
        if state.type is None:
            state.type = "message"  # a stream resumed after the item was added
        item = item or {}
        self.emit("message.started", Message(state.index, "assistant", state.id,
                                             _str(item.get("phase"))))

    def _sync_message(self, state: _Item, item: dict[str, Any], final: bool) -> None:
        if not state.announced:
            self._announce_message(state, item)
        content = item.get("content")
        texts = []
        if isinstance(content, list):
            for content_index, part in enumerate(content):
                if isinstance(part, dict):
                    self._sync_content_part(state, content_index, part, final)
                    if part.get("type") == "output_text" and isinstance(part.get("text"), str):
                        texts.append(part["text"])
        if not final:
            return
        text_format = self._call.text_format
        if texts and text_format and text_format.get("type") == "json_schema":
            payload = "".join(texts)
            self.emit("structured.done", Structured(
                output_index=state.index, json=payload, valid=json_valid(payload),
                schema_name=_str(text_format.get("name"))))
        self.emit("message.finished", Message(state.index, "assistant", state.id,
                                              _str(item.get("phase"))))

    def _sync_content_part(self, state: _Item, content_index: int, part: dict[str, Any],
                           final: bool) -> None:
        part_type = part.get("type")
        if part_type == "output_text":
            self._sync_text(state, content_index, _str(part.get("text")) or "",
                            part.get("annotations"), final)
        elif part_type == "refusal":
            self._sync_refusal(state, content_index, _str(part.get("refusal")) or "", final)
        elif part_type == "reasoning_text":
            # LM Studio, OpenRouter and DeepSeek put raw reasoning in content parts (streaming
            # events reference).
            self._sync_reasoning(state, state.parts, content_index, "raw",
                                 _str(part.get("text")) or "", final)
        elif part_type == "summary_text":
            self._sync_reasoning(state, state.summaries, content_index, "summary",
                                 _str(part.get("text")) or "", final)
        else:
            part_state = self._part(state.parts, content_index)
            if not part_state.done:  # said once, not on every snapshot of the part
                part_state.done = True
                self.unknown(f"content_part:{part_type}", detail=state.id)

    def _part(self, table: dict[int, _Part], index: int) -> _Part:
        part = table.get(index)
        if part is None:
            part = table[index] = _Part()
        return part

    def _sync_text(self, state: _Item, content_index: int, text: str, annotations: Any,
                   final: bool) -> None:
        part = self._part(state.parts, content_index)
        if not part.done:
            self._catch_up(part, text, "text.delta", state, content_index)
        if isinstance(annotations, list):
            for annotation_index in range(part.citations, len(annotations)):
                self._citation(state, content_index, annotations[annotation_index])
            part.citations = max(part.citations, len(annotations))
        if final and not part.done:
            part.done = True
            self.emit("text.done", Text(state.index, content_index, text, state.id))

    def _catch_up(self, part: _Part, text: str, kind: str, state: _Item, index: int,
                  form: ReasoningForm | None = None) -> None:
        """Emit the part of `text` not yet streamed, when what was streamed is its prefix."""
        if part.chunks.elided:
            # Too much streamed to hold: only its size is known; what the snapshot holds beyond
            # that many bytes is what was not streamed.
            encoded = text.encode()
            if len(encoded) <= part.chunks.size:
                return
            rest = encoded[part.chunks.size:].decode("utf-8", "replace")
        else:
            sofar = part.text()
            if len(text) <= len(sofar) or not text.startswith(sofar):
                return
            rest = text[len(sofar):]
        part.chunks.add(rest)
        if form is None:
            self.emit(kind, Text(state.index, index, rest, state.id))
        else:
            self.emit(kind, Reasoning(state.index, index, form, rest, state.id))

    def _on_text_delta(self, doc: dict[str, Any]) -> None:
        delta = doc.get("delta")
        if not delta or type(delta) is not str:
            return  # an empty delta says nothing
        # The hot path: one lookup by output_index in the common case.
        output_index = doc.get("output_index")
        state = self._call.items.get(output_index) if type(output_index) is int else None
        if state is None or not state.announced:
            state = self._state_for(doc)
            if not state.announced:
                self._announce_message(state)
        content_index = doc.get("content_index", 0)
        part = state.parts.get(content_index)
        if part is None:
            part = state.parts[content_index] = _Part()
        part.chunks.add(delta)
        self.emit("text.delta", Text(state.index, content_index, delta, state.id))

    def _on_text_done(self, doc: dict[str, Any]) -> None:
        state = self._state_for(doc)
        if not state.announced:
            self._announce_message(state)
        self._sync_text(state, doc.get("content_index", 0), _str(doc.get("text")) or "", None,
                        True)

    def _on_content_part(self, doc: dict[str, Any]) -> None:
        part = doc.get("part")
        if not isinstance(part, dict):
            return
        state = self._state_for(doc)
        if state.type is None and part.get("type") in ("output_text", "refusal"):
            self._announce_message(state)
        self._sync_content_part(state, doc.get("content_index", 0), part,
                                doc["type"] == "response.content_part.done")

    def _on_annotation(self, doc: dict[str, Any]) -> None:
        state = self._state_for(doc)
        part = self._part(state.parts, doc.get("content_index", 0))
        annotation_index = doc.get("annotation_index")
        if type(annotation_index) is int:
            if annotation_index < part.citations:
                return  # already emitted (from a part snapshot)
            part.citations = annotation_index + 1
        else:
            part.citations += 1
        self._citation(state, doc.get("content_index", 0), doc.get("annotation"))

    def _citation(self, state: _Item, content_index: int, annotation: Any) -> None:
        if not isinstance(annotation, dict):
            return
        kind = annotation.get("type")
        index = state.index
        if kind == "url_citation":
            citation = Citation(
                index, "url", content_index, _int(annotation.get("start_index")),
                _int(annotation.get("end_index")), url=_str(annotation.get("url")),
                title=_str(annotation.get("title")))
        elif kind in ("file_citation", "file_path"):
            # A single position `index`, not a span (Responses API reference).
            # Both cite a stored file by file_id (file_path: one the response wrote).
            citation = Citation(
                index, "file", content_index,
                _int(annotation.get("index")), None, file_id=_str(annotation.get("file_id")),
                title=_str(annotation.get("filename")))
        elif kind == "container_file_citation":
            citation = Citation(
                index, "container_file", content_index, _int(annotation.get("start_index")),
                _int(annotation.get("end_index")), file_id=_str(annotation.get("file_id")),
                title=_str(annotation.get("filename")))
        else:
            self.unknown(f"annotation:{kind}", detail=state.id)
            return
        self.emit("citation", citation)

    # refusal ---------------------------------------------------------------------------------

    def _sync_refusal(self, state: _Item, content_index: int, text: str, final: bool) -> None:
        part = self._part(state.parts, content_index)
        if final and not part.done:
            part.done = True
            self._call.refused = True
            self.emit("refusal", Refusal(text=text or part.text(), output_index=state.index))
            if not text:
                self.too_large_to_hold(part.chunks, f"the refusal of item {state.id}")

    def _on_refusal_delta(self, doc: dict[str, Any]) -> None:
        # The vocabulary has no refusal delta: gather it, the refusal is emitted whole.
        delta = doc.get("delta")
        if isinstance(delta, str):
            state = self._state_for(doc)
            if not state.announced:
                self._announce_message(state)
            self._part(state.parts, doc.get("content_index", 0)).chunks.add(delta)

    def _on_refusal_done(self, doc: dict[str, Any]) -> None:
        state = self._state_for(doc)
        self._sync_refusal(state, doc.get("content_index", 0), _str(doc.get("refusal")) or "",
                           True)

    # reasoning -------------------------------------------------------------------------------

    def _sync_reasoning(self, state: _Item, table: dict[int, _Part], index: int,
                        form: ReasoningForm,
                        text: str, final: bool) -> None:
        part = self._part(table, index)
        if part.done:
            return
        self._catch_up(part, text, "reasoning.delta", state, index, form)
        if final:
            part.done = True
            self.emit("reasoning.done", Reasoning(state.index, index, form, text or part.text(),
                                                  state.id))
            if not text:
                self.elide_last(part.chunks, "text", "reasoning.delta")

    def _sync_reasoning_item(self, state: _Item, item: dict[str, Any], final: bool) -> None:
        forms: tuple[tuple[str, dict[int, _Part], ReasoningForm], ...] = (
            ("summary", state.summaries, "summary"), ("content", state.parts, "raw"))
        for key, table, form in forms:
            parts = item.get(key)
            if isinstance(parts, list):
                for index, part in enumerate(parts):
                    if isinstance(part, dict):
                        self._sync_reasoning(state, table, index, form,
                                             _str(part.get("text")) or "", final)
        encrypted = item.get("encrypted_content")
        # The blob in output_item.added may be incomplete; only the final one is kept (OpenAI
        # Reasoning guide).
        if final and isinstance(encrypted, str) and encrypted and not state.encrypted_done:
            state.encrypted_done = True
            self.emit("reasoning.done", Reasoning(
                state.index, 0, "redacted", "", state.id, encrypted_content=encrypted,
                valid_for=self.valid_for()))

    def _on_reasoning_delta(self, doc: dict[str, Any]) -> None:
        delta = doc.get("delta")
        if not delta or type(delta) is not str:
            return
        state = self._state_for(doc)
        if state.type is None:
            state.type = "reasoning"
        form: ReasoningForm
        if doc["type"] == "response.reasoning_summary_text.delta":
            index, table, form = doc.get("summary_index", 0), state.summaries, "summary"
        else:
            index, table, form = doc.get("content_index", 0), state.parts, "raw"
        part = table.get(index)
        if part is None:
            part = table[index] = _Part()
        part.chunks.add(delta)
        self.emit("reasoning.delta", Reasoning(state.index, index, form, delta, state.id))

    def _on_reasoning_done(self, doc: dict[str, Any]) -> None:
        state = self._state_for(doc)
        event_type = doc["type"]
        form: ReasoningForm
        if event_type.startswith("response.reasoning_summary_"):
            table, form, index = state.summaries, "summary", doc.get("summary_index", 0)
            if event_type == "response.reasoning_summary_part.added":
                self._part(table, index)
                return
            text = doc.get("text")
            if event_type == "response.reasoning_summary_part.done":
                part = doc.get("part")
                text = part.get("text") if isinstance(part, dict) else None
        else:
            table, form, index = state.parts, "raw", doc.get("content_index", 0)
            text = doc.get("text")
        self._sync_reasoning(state, table, index, form, _str(text) or "", True)

    # function and custom tool calls ----------------------------------------------------------

    def _synth_id(self, *parts: Any) -> str:
        return stable_id(self.run_id, self._call.response_id, *parts)

    def _sync_function(self, state: _Item, item: dict[str, Any], final: bool) -> None:
        if state.name is None and isinstance(item.get("name"), str):
            state.name = item["name"]
        if state.name is not None:
            if state.call_id is None:
                state.call_id = (_str(item.get("call_id"))
                                 or self._synth_id(state.index, state.name))
            if not state.announced:
                state.announced = True
                self.emit("tool.call.started", ToolCall(
                    state.index, state.name, state.call_id, "", state.id))
        if not final:
            return
        custom = state.type == "custom_tool_call"
        given = item.get("input" if custom else "arguments")
        # The item's own text, unless it has none and the deltas do.
        arguments: Parts | str = (given if isinstance(given, str) and (given or not state.args)
                                  else state.args)
        self._call.awaits_tools = True
        name = state.name or "unknown"
        call_id = state.call_id or self._synth_id(state.index, name)
        if not custom and name == "parallel":
            text = arguments if isinstance(arguments, str) else (
                None if arguments.elided else arguments.text())
            if text is not None and self._expand_parallel(state, call_id, text):
                return
        # Custom tools take free text by contract (a grammar, not a JSON schema).
        self.emit_tool_call(state.index, name, call_id, arguments, state.id, free_text=custom)

    def _expand_parallel(self, state: _Item, call_id: str, arguments: str) -> bool:
        """Azure leaks its internal parallel-dispatch wrapper as one function_call named
        `parallel` with {"tool_uses":[{recipient_name, parameters}]} (Responses API reference;
        vercel/ai 6be0f51d)."""
        try:
            wrapper = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return False
        uses = wrapper.get("tool_uses") if isinstance(wrapper, dict) else None
        if not isinstance(uses, list) or not uses or not all(
                isinstance(u, dict) and isinstance(u.get("recipient_name"), str) for u in uses):
            return False
        for position, use in enumerate(uses):
            name = use["recipient_name"].removeprefix("functions.")
            self.emit("tool.call", ToolCall(
                state.index, name, f"{call_id}:{position}", json_text(use.get("parameters", {})),
                state.id, True))
        return True

    def _on_arguments_delta(self, doc: dict[str, Any]) -> None:
        delta = doc.get("delta")
        if not delta or type(delta) is not str:
            return
        state = self._state_for(doc)
        state.args.add(delta)
        if (state.announced and state.type in ("function_call", "custom_tool_call")
                and state.name is not None and state.call_id is not None):  # both set: announced
            self.emit("tool.call.delta", ToolCall(
                state.index, state.name, state.call_id, delta, state.id))

    def _on_arguments_done(self, doc: dict[str, Any]) -> None:
        # Azure and OpenAI leave `name` out of .done (streaming events reference): it came with
        # output_item.added. The whole text is kept; tool.call is emitted with the item's own .done.
        state = self._state_for(doc)
        for key in ("arguments", "input"):
            value = doc.get(key)
            if isinstance(value, str):
                state.args = Parts()
                state.args.add(value)
                return

    # hosted tools ----------------------------------------------------------------------------

    def _hosted_payload(self, state: _Item, item: dict[str, Any]) -> tuple[str | None, str | None]:
        """(arguments, evidence) JSON texts for a hosted item as it stands."""
        fields = HOSTED_ITEMS.get(state.type or "", ("", None, None, "", ()))[4]
        if fields == ("arguments",) and isinstance(item.get("arguments"), str):
            arguments = item["arguments"] or None  # already JSON text (mcp_call)
        else:
            given = {k: item[k] for k in fields if k in item}
            arguments = json_text(given) if given else None
        evidence = {k: v for k, v in item.items() if k not in _BOOKKEEPING and k not in fields}
        return arguments, json_text(evidence) if evidence else None

    # client-executed provider tools ----------------------------------------------------------

    def _runs_locally(self, state: _Item, item: dict[str, Any]) -> bool:
        """Whether the application runs this item's tool: decided on the item's first sight."""
        if state.executor is None:
            local = True
            if state.type == "shell_call":
                environment = item.get("environment")
                kind = environment.get("type") if isinstance(environment, dict) else None
                local = kind is None or kind == "local"
            state.executor = "client" if local else "provider"
        return state.executor == "client"

    def _sync_client_tool(self, state: _Item, item: dict[str, Any], final: bool) -> None:
        name = CLIENT_TOOL_ITEMS[state.type or ""]
        if state.call_id is None:
            state.name = name
            state.call_id = _str(item.get("call_id")) or state.id or self._synth_id(
                state.index, name)
            self._call.calls[state.call_id] = state
        if not state.announced:
            state.announced = True
            self.emit("tool.call.started", ToolCall(state.index, name, state.call_id, "",
                                                    state.id))
        if not final:
            return
        self._call.awaits_tools = True
        request = {k: v for k, v in item.items() if k not in _BOOKKEEPING}
        self.emit("tool.call", ToolCall(state.index, name, state.call_id, json_text(request),
                                        state.id, True))

    # hosted tools ----------------------------------------------------------------------------

    def _sync_hosted(self, state: _Item, item: dict[str, Any], final: bool) -> None:
        item_type = state.type or ""
        tool_type, unit, quantity, executor, _ = HOSTED_ITEMS[item_type]
        server = _str(item.get("server_label"))
        authority = f"mcp:{server}" if server else "provider"
        if state.call_id is None:
            state.call_id = _str(item.get("call_id")) or state.id or self._synth_id(
                state.index, item_type)
            state.executor = executor
            self._call.calls[state.call_id] = state
        name = _str(item.get("name")) or ("tools/list" if item_type == "mcp_list_tools" else None)
        approval_id = _str(item.get("approval_request_id"))
        if approval_id and not state.extra.get("approval"):
            # The provider runs an approved MCP call under the approval's id.
            state.extra["approval"] = True
            self._call.approvals.discard(approval_id)
            self.emit("approval.resolved", Approval(
                approval_id, tool_name=name, server=server, decision="approved"))
        status = _hosted_status(_str(item.get("status")))
        arguments, evidence = self._hosted_payload(state, item)
        state.hosted_args = arguments
        if not state.announced:
            state.announced = True
            self.emit("hosted.call", Hosted(
                state.index, state.call_id, tool_type, authority, name, executor,
                status or "in_progress", unit, None, arguments, None))
        if not final or item_type == "shell_call":
            return  # a hosted shell call's outcome is the shell_call_output item that follows
        if item_type == "image_generation_call":
            self._image(state, item.get("result"), item.get("output_format"), False)
        failed = status == "failed" or bool(item.get("error"))
        counted = quantity if quantity is not None and not failed else None
        if counted:
            units = self._call.tool_units
            units[tool_type] = units.get(tool_type, 0) + int(counted)
        self.emit("hosted.result", Hosted(
            state.index, state.call_id, tool_type, authority, name, executor,
            status or ("failed" if failed else "completed"), unit, counted, arguments, evidence,
            failed))

    def _sync_hosted_result(self, state: _Item, item: dict[str, Any], final: bool) -> None:
        if not final:
            return
        call_id = _str(item.get("call_id")) or state.id or self._synth_id(state.index, state.type)
        origin = self._call.calls.get(call_id)
        status = _str(item.get("status")) or "completed"
        client_tool = origin.name if origin is not None and origin.executor == "client" else \
            CLIENT_RESULT_ITEMS.get(state.type or "")
        if client_tool is not None:
            # What the application ran and sent back: its result, like a function's output.
            output = item.get("output")
            self.emit("tool.result", ToolResult(
                client_tool, call_id, output if isinstance(output, str) else
                ("" if output is None else json_text(output)), status in ("failed", "incomplete")))
            return
        name: str | None = None
        if origin is not None:
            tool_type, unit = HOSTED_ITEMS[origin.type or ""][:2]
            arguments, index = origin.hosted_args, origin.index
        else:
            raw_type = (state.type or "").removesuffix("_output").removesuffix("_call")
            tool_type = normalized(raw_type, HOSTED_TOOL_TYPES, "other")
            name = raw_type if tool_type == "other" else None  # the vocabulary's fallback rule
            unit, arguments, index = None, None, state.index
        evidence = {k: v for k, v in item.items() if k not in _BOOKKEEPING}
        self.emit("hosted.result", Hosted(
            index, call_id, tool_type, "provider", name, "provider", _hosted_status(status), unit,
            None, arguments, json_text(evidence) if evidence else None, status == "failed"))

    def _image(self, state: _Item, b64: Any, output_format: Any, partial: bool) -> None:
        if not isinstance(b64, str) or not b64:
            return
        data = decode_base64(b64, lenient=True)
        if data is None:
            self._malformed_media(f"image of item {state.id}")
            return
        mime = IMAGE_MIME.get(output_format, "image/png")  # png is the tool's default format
        self.emit("media.done", Media(state.index, mime, state.id, data, None, partial))

    def _on_partial_image(self, doc: dict[str, Any]) -> None:
        state = self._state_for(doc)
        self._image(state, doc.get("partial_image_b64"), doc.get("output_format"), True)

    def _on_progress(self, doc: dict[str, Any]) -> None:
        """Progress of an item (searching, interpreting, code / diff / command / argument / output
        fragments of hosted tools, audio transcript): the item's output_item.done carries the
        whole outcome, which is what the hosted events report, so nothing is emitted here."""

    # approvals -------------------------------------------------------------------------------

    def _sync_approval_request(self, state: _Item, item: dict[str, Any], final: bool) -> None:
        if not final:
            return
        approval_id = state.id or self._synth_id(state.index, "approval")
        self._call.approvals.add(approval_id)
        self.emit("approval.requested", Approval(
            approval_id, tool_name=_str(item.get("name")), server=_str(item.get("server_label")),
            arguments=_str(item.get("arguments"))))

    def _sync_approval_response(self, state: _Item, item: dict[str, Any], final: bool) -> None:
        if not final:
            return
        approval_id = _str(item.get("approval_request_id")) or ""
        self._call.approvals.discard(approval_id)
        self.emit("approval.resolved", Approval(
            approval_id, decision="approved" if item.get("approve") else "denied"))

    def _on_audio(self, doc: dict[str, Any]) -> None:
        """response.audio.* (streaming events reference): audio output is gathered and emitted whole
        on .done."""
        event_type = doc["type"]
        state = self._state_for(doc)
        if event_type == "response.audio.delta" and isinstance(doc.get("delta"), str):
            state.extra.setdefault("audio", []).append(doc["delta"])
        elif event_type == "response.audio.done":
            b64 = "".join(state.extra.pop("audio", []))
            if b64:
                data = decode_base64(b64, lenient=True)
                if data is None:
                    self._malformed_media(f"audio of item {state.id}")  # said, never dropped
                    return
                self.emit("media.done", Media(state.index, "audio/pcm", state.id, data))

    def _malformed_media(self, what: str) -> None:
        self.emit("error", Error(error_type="malformed_media", retryable=False,
                                 message=f"{what} is not valid base64"))

    _DISPATCH: dict[str | None, Callable[[OpenAIResponsesAdapter, dict[str, Any]], None]] = {
        # lifecycle
        "response.created": _on_lifecycle,
        "response.queued": _on_lifecycle,
        "response.in_progress": _on_lifecycle,
        "response.completed": _on_lifecycle,
        "response.incomplete": _on_lifecycle,
        "response.failed": _on_lifecycle,
        "response.cancelled": _on_lifecycle,
        "error": _on_error_event,
        # items and parts
        "response.output_item.added": _on_item_added,
        "response.output_item.done": _on_item_done,
        "response.content_part.added": _on_content_part,
        "response.content_part.done": _on_content_part,
        # text, refusal, annotations
        "response.output_text.delta": _on_text_delta,
        "response.output_text.done": _on_text_done,
        "response.output_text.annotation.added": _on_annotation,
        "response.refusal.delta": _on_refusal_delta,
        "response.refusal.done": _on_refusal_done,
        # function and custom tool calls
        "response.function_call_arguments.delta": _on_arguments_delta,
        "response.function_call_arguments.done": _on_arguments_done,
        "response.custom_tool_call_input.delta": _on_arguments_delta,
        "response.custom_tool_call_input.done": _on_arguments_done,
        # reasoning
        "response.reasoning_summary_part.added": _on_reasoning_done,
        "response.reasoning_summary_part.done": _on_reasoning_done,
        "response.reasoning_summary_text.delta": _on_reasoning_delta,
        "response.reasoning_summary_text.done": _on_reasoning_done,
        "response.reasoning_text.delta": _on_reasoning_delta,
        "response.reasoning_text.done": _on_reasoning_done,
        # hosted tool progress
        "response.web_search_call.in_progress": _on_progress,
        "response.web_search_call.searching": _on_progress,
        "response.web_search_call.completed": _on_progress,
        "response.file_search_call.in_progress": _on_progress,
        "response.file_search_call.searching": _on_progress,
        "response.file_search_call.completed": _on_progress,
        "response.code_interpreter_call.in_progress": _on_progress,
        "response.code_interpreter_call.interpreting": _on_progress,
        "response.code_interpreter_call.completed": _on_progress,
        "response.code_interpreter_call_code.delta": _on_progress,
        "response.code_interpreter_call_code.done": _on_progress,
        "response.image_generation_call.in_progress": _on_progress,
        "response.image_generation_call.generating": _on_progress,
        "response.image_generation_call.completed": _on_progress,
        "response.image_generation_call.partial_image": _on_partial_image,
        "response.mcp_list_tools.in_progress": _on_progress,
        "response.mcp_list_tools.completed": _on_progress,
        "response.mcp_list_tools.failed": _on_progress,
        "response.mcp_call.in_progress": _on_progress,
        "response.mcp_call.completed": _on_progress,
        "response.mcp_call.failed": _on_progress,
        "response.mcp_call_arguments.delta": _on_progress,
        "response.mcp_call_arguments.done": _on_progress,
        "response.shell_call_command.added": _on_progress,
        "response.shell_call_command.delta": _on_progress,
        "response.shell_call_command.done": _on_progress,
        "response.shell_call_output_content.delta": _on_progress,
        "response.shell_call_output_content.done": _on_progress,
        "response.audio.delta": _on_audio,
        "response.audio.done": _on_audio,
        "response.audio.transcript.delta": _on_progress,
        "response.audio.transcript.done": _on_progress,
        # seen on the wire, absent from spec and SDK (OpenAI apply_patch tool)
        "response.apply_patch_call_operation_diff.delta": _on_progress,
        "response.apply_patch_call_operation_diff.done": _on_progress,
    }

    _ITEM_SYNC: dict[str | None,
                     Callable[[OpenAIResponsesAdapter, _Item, dict[str, Any], bool], None]] = {
        "message": _sync_message,
        "function_call": _sync_function,
        "custom_tool_call": _sync_function,
        "reasoning": _sync_reasoning_item,
        "mcp_approval_request": _sync_approval_request,
        "mcp_approval_response": _sync_approval_response,
    }


# What the gateway, the simulator and the registry know of this API (adapters/api_facts.py).
FACTS = ApiFacts(
    api=OpenAIResponsesAdapter.api, provider=OpenAIResponsesAdapter.default_provider,
    config_provider="openai", auth_headers=bearer_auth,
    # OpenAI Background mode guide: only background responses can be cancelled or streamed again.
    follow_up=FollowUp(get="/v1/responses/{id}", cancel="/v1/responses/{id}/cancel",
                       resume_param="starting_after", resume_background_only=True),
    terminal_statuses=frozenset(TERMINAL_STATUSES),
    # OpenAI Background mode guide: a stream resumes after its events' sequence_number.
    stream_cursor=body_field_cursor("sequence_number", sse_id_first=False),
    stream_object_key="response", sse_event_field="type",
    sse_content_type="text/event-stream; charset=utf-8",
    # OpenAI Webhooks guide: response.* payloads are thin (data.id only): the gateway fetches the
    # response.
    webhooks=Webhooks(provider="openai", fetch_prefix="response."),
)
