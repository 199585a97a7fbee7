"""Gemini Interactions API (``/v1beta/interactions``) → ModelEvents, both schema generations.

Follows the Gemini Interactions API reference and guide (docs/design-notes.md): the Interaction
resource, status, usage, steps, step deltas, SSE framing, event ids, tool results, signatures,
webhooks.

Two generations, told apart per frame by the event name alone, so a log that mixes them (a
resumed stream, a replay across the cut-over) still reads:

- current "steps" schema — ``interaction.created``, ``step.start/delta/stop``,
  ``interaction.completed``; the resource lists ``steps[]``. Introduced by python-genai 2.0.0
  (2026-05-07, CHANGELOG "Rename SSE events to interaction.created and interaction.completed"),
  the API default from 2026-05-20 (``Api-Revision: 2026-05-20``);
- legacy schema — ``interaction.start``, ``content.start/delta/stop``, ``interaction.complete``;
  the resource lists ``outputs[]`` (each content block is its own index). Removed 2026-06-06
  (third-party dates; Google's "interactions-breaking-changes-may-2026" page).

Both share ``interaction.status_update`` and ``error``. A complete Interaction object (poll, a
webhook carrying one, an HTTP error body) goes through the same step handlers as the stream.

More on this module: docs/adapters.md, ``adapters/gemini_interactions.py``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import orjson

from modelevents.adapters.accumulate import Parts
from modelevents.adapters.api_facts import (
    ApiFacts,
    FollowUp,
    Webhooks,
    body_field_cursor,
    key_header_auth,
)
from modelevents.adapters.base import DONE, Adapter, is_done, json_text, stable_id
from modelevents.adapters.encodings import char_span, decode_base64
from modelevents.adapters.google_status import status_error
from modelevents.schemas.events import (
    Citation,
    Error,
    Hosted,
    Media,
    Message,
    Reasoning,
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
    RunStatusValue,
    SourceType,
    TerminalStatus,
)

# --- mappings (check against the reference in one glance) --------------------------------------

# Interaction status at the end of an interaction -> (status, reason) of run.finished, or the
# reason of run.awaiting. reference InteractionStatus. Vercel maps incomplete → "length"
# (map-google-interactions-finish-reason.ts): no finer reason is on the wire.
STATUS_FINISHED: dict[str, tuple[TerminalStatus, FinishReason]] = {
    "completed": ("completed", "end_turn"),
    "failed": ("failed", "error"),
    "cancelled": ("cancelled", "cancelled"),
    "incomplete": ("incomplete", "max_tokens"),
    "budget_exceeded": ("incomplete", "budget_exceeded"),
}
STATUS_AWAITING: dict[str, AwaitingReason] = {
    "requires_action": "tool_results",
    # python-genai 3.x status, not yet in the reference: the caller must continue the run.
    "requires_continuation": "continuation",
}
# Statuses of an interaction still running ("idle": python-genai 3.x). A poll that reads one
# of them is not the end; every other status is.
RUNNING_STATUSES = frozenset({"queued", "in_progress", "idle"})
# Statuses reported as run.status when they change mid-stream, and the neutral status each is.
LIVE_STATUSES = RUNNING_STATUSES | {"requires_action"}
RUN_STATUS: dict[str, RunStatusValue] = {"queued": "queued", "in_progress": "in_progress", "idle": "in_progress",
              "requires_action": "requires_action"}

# Provider-executed tool step type -> (tool_type, billable unit). reference step types. Google
# Search grounding is billed per search query on Gemini 3 (per grounded prompt before): quantity is
# the number of queries. The other tools are billed as tokens.
HOSTED_CALLS: dict[str, tuple[HostedToolType, str | None]] = {
    "google_search_call": ("web_search", "search_query"),
    "google_maps_call": ("maps_search", None),
    "url_context_call": ("web_fetch", None),
    "code_execution_call": ("code_execution", None),
    "file_search_call": ("file_search", None),
    "retrieval_call": ("retrieval", None),  # Vertex: vertex_ai_search, rag_store, exa, parallel
    "mcp_server_tool_call": ("mcp", None),
    # python-genai 3.x step types, not yet in the reference.
    "tool_search_call": ("tool_search", None),
    "processing_call": ("media_processing", None),
}
HOSTED_RESULTS: dict[str, HostedToolType] = {
    call[: -len("_call")] + "_result": tool_type for call, (tool_type, _) in HOSTED_CALLS.items()}

# Annotation type -> citation source type (reference: annotations). word_info and speech_metadata
# are not citations: no event, the envelope keeps them.
CITATION_SOURCES: dict[str | None, SourceType] = {
    "url_citation": "url",
    "file_citation": "file",
    "place_citation": "place",
}
MEDIA_TYPES = frozenset({"image", "audio", "video", "document"})

# Webhook event -> the status it announces (reference; payload shape not verified from a primary
# source, so only a body carrying an interaction object or its id is read).
WEBHOOK_STATUS: dict[str | None, str] = {
    "interaction.requires_action": "requires_action",
    "interaction.completed": "completed",
    "interaction.failed": "failed",
    "interaction.cancelled": "cancelled",
}

# Step kinds: what a step (legacy: content block) is for this adapter.
OUTPUT, THOUGHT, CALL, HOSTED_CALL, HOSTED_RESULT, INPUT, OPAQUE = (
    "output", "thought", "call", "hosted_call", "hosted_result", "input", "opaque")

STEP_KINDS: dict[str | None, str] = {
    "model_output": OUTPUT,
    # legacy: an output content block is its own index
    "text": OUTPUT, "image": OUTPUT, "audio": OUTPUT, "video": OUTPUT, "document": OUTPUT,
    "thought": THOUGHT,
    "function_call": CALL,
    # What the application sent, echoed by GET's full timeline (reference): not model output. A
    # function result's tool.result is the executor's to record, never a second copy from here.
    "user_input": INPUT,
    "function_result": INPUT,
    **{t: HOSTED_CALL for t in HOSTED_CALLS},
    **{t: HOSTED_RESULT for t in HOSTED_RESULTS},
}
_IMPLICIT_STEP = {OUTPUT: "model_output", THOUGHT: "thought", CALL: "function_call",
                  INPUT: "function_result"}

# Step fields that are identity or opaque, not evidence of what a hosted tool did.
_NOT_EVIDENCE = frozenset({"type", "id", "call_id", "signature", "is_error"})

SEEN_EVENT_IDS_WINDOW = 4096



# --- per-interaction state ----------------------------------------------------------------------


class _Step:
    """One open step (legacy: content block), keyed by the provider's index."""

    __slots__ = ("kind", "index", "ptype", "part", "text", "last_text", "signature", "name",
                 "call_id", "args", "args_whole", "started", "body")

    def __init__(self, kind: str, index: int, ptype: Any) -> None:
        self.kind = kind
        self.index = index
        self.ptype = ptype  # the provider's step / content type, as sent (str for known steps)
        self.part = 0  # part index inside a model_output step
        self.text: Parts | None = None  # open text part / thought summary fragments
        self.last_text = ""  # the last closed text part, for annotations that follow it
        self.signature: str | None = None
        self.name: str | None = None
        self.call_id: str | None = None
        # Made when the first argument text comes (most steps are no call).
        self.args: Parts | None = None  # function-call argument JSON fragments
        self.args_whole = False  # args holds a whole object, not stream fragments
        self.started = False  # tool.call.started emitted
        # Hosted step fields merged from start and deltas (_open_hosted sets it on every
        # hosted step; the other kinds have none).
        self.body: dict[str, Any] | None = None


class GeminiInteractionsAdapter(Adapter):
    name = "gemini_interactions"
    revision = "2"  # 2: closed vocabulary (maps_search, place, error classes)
    api = "gemini-interactions"
    default_provider = "google"

    def __init__(self, run_id: str, tenant: str = "default", provider: str | None = None,
                 model: str | None = None) -> None:
        Adapter.__init__(self, run_id, tenant, provider, model)  # no super() object per stream
        self._turn = 0  # interactions begun in this run (keys synthesized ids under store:false)
        self._active = False  # an interaction has begun and not yet ended
        self._iid = ""  # its id ("" under store:false)
        self._status: str | None = None
        self._steps: dict[int, _Step] = {}
        self._done: set[int] = set()  # step indexes already translated in this interaction
        self._function_calls = 0
        self._last_usage: dict[str, Any] | None = None
        self._provider_error: str | None = None  # raw code of an `error` event, until the end
        self._ended_ids: set[str] = set()
        self._replaying = False  # frames of an interaction that already ended are arriving again
        # call id -> (tool type, authority, name)
        self._hosted: dict[str, tuple[HostedToolType, str, str | None]] = {}
        self._last_hosted: dict[str, str] = {}  # tool type -> last call id (results without one)
        self._seen_events: set[str] = set()
        # Made on the first event id: most streams carry none (reference: `event_id` is optional).
        self._seen_events_order: deque[str] | None = None

    @classmethod
    def recognizes(cls, doc: Any) -> bool:
        if not isinstance(doc, dict):
            return False
        if "event_type" in doc:
            return isinstance(doc["event_type"], str) and doc["event_type"] in _ON_EVENT
        if doc.get("object") == "interaction":
            return True
        return "status" in doc and isinstance(doc.get("steps", doc.get("outputs")), list)

    # --- dispatch ---------------------------------------------------------------------------------

    def undecodable(self, frame: Any, error: orjson.JSONDecodeError) -> Any:
        # The SDK's stream decoder ends on a `data: [DONE]` payload (reference SSE framing).
        if is_done(frame.body):
            return DONE
        return super().undecodable(frame, error)  # reports the malformed frame

    def handle(self, doc: Any) -> None:
        if doc is DONE:
            return  # the sentinel ends the transport; interaction.completed ends the run
        if type(doc) is not dict:
            self.malformed(f"body is JSON {type(doc).__name__}, not an object")
            return
        # A field missing or mistyped raises: the base's guard reports it (unexpected_shape).
        event_type = doc.get("event_type") or self.frame.sse_event
        if event_type is None:
            self._on_object(doc)
            return
        event_id = doc.get("event_id")
        if event_id and type(event_id) is str and not self._first_sight(event_id):
            return  # (an event id that is no string names nothing to dedupe or resume from)
        try:
            # A subscript, not a type test and a .get: this runs on every frame. A name that is
            # no string is not a key (or not hashable: TypeError) and falls through alike.
            handler = _ON_EVENT[event_type]
        except (KeyError, TypeError):
            self.unknown(str(event_type), "event type not in the Interactions reference (A1)")
            return
        handler(self, doc)

    def finish(self) -> None:
        # Open steps were cut by the transport: nothing is flushed (partial arguments must never
        # become an executable tool.call); the deltas already emitted keep the partial output.
        self._steps.clear()
        if self._provider_error is not None and not self.stream_complete:
            # An `error` event and then the end of input: the provider told us the outcome.
            self.emit("run.finished", RunFinished("failed", "error", self._provider_error))
            self.stream_complete = True

    def _first_sight(self, event_id: str) -> bool:
        """Dedupe by the provider's event id (reference: "token to resume the stream from this
        event")."""
        if event_id in self._seen_events:
            return False
        self._seen_events.add(event_id)
        order = self._seen_events_order
        if order is None:
            order = self._seen_events_order = deque()
        order.append(event_id)
        if len(order) > SEEN_EVENT_IDS_WINDOW:
            self._seen_events.discard(order.popleft())
        # The id is the provider's cursor even when the SSE `id:` line is absent.
        self.use_cursor(event_id)
        return True

    # --- interaction lifecycle ----------------------------------------------------------------

    def _on_created(self, doc: dict[str, Any]) -> None:
        """``interaction.created`` / legacy ``interaction.start``: a new provider call."""
        interaction = doc["interaction"]
        iid = interaction.get("id") or ""
        if iid and iid in self._ended_ids:
            # A replay of an interaction already translated (GET ?stream=true from the start):
            # its steps stay silent until its end, which _on_completed drops as already seen.
            self._replaying = True
            return
        self._replaying = False
        if not (self._active and iid and iid == self._iid):  # else: the open one, resumed
            self._begin_interaction(interaction)
        self._apply(interaction)

    def _on_status_update(self, doc: dict[str, Any]) -> None:
        # _begin_if_new, inline: this frame is frequent and usually changes nothing.
        raw_id = doc.get("interaction_id")
        iid = raw_id or ""
        if iid and iid in self._ended_ids:
            return  # a late status for an interaction that already ended
        status = doc.get("status")
        if not self._active or (iid and iid != self._iid):
            self._begin_interaction({"id": raw_id, "status": status})
        if status != self._status and status is not None:
            self._status_change(status)
        if isinstance(doc.get("usage"), dict):
            self._usage(doc["usage"])

    def _on_completed(self, doc: dict[str, Any]) -> None:
        """``interaction.completed`` / legacy ``interaction.complete``: the terminal signal."""
        interaction = doc["interaction"]
        self._replaying = False
        if not self._begin_if_new(interaction):
            return
        self._apply(interaction, final=True)

    def _on_cancelled(self, doc: dict[str, Any]) -> None:
        # python-genai 3.x `interaction.cancelled` {usage}: work in flight was aborted.
        if not self._active:
            return
        if isinstance(doc.get("usage"), dict):
            self._usage(doc["usage"])
        self._conclude("cancelled")

    def _on_error(self, doc: dict[str, Any]) -> None:
        # `error` {error:{code,message}} (reference). Whether the stream goes on is not documented:
        # the run ends failed only if no interaction.completed says otherwise (see finish()).
        self._steps.clear()  # what was open stays partial: no tool.call from a failed call
        failure = self._emit_error(doc.get("error"))
        self._provider_error = failure.code or "error"

    def _on_object(self, doc: dict[str, Any]) -> None:
        """A body without ``event_type``: a complete Interaction (poll), an HTTP error body, a
        webhook delivery."""
        if isinstance(doc.get("error"), dict) and "status" not in doc:
            # HTTP error body {"error":{code,message,status,details}} (Google API errors): a whole
            # answer.
            failure = self._emit_error(doc["error"])
            self.emit("run.finished", RunFinished("failed", "error", failure.code or "error"))
            self._active = False
            self.stream_complete = True
            return
        webhook_status = WEBHOOK_STATUS.get(doc.get("type"))
        if webhook_status is not None and isinstance(doc.get("data"), dict):
            data = doc["data"]
            interaction = data.get("interaction") if isinstance(data.get("interaction"),
                                                                dict) else data
            interaction = {"status": webhook_status, **interaction}
        elif "status" in doc and ("id" in doc or "steps" in doc or "outputs" in doc):
            interaction = doc
        else:
            self.unknown("(object)", "a JSON object that is no Interaction, event or error body")
            return
        if self._begin_if_new(interaction):
            status = interaction.get("status")
            self._apply(interaction, final=status not in RUNNING_STATUSES)

    def _begin_if_new(self, interaction: dict[str, Any]) -> bool:
        """Begin the interaction unless it is the open one; False when it already ended."""
        iid = interaction.get("id") or ""
        if iid and iid in self._ended_ids:
            return False  # the same end again (webhook after the stream, a repeated poll)
        if not self._active or (iid and iid != self._iid):
            self._begin_interaction(interaction)
        return True

    def _begin_interaction(self, interaction: dict[str, Any]) -> None:
        self._turn += 1
        self._active = True
        self._iid = interaction.get("id") or ""
        self._steps = {}
        self._done = set()
        self._function_calls = 0
        self._last_usage = None
        self._provider_error = None
        self.stream_complete = False
        self._model_from(interaction)
        status = interaction.get("status")
        self._status = status
        self.emit("run.started", RunStarted("queued" if status == "queued" else "in_progress",
                                            self._iid or None))

    def _model_from(self, interaction: dict[str, Any]) -> None:
        model = interaction.get("model") or interaction.get("agent")
        if model:
            self.model = model

    def _apply(self, interaction: dict[str, Any], final: bool = False) -> None:
        """What an Interaction resource says: its steps, usage, errors and status."""
        model = interaction.get("model") or interaction.get("agent")  # _model_from, inline
        if model:
            self.model = model
        steps = interaction.get("steps")
        if steps is None:
            steps = interaction.get("outputs")  # legacy resource (reference)
        for index, step in enumerate(steps or ()):
            if index not in self._done and index not in self._steps and type(step) is dict:
                self._open(index, step)
                self._close(index)
        if final and self._steps:
            # The provider says the interaction is over: steps it never stopped are complete.
            for index in sorted(self._steps):
                self._close(index)
        if isinstance(interaction.get("usage"), dict):
            self._usage(interaction["usage"])
        for error in interaction.get("errors") or ():
            if isinstance(error, dict):
                self._emit_error(error)
        status = interaction.get("status")
        if final:
            self._conclude(status)
        else:
            self._status_change(status)

    def _status_change(self, status: Any) -> None:
        if status == self._status or status is None:
            return
        self._status = status
        if status in LIVE_STATUSES:
            # "idle" (python-genai 3.x) is a running interaction waiting on nothing of ours.
            self.emit("run.status", RunStatus(RUN_STATUS.get(status, "in_progress"), status))
        # A terminal status outside interaction.completed announces the end; the end itself
        # (usage, outcome) comes with interaction.completed.

    def _conclude(self, status: Any) -> None:
        self._active = False
        self.stream_complete = True
        if self._iid:
            self._ended_ids.add(self._iid)
        known = type(status) is str
        awaiting = STATUS_AWAITING.get(status) if known else None
        if status == "completed" and self._function_calls:
            # A function-call turn that reports `completed` still waits for the results.
            awaiting = "tool_results"
        if awaiting is not None:
            self.emit("run.awaiting", RunAwaiting(awaiting, status))
            return
        finished = STATUS_FINISHED.get(status) if known else None
        if finished is None:
            # The provider ended the interaction with a status this revision does not know:
            # whether the run succeeded is unknown — fail safe, never "completed".
            self.unknown(f"interaction.status:{status}", "status not in the reference (A4)")
            self.emit("run.finished", RunFinished("incomplete", "other", str(status)))
            return
        self.emit("run.finished", RunFinished(*finished, status))

    def _usage(self, usage: dict[str, Any]) -> None:
        if usage == self._last_usage:
            return  # the same snapshot again (step.stop, metadata and completed may repeat it)
        self._last_usage = usage
        inputs, tool_use = usage.get("total_input_tokens"), usage.get("total_tool_use_tokens")
        output, thought = usage.get("total_output_tokens"), usage.get("total_thought_tokens")
        units = {}
        for count in usage.get("grounding_tool_count") or ():
            if isinstance(count, dict) and count.get("type") and type(count.get("count")) is int:
                units[count["type"]] = count["count"]
        self.emit("usage", Usage(
            None if inputs is None and tool_use is None else (inputs or 0) + (tool_use or 0),
            None if output is None and thought is None else (output or 0) + (thought or 0),
            usage.get("total_cached_tokens"),  # cache_read_tokens
            None,  # cache_write_tokens
            thought,  # reasoning_tokens
            usage.get("total_tokens"),
            units))

    # --- steps (legacy: content blocks) -----------------------------------------------------------

    def _on_step_start(self, doc: dict[str, Any]) -> None:
        index = doc.get("index", 0)
        if self._replaying or index in self._steps or index in self._done:
            return  # the same step opened again (a retried delivery without an event id)
        step = doc.get("step")
        if step is None:
            step = doc["content"]  # legacy content.start
        if not self._active:  # no interaction.created seen (a stream resumed mid-way)
            self._begin_interaction({})
        self._open(index, step)

    def _on_step_delta(self, doc: dict[str, Any]) -> None:
        index = doc.get("index", 0)
        step = self._steps.get(index)
        if (step is not None and step.kind == OPAQUE) or self._replaying:
            return  # an unknown step type (reported at step.start), or a replay
        delta = doc["delta"]
        delta_type = delta.get("type")
        entry = _ON_DELTA.get(delta_type)
        if entry is None:
            self.unknown(f"{doc.get('event_type')}:{delta_type}",
                         "delta type not in the reference (A5)")
            return
        kind, handler = entry
        if step is None:
            if index in self._done:
                return  # a late copy of a delta for a finished step
            # No start seen (a stream resumed mid-step): open the step the delta implies.
            if not self._active:
                self._begin_interaction({})
            step = self._open(index, {"type": _IMPLICIT_STEP.get(kind, delta_type)})
        if step.kind != kind:
            if step.kind != INPUT:
                self.protocol_violation(
                    f"{delta_type} delta for index {index}, a {step.ptype} step; ignored")
            return
        handler(self, step, delta)
        metadata = doc.get("metadata")
        if metadata and isinstance(metadata.get("total_usage"), dict):
            self._usage(metadata["total_usage"])

    def _on_step_stop(self, doc: dict[str, Any]) -> None:
        index = doc.get("index", 0)
        if self._replaying:
            return
        if index in self._steps:
            self._close(index)
        if isinstance(doc.get("usage"), dict):
            self._usage(doc["usage"])  # running total; step_usage is one step's share only

    def _open(self, index: int, step: dict[str, Any]) -> _Step:
        ptype = step.get("type")
        kind = STEP_KINDS.get(ptype)
        if kind is None:
            self.unknown(f"step:{ptype}", "step type not in the reference (A5)")
            kind = OPAQUE
        opened = self._steps[index] = _Step(kind, index, ptype)
        opener = _ON_OPEN.get(kind)
        if opener is not None:
            opener(self, opened, step)
        return opened

    def _close(self, index: int) -> None:
        step = self._steps.pop(index)
        self._done.add(index)
        closer = _ON_CLOSE.get(step.kind)
        if closer is not None:
            closer(self, step)

    # model output: text, media, citations

    def _open_output(self, step: _Step, doc: dict[str, Any]) -> None:
        self.emit("message.started", Message(step.index, "assistant", self._iid or None))
        if step.ptype == "model_output":
            items = doc.get("content") or ()
            if isinstance(doc.get("error"), dict):
                self._emit_error(doc["error"])
        else:
            items = (doc,)  # legacy: the block is itself one content item
        for n, item in enumerate(items):
            if n:
                self._close_part(step)
            self._content(step, item)

    def _content(self, step: _Step, item: dict[str, Any]) -> None:
        item_type = item.get("type")
        if item_type == "text":
            self._text_delta(step, item)
        elif item_type in MEDIA_TYPES:
            self._media_delta(step, item)
        else:
            self.unknown(f"content:{item_type}", "content type not in the reference (A5)")

    def _text_delta(self, step: _Step, delta: dict[str, Any]) -> None:
        text = delta.get("text")
        if text:
            if step.text is None:
                step.text = Parts()
            step.text.add(text)
            self.emit("text.delta", Text(step.index, step.part, text, self._iid or None))
        if delta.get("annotations"):  # legacy text deltas and whole text items carry them inline
            self._citations(step, delta["annotations"])

    def _annotation_delta(self, step: _Step, delta: dict[str, Any]) -> None:
        self._citations(step, delta.get("annotations") or ())

    def _citations(self, step: _Step, annotations: Any) -> None:
        if step.text is not None:
            text, part = step.text.text(), step.part
        else:  # annotations after the part closed (an image followed): they cite that part
            text, part = step.last_text, max(step.part - 1, 0)
        for note in annotations:
            source_type = CITATION_SOURCES.get(note.get("type"))
            if source_type is None:
                continue
            # Annotation offsets are bytes of the UTF-8 text (SDK annotation.py).
            start, end = char_span(text, note.get("start_index"), note.get("end_index"))
            url = note.get("url")
            file_id = None
            if source_type == "file":
                uri = note.get("document_uri") or note.get("source")
                if uri and uri.startswith(("http://", "https://")):
                    url = uri
                else:
                    file_id = uri or note.get("media_id") or note.get("file_name")
            self.emit("citation", Citation(
                output_index=step.index, source_type=source_type, part_index=part,
                start=start, end=end, url=url, file_id=file_id,
                title=note.get("title") or note.get("name") or note.get("file_name"),
                cited_text=text[start:end] if end is not None and end <= len(text) else None))

    def _media_delta(self, step: _Step, delta: dict[str, Any]) -> None:
        # An image arrives whole in one delta (Vercel build-google-interactions-stream-transform)
        # and takes a part of its own between text parts.
        self._close_part(step)
        self._media(step, delta)
        step.part += 1

    def _media(self, step: _Step, item: dict[str, Any]) -> None:
        encoded = item.get("data")
        data = decode_base64(encoded) if encoded else None
        if encoded and data is None:
            self.emit("error", Error(
                error_type="malformed_media", retryable=False,
                message=f"{item.get('type')} data of frame {self.frame.frame_id} is not base64; "
                        "the envelope keeps it"))
        self.emit("media.done", Media(
            output_index=step.index, mime_type=item.get("mime_type") or "application/octet-stream",
            item_id=self._iid or None, data=data, uri=item.get("uri")))

    def _close_part(self, step: _Step) -> None:
        if step.text is not None:
            step.last_text = step.text.text()
            self.emit("text.done", Text(step.index, step.part, step.last_text, self._iid or None))
            self.elide_last(step.text, "text", "text.delta")
            step.text = None
            step.part += 1

    def _close_output(self, step: _Step) -> None:
        self._close_part(step)
        self.emit("message.finished", Message(step.index, "assistant", self._iid or None))

    # thoughts

    def _open_thought(self, step: _Step, doc: dict[str, Any]) -> None:
        step.signature = doc.get("signature") or None
        for item in doc.get("summary") or ():
            self._summary_item(step, item)

    def _summary_delta(self, step: _Step, delta: dict[str, Any]) -> None:
        if isinstance(delta.get("content"), dict):
            self._summary_item(step, delta["content"])

    def _summary_item(self, step: _Step, item: dict[str, Any]) -> None:
        if item.get("type") == "text":
            text = item.get("text")
            if text:
                if step.text is None:
                    step.text = Parts()
                step.text.add(text)
                self.emit("reasoning.delta", Reasoning(step.index, 0, "summary", text,
                                                       self._iid or None))
        elif item.get("type") in MEDIA_TYPES:
            self._media(step, item)
        else:
            self.unknown(f"thought_summary:{item.get('type')}", "summary item not in the reference")

    def _signature_delta(self, step: _Step, delta: dict[str, Any]) -> None:
        if delta.get("signature"):
            step.signature = delta["signature"]

    def _close_thought(self, step: _Step) -> None:
        text = step.text.text() if step.text else ""
        self.emit("reasoning.done", Reasoning(
            step.index, 0, "summary" if step.text else "redacted", text, self._iid or None,
            step.signature, None, self.valid_for()))  # no encrypted_content
        if step.text:
            self.elide_last(step.text, "text", "reasoning.delta")

    def _carried_signature(self, step: _Step, signature: Any, item_id: str) -> None:
        # Gemini 3 signs function-call and hosted-tool steps too; the signature must go back with
        # the step (reference). ToolCall/Hosted have no signature field, so it travels as an opaque
        # reasoning record tied to the call id. Recorded streams send "" (nothing to keep).
        if signature:
            self.emit("reasoning.done", Reasoning(
                step.index, 0, "redacted", "", item_id, signature, None, self.valid_for()))

    # function calls (client-executed)

    def _open_call(self, step: _Step, doc: dict[str, Any]) -> None:
        step.call_id = doc.get("id") or None
        step.name = doc.get("name") or None
        step.signature = doc.get("signature") or None
        if step.name:
            self._call_started(step)
        arguments = doc.get("arguments")
        if arguments:  # a whole object (poll, legacy); the current stream starts with {}
            self._whole_arguments(step, arguments)

    def _call_id(self, step: _Step) -> str:
        if step.call_id is None:
            # store:false streams "id":"" (reference): synthesize one that replays identically.
            step.call_id = stable_id(self.run_id, self._iid or self._turn, step.index,
                                     step.name or "")
        return step.call_id

    def _call_started(self, step: _Step) -> None:
        step.started = True
        self.emit("tool.call.started", ToolCall(step.index, step.name or "", self._call_id(step),
                                                "", self._iid or None))

    def _whole_arguments(self, step: _Step, arguments: Any) -> None:
        text = arguments if isinstance(arguments, str) else json_text(arguments)
        step.args = Parts()
        step.args.add(text)
        step.args_whole = True
        if not step.started:
            self._call_started(step)
        self.emit("tool.call.delta", ToolCall(step.index, step.name or "", self._call_id(step),
                                              text, self._iid or None))

    def _arguments_delta(self, step: _Step, delta: dict[str, Any]) -> None:
        # Current schema: `arguments` is a JSON *string* fragment (reference: table).
        fragment = delta.get("arguments")
        if not isinstance(fragment, str):
            if fragment is not None:
                self._whole_arguments(step, fragment)
            return
        if delta.get("id") and step.call_id is None:
            step.call_id = delta["id"]
        if not fragment:
            return
        args = step.args
        if args is None or step.args_whole:  # fragments replace a whole object the start carried
            args = step.args = Parts()
            step.args_whole = False
        if not step.started:
            self._call_started(step)
        args.add(fragment)
        self.emit("tool.call.delta", ToolCall(step.index, step.name or "", self._call_id(step),
                                              fragment, self._iid or None))

    def _function_call_delta(self, step: _Step, delta: dict[str, Any]) -> None:
        # Legacy schema: one content.delta carries id, name and the whole `arguments` *object*.
        if delta.get("id") and not step.started:
            step.call_id = delta["id"]
        if delta.get("name") and not step.started:
            step.name = delta["name"]
        if delta.get("arguments") is not None:
            self._whole_arguments(step, delta["arguments"])
        elif not step.started and step.name:
            self._call_started(step)

    def _close_call(self, step: _Step) -> None:
        if not step.started:
            self._call_started(step)
        self._function_calls += 1
        call_id = self._call_id(step)
        self.emit_tool_call(step.index, step.name or "", call_id, step.args, self._iid or None)
        self._carried_signature(step, step.signature, call_id)

    # hosted (provider-executed) tools

    def _open_hosted(self, step: _Step, doc: dict[str, Any]) -> None:
        step.body = dict(doc)

    def _hosted_delta(self, step: _Step, delta: dict[str, Any]) -> None:
        # Hosted steps stream whole payloads, each delta type = the step type (reference).
        assert step.body is not None  # set by _open_hosted
        step.body.update(delta)

    def _close_hosted_call(self, step: _Step) -> None:
        body = step.body
        assert body is not None  # set by _open_hosted
        tool_type, unit = HOSTED_CALLS[step.ptype]
        call_id = body.get("id") or stable_id(self.run_id, self._iid or self._turn, step.index,
                                              step.ptype)
        if tool_type == "mcp":
            name, authority = body.get("name"), f"mcp:{body.get('server_name')}"
        else:
            name, authority = step.ptype[: -len("_call")], "provider"
        arguments = body.get("arguments")
        quantity = None
        if unit == "search_query" and isinstance(arguments, dict):
            quantity = len(arguments.get("queries") or ())
        self._hosted[call_id] = (tool_type, authority, name)
        self._last_hosted[tool_type] = call_id
        self.emit("hosted.call", Hosted(
            output_index=step.index, call_id=call_id, tool_type=tool_type, authority=authority,
            name=name, status="in_progress", billable_unit=unit, quantity=quantity,
            arguments=None if arguments is None else json_text(arguments),
            evidence=_evidence(body)))
        self._carried_signature(step, body.get("signature"), call_id)

    def _close_hosted_result(self, step: _Step) -> None:
        body = step.body
        assert body is not None  # set by _open_hosted
        tool_type = HOSTED_RESULTS[step.ptype]
        # Results name their call; with store:false ids may be empty: the last call of the type.
        call_id = body.get("call_id") or self._last_hosted.get(tool_type) or stable_id(
            self.run_id, self._iid or self._turn, step.index, step.ptype)
        default_name = body.get("name") or step.ptype[: -len("_result")]
        _, authority, name = self._hosted.get(call_id, (tool_type, "provider", default_name))
        if tool_type == "mcp" and body.get("server_name"):
            authority = f"mcp:{body['server_name']}"
        is_error = bool(body.get("is_error"))
        self.emit("hosted.result", Hosted(
            output_index=step.index, call_id=call_id, tool_type=tool_type, authority=authority,
            name=name, status="failed" if is_error else "completed",
            evidence=_evidence(body), is_error=is_error))
        self._carried_signature(step, body.get("signature"), call_id)

    # --- small helpers ----------------------------------------------------------------------------

    def _emit_error(self, error: Any) -> Error:
        failure = status_error(error, self.frame.http_status)
        self.emit("error", failure)
        return failure



def _evidence(body: dict[str, Any]) -> str:
    """What the step says beyond its identity (queries, urls, code, results...) as JSON text."""
    return json_text({k: v for k, v in body.items() if k not in _NOT_EVIDENCE})


_Handler = Callable[[GeminiInteractionsAdapter, dict[str, Any]], None]

# Provider event type -> handler, both generations (reference: table). The fall-through is
# `unknown`.
_ON_EVENT: dict[str, _Handler] = {
    "interaction.created": GeminiInteractionsAdapter._on_created,
    "interaction.start": GeminiInteractionsAdapter._on_created,  # legacy
    "interaction.status_update": GeminiInteractionsAdapter._on_status_update,
    "step.start": GeminiInteractionsAdapter._on_step_start,
    "content.start": GeminiInteractionsAdapter._on_step_start,  # legacy
    "step.delta": GeminiInteractionsAdapter._on_step_delta,
    "content.delta": GeminiInteractionsAdapter._on_step_delta,  # legacy
    "step.stop": GeminiInteractionsAdapter._on_step_stop,
    "content.stop": GeminiInteractionsAdapter._on_step_stop,  # legacy
    "interaction.completed": GeminiInteractionsAdapter._on_completed,
    "interaction.complete": GeminiInteractionsAdapter._on_completed,  # legacy
    "error": GeminiInteractionsAdapter._on_error,
    # python-genai 3.x (live interactions), not yet in the reference.
    "interaction.cancelled": GeminiInteractionsAdapter._on_cancelled,
}

_StepHandler = Callable[[GeminiInteractionsAdapter, _Step, dict[str, Any]], None]

# Delta type -> (the step kind it extends, handler). reference delta types; legacy names beside
# them.
_ON_DELTA: dict[str, tuple[str, _StepHandler]] = {
    "text": (OUTPUT, GeminiInteractionsAdapter._text_delta),
    "text_annotation_delta": (OUTPUT, GeminiInteractionsAdapter._annotation_delta),
    "text_annotation": (OUTPUT, GeminiInteractionsAdapter._annotation_delta),  # legacy
    **{t: (OUTPUT, GeminiInteractionsAdapter._media_delta) for t in MEDIA_TYPES},
    "thought_summary": (THOUGHT, GeminiInteractionsAdapter._summary_delta),
    "thought_signature": (THOUGHT, GeminiInteractionsAdapter._signature_delta),
    "arguments_delta": (CALL, GeminiInteractionsAdapter._arguments_delta),
    "function_call": (CALL, GeminiInteractionsAdapter._function_call_delta),  # legacy
    "function_result": (INPUT, lambda adapter, step, delta: None),  # see STEP_KINDS
    **{t: (HOSTED_CALL, GeminiInteractionsAdapter._hosted_delta) for t in HOSTED_CALLS},
    **{t: (HOSTED_RESULT, GeminiInteractionsAdapter._hosted_delta) for t in HOSTED_RESULTS},
}

# Step kind -> what opening and closing it emits.
_ON_OPEN: dict[str, _StepHandler] = {
    OUTPUT: GeminiInteractionsAdapter._open_output,
    THOUGHT: GeminiInteractionsAdapter._open_thought,
    CALL: GeminiInteractionsAdapter._open_call,
    HOSTED_CALL: GeminiInteractionsAdapter._open_hosted,
    HOSTED_RESULT: GeminiInteractionsAdapter._open_hosted,
}
_ON_CLOSE: dict[str, Callable[[GeminiInteractionsAdapter, _Step], None]] = {
    OUTPUT: GeminiInteractionsAdapter._close_output,
    THOUGHT: GeminiInteractionsAdapter._close_thought,
    CALL: GeminiInteractionsAdapter._close_call,
    HOSTED_CALL: GeminiInteractionsAdapter._close_hosted_call,
    HOSTED_RESULT: GeminiInteractionsAdapter._close_hosted_result,
}



def _webhook_interaction_id(data: dict[str, Any]) -> Any:
    """A7: ``data.id``, else ``data.interaction.id`` (the shape the adapter reads), else
    ``data.interaction_id``."""
    object_id = data.get("id")
    if isinstance(object_id, str):
        return object_id
    interaction = data.get("interaction")
    if isinstance(interaction, dict):
        object_id = interaction.get("id")
    return object_id if isinstance(object_id, str) else data.get("interaction_id")


# What the gateway, the simulator and the registry know of this API (adapters/api_facts.py).
FACTS = ApiFacts(
    api=GeminiInteractionsAdapter.api, provider=GeminiInteractionsAdapter.default_provider,
    config_provider="gemini", auth_headers=key_header_auth("x-goog-api-key"),
    follow_up=FollowUp(get="/v1beta/interactions/{id}", cancel="/v1beta/interactions/{id}/cancel",
                       resume_param="last_event_id"),
    # reference: every status but a running one ends what a poll waits for; requires_action waits
    # for tool results. "expired" (a batch's status, reference) is kept as the gateway always did.
    terminal_statuses=frozenset(STATUS_FINISHED) | {"requires_action", "expired"},
    # reference: a stream resumes after its event id: the SSE id when the stream sets one.
    stream_cursor=body_field_cursor("event_id", sse_id_first=True),
    stream_object_key="interaction", sse_event_field="event_type",
    webhooks=Webhooks(provider="gemini", fetch_prefix="interaction.",
                      object_id=_webhook_interaction_id),
)
