"""What every provider adapter shares: the per-run translator shape and event construction.

An adapter is pure: ProviderFrames in, ModelEvents out, no I/O, no clock (``received_at`` comes
from the frame). One instance follows one run; it is fed the run's frames in arrival order
(``feed``) and told when the input ends (``close``). Its state is small and picklable, so the
stream processor can keep it in a changelogged table between frames.

What a subclass writes: ``handle(doc)`` for one decoded frame (usually a dispatch table keyed by
the provider's event type, with ``self.unknown`` as the deliberate fall-through), and optionally
``finish()`` for what the end of input means for open blocks and ``undecodable(frame, error)`` for
bodies that are not JSON but mean something (``[DONE]``). It emits through ``self.emit``.

The contract every adapter keeps (the run state machine relies on it):
- every provider call of the run opens with ``run.started`` (carrying the provider's object id),
  also the second and later calls of a tool loop: usage is reported per call, and the state
  machine banks the previous call's usage there;
- every provider call ends with ``run.awaiting`` (tool results, approval, continuation) or
  ``run.finished`` — only on the provider's own terminal signal.

More on this module: docs/adapters.md, ``adapters/base.py``.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import replace
from typing import Any, ClassVar, Final

import orjson

from modelevents.adapters.accumulate import HOLD_BYTES, Parts
from modelevents.schemas.annotations import plain_annotations
from modelevents.schemas.avro_ints import INT32_LIMIT, int32_fields
from modelevents.schemas.events import (
    KIND_PAYLOAD,
    Elided,
    Envelope,
    Error,
    EventSource,
    ModelEvent,
    Payload,
    RunStarted,
    ToolCall,
    Unknown,
)
from modelevents.schemas.frames import BUNDLE_FRAME_HEADER, INDEX_TEXT, INDEXED, ProviderFrame
from modelevents.schemas.limits import PIECE_BYTES
from modelevents.schemas.pieces import split_events
from modelevents.schemas.vocabulary import HOSTILE_INPUT_ERRORS

# Enough to catch a retried delivery or a reconnect overlap; bounded so state stays small.
SEEN_FRAMES_WINDOW = 1024

# A frame whose body is at most this size gives events that each fit one record: an event's
# content is its envelope (the body), what it took from the body, and at most a couple of blocks
# held to their bound (adapters/accumulate.py). Larger frames have their events checked and cut.
_LIGHT_FRAME_BYTES = (PIECE_BYTES - 2 * HOLD_BYTES) // 2

_new = object.__new__  # Adapter.emit's maker of events (see there)


class _BetweenFrames(list[ModelEvent]):
    """What an adapter emits into between frames (``Adapter._out`` outside ``feed`` and
    ``close``): nothing — ``emit`` there raises instead of appending to a list nobody reads.
    One shared instance, never appended to, so that a frame does not pay for a second list."""

    def append(self, event: ModelEvent) -> None:
        raise RuntimeError("Adapter.emit outside feed/close: there is no frame to emit for")


_BETWEEN_FRAMES = _BetweenFrames()

# What ``Adapter.undecodable`` returns for a frame it reported: there is nothing to handle.
MALFORMED = object()
# What ``undecodable`` returns for the ``data: [DONE]`` sentinel (``is_done``): the transport's
# end, which ``handle`` receives as this object.
DONE = object()


def is_done(body: bytes) -> bool:
    """The ``[DONE]`` sentinel some servers end a stream with; the SDKs stop on any data that
    starts with it (openai-python _streaming.py, python-genai's Interactions decoder)."""
    return bytes(body[:6]) == b"[DONE]" or bytes(body).strip() == b"[DONE]"

# The error taxonomy for hostile input (module docstring). Adapters name them through these.
# The same four names as schemas/vocabulary.py's HostileInputError (the closed vocabulary).
# Final, so a type checker reads each as its Literal (Error.error_type is ErrorType).
MALFORMED_FRAME: Final = "malformed_frame"
UNEXPECTED_SHAPE: Final = "unexpected_shape"
INVALID_UTF8: Final = "invalid_utf8"
PROTOCOL_VIOLATION: Final = "protocol_violation"
if (MALFORMED_FRAME, UNEXPECTED_SHAPE, INVALID_UTF8, PROTOCOL_VIOLATION) != HOSTILE_INPUT_ERRORS:
    raise ImportError("adapters/base.py's hostile-input names differ from the vocabulary's")


# Payload record → (field, the Python types its Avro schema takes, nullable, empty value): what
# ``Adapter._typed`` holds every emitted payload to. Built once from the dataclasses.
_INT64 = 1 << 63
# The longest model name kept (Vertex resource names are a few hundred characters).
MODEL_CHARS = 1024
_TYPES_OF: dict[str, tuple[tuple[type, ...], bool, Any]] = {
    "str": ((str,), False, ""), "str | None": ((str,), True, None),
    "int": ((int,), False, 0), "int | None": ((int,), True, None),
    "bool": ((bool,), False, False), "bool | None": ((bool,), True, None),
    "float | None": ((float, int), True, None), "bytes | None": ((bytes,), True, None),
    "dict[str, int]": ((dict,), False, None), "dict[str, str]": ((dict,), False, None),
}
# Keyed by the field's plain annotation: a vocabulary Literal field is a "str" one here.
_FIELD_TYPES: dict[type, tuple[tuple[str, tuple[type, ...], bool, Any], ...]] = {
    cls: tuple((name, *_TYPES_OF[annotation])
               for name, annotation in plain_annotations(cls).items())
    for cls in set(KIND_PAYLOAD.values())
}
# The (record, field) maps whose values are strings (Hosted.source_trust); other maps hold longs.
_STR_MAPS: frozenset[tuple[type, str]] = frozenset(
    (cls, name) for cls in set(KIND_PAYLOAD.values())
    for name, annotation in plain_annotations(cls).items() if annotation == "dict[str, str]")


# Ints the compiled test lets through without a second look: within one 30-bit digit, so that
# its comparisons are CPython 3.11's specialized ones for small ints (against -2**63 and 2**63
# they take the generic path, ~0.1 µs an int field). An int beyond it but within Avro's long
# fails only the quick test: ``_typed`` then checks it exactly and keeps it.
_SMALL_INT = (1 << 30) - 1


def _fast_check(cls: type) -> Any:
    """One compiled function per payload record that is True when every field fits: the
    per-event cost of ``Adapter._typed`` (a loop of getattr calls costs several times more).
    Conservative: False for some values that fit (ints past ``_SMALL_INT``), never True for one
    that does not; ``_typed`` decides exactly. ``if`` statements, not one ``and`` expression:
    CPython 3.11 specializes a comparison only when a conditional jump follows it."""
    lines = ["def fits(p):"]
    for name, types, nullable, _ in _FIELD_TYPES[cls]:
        if types == (int,):
            bad = f"type(v) is not int or v < -{_SMALL_INT} or v > {_SMALL_INT}"
        elif types == (dict,) and (cls, name) in _STR_MAPS:
            bad = ("type(v) is not dict or v and not all(type(k) is str and type(n) is str "
                   "for k, n in v.items())")
        elif types == (dict,):
            bad = (f"type(v) is not dict or v and not all(type(k) is str and type(n) is int and "
                   f"-{_INT64} <= n < {_INT64} for k, n in v.items())")
        elif types == (float, int):
            bad = (f"type(v) is not float and (type(v) is not int or v < -{_SMALL_INT} "
                   f"or v > {_SMALL_INT})")
        else:
            bad = f"type(v) is not {types[0].__name__}"
        lines += [f"    v = p.{name}",
                  f"    if {'v is not None and (' + bad + ')' if nullable else bad}:",
                  "        return False"]
    lines.append("    return True")
    namespace: dict[str, Any] = {}
    exec("\n".join(lines), namespace)
    return namespace["fits"]


_FITS: dict[type, Any] = {cls: _fast_check(cls) for cls in _FIELD_TYPES}
# The int fields the schema holds to 32 bits (its "int", not "long"): _fast_check's bound is
# within them already; _typed's exact test bounds them so (schemas/avro_ints.py).
_INT32_FIELDS: dict[type, frozenset[str]] = {cls: int32_fields()[cls.__name__]
                                             for cls in _FIELD_TYPES}


def _ill_typed(value: Any, types: tuple[type, ...], limit: int = _INT64,
               str_values: bool = False) -> bool:
    """True when ``value`` (of one of ``types`` or None) does not fit: a wrong type, an int
    outside Avro's long (``limit``: or its int), a dict that is not str → int (``str_values``:
    str → str)."""
    kind = type(value)
    if kind not in types:
        return True
    if kind is int:
        return not -limit <= value < limit
    if kind is dict and str_values:
        return not all(type(k) is str and type(v) is str for k, v in value.items())
    if kind is dict:
        return not all(type(k) is str and type(v) is int and -_INT64 <= v < _INT64
                       for k, v in value.items())
    return False


# An empty 8-byte blake2b: a copy of it fed the run id is the same hash as a new one made with
# digest_size=8, without parsing that keyword again for every adapter.
_RUN_HASHER = hashlib.blake2b(digest_size=8)


def run_hash(run_id: str) -> str:
    hasher = _RUN_HASHER.copy()
    hasher.update(run_id.encode())
    return hasher.hexdigest()


def event_id_for(run_id: str, frame_id: str, index: int) -> str:
    """The deterministic event id (``Adapter.emit`` builds the same string inline)."""
    return f"{run_hash(run_id)}:{frame_id}:{index}"


def stable_id(*parts: Any) -> str:
    """A deterministic id for what the provider left unnamed (a Gemini functionCall without id,
    a compatible server's call without id): same input → same id, so replays dedupe."""
    key = "\x1f".join(str(p) for p in parts).encode()
    return "mev_" + hashlib.blake2b(key, digest_size=12).hexdigest()


def json_text(value: Any) -> str:
    """Compact JSON text for arguments and evidence fields (orjson: sorted nothing, exact)."""
    return orjson.dumps(value).decode()


def json_valid(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def tool_arguments(arguments: str | None) -> tuple[str, bool]:
    """A finished tool call's argument text → (the text ``tool.call`` carries, arguments_valid).

    The one rule for every adapter: no arguments at all (nothing streamed, "" or whitespace) is
    the empty object ``"{}"``, valid — a tool without parameters; anything else is carried as the
    provider sent it and is valid only when it is a JSON *object* (arguments are named), so
    ``"[1]"``, ``"3"`` or a cut ``{"a": 1`` are reported invalid and never silently repaired."""
    if not arguments or arguments.isspace():
        return "{}", True
    try:
        return arguments, type(orjson.loads(arguments)) is dict
    except orjson.JSONDecodeError:
        return arguments, False


class Adapter:
    """Base of the per-run translators. Subclasses set the class attributes below."""

    name: ClassVar[str]  # module-level identity, e.g. "openai_responses"
    revision: ClassVar[str]  # bump when the mapping changes: replay parity reports by it
    api: ClassVar[str]  # openai-responses | openai-chat | anthropic-messages | ...
    default_provider: ClassVar[str]  # openai | anthropic | google
    # Set by carry() for the frame being fed; a class default, so that an adapter pickled by
    # an earlier version (a worker's state) reads it too.
    _carries_large: bool = False

    def __init__(self, run_id: str, tenant: str = "default", provider: str | None = None,
                 model: str | None = None) -> None:
        self.run_id = run_id
        self.tenant = tenant
        self.provider = provider or self.default_provider
        self.model = model
        # run_hash, inline: once per stream, and a Python call is a tenth of its cost.
        hasher = _RUN_HASHER.copy()
        hasher.update(run_id.encode())
        self._run_hash = hasher.hexdigest()
        # Set by the subclass when the provider's own terminal signal arrived (message_stop,
        # response.completed, [DONE] ...); a stream that closes without it was cut.
        self.stream_complete = False
        self._seen: set[str] = set()
        self._seen_order: deque[str] = deque()
        self._closed = False
        # Per-frame emission context.
        self._out: list[ModelEvent] = _BETWEEN_FRAMES
        self._frame: ProviderFrame | None = None
        self._source_id = ""
        self._cursor: str | None = None
        self._envelope: Envelope | None = None

    _adapter_id: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__ or "revision" in cls.__dict__:
            cls._adapter_id = f"{cls.name}@{cls.revision}"

    @property
    def adapter_id(self) -> str:
        """``name@revision`` of the code translating now — a class fact, not state: a state
        pickled by an earlier revision goes on under this one and its events say so (an old
        state's own ``adapter_id`` entry is shadowed by this property)."""
        return self._adapter_id

    @adapter_id.setter
    def adapter_id(self, stored: str) -> None:
        """A state read field by field sets it: the revision translating now wins."""

    # --- what callers use ---------------------------------------------------------------------

    def feed(self, frame: ProviderFrame) -> list[ModelEvent]:
        """Translate one frame. Never raises for what the provider sent."""
        # The hot path of every adapter: kept flat on purpose (no helper calls per frame).
        frame_id = frame.frame_id
        seen = self._seen
        if frame_id in seen:
            return []
        seen.add(frame_id)
        order = self._seen_order
        order.append(frame_id)
        if len(order) > SEEN_FRAMES_WINDOW:
            seen.discard(order.popleft())
        self._frame = frame
        self._source_id = frame_id
        self._cursor = frame.cursor
        self._closed = False  # input again after a close: the next close ends this input too
        self._envelope = None  # built by emit on the frame's first event: many frames have none
        out = self._out = []
        # The guard (module docstring): a try costs nothing in CPython 3.11+ until it catches.
        try:
            try:
                doc = orjson.loads(frame.body)
            except orjson.JSONDecodeError as exc:
                doc = self._decode_failed(frame, exc)
            if doc is not MALFORMED:
                self.handle(doc)
        except Exception as exc:
            self._guard_caught(exc)
        if out:
            # _typed's test, inline (a method call less per frame): the model, then one
            # compiled check per event; _typed itself (the repair) runs only when one fails.
            model = self.model
            if model is not None and (type(model) is not str or len(model) > MODEL_CHARS):
                self._typed(out)
            else:
                fits = _FITS
                for event in out:
                    payload = event.payload
                    if not fits[type(payload)](payload):
                        self._typed(out)
                        break
            if len(frame.body) > _LIGHT_FRAME_BYTES or self._carries_large:
                # An event of this frame (or of a large one released with it: carry) may be
                # too large for one record.
                self._carries_large = False
                out = split_events(out)
        self._out = _BETWEEN_FRAMES
        return out

    def close(self) -> list[ModelEvent]:
        """The input ended. Emits what the end means (truncation, unfinished blocks)."""
        if self._closed:
            return []
        self._closed = True
        frame = self._frame or ProviderFrame(
            frame_id="(no frames)", run_key=self.run_id, provider=self.provider, api=self.api,
            transport="sse", received_at=0, content_type="application/json", body=b"")
        # What the end of input emits belongs to no frame: ids of its own, no envelope bytes.
        # (Inline: once per stream, the call costs more than these stores.)
        self._frame = frame
        self._source_id = f"{frame.frame_id}#close"
        self._cursor = frame.cursor
        envelope = self._envelope = _new(Envelope)  # made as emit makes a frame's (see there)
        envelope.content_type = frame.content_type
        envelope.body = b""
        self._out = []
        try:
            self.finish()
        except Exception as exc:
            self._guard_caught(exc)
        if not self.stream_complete:
            self.emit("error", Error(
                error_type="stream_truncated", retryable=True,
                message="input ended before the provider's terminal event; the run's outcome "
                        "is unknown"))
        out = self._out
        if not out:  # the common end (the terminal signal came): nothing to check
            self._out = _BETWEEN_FRAMES
            return out
        self._typed(out)  # may add its error to the close's events
        return split_events(self._end())

    def _decode_failed(self, frame: ProviderFrame, error: orjson.JSONDecodeError) -> Any:
        """The body is not JSON: repair broken UTF-8 (``invalid_utf8``), else the subclass's
        ``undecodable`` (sentinels; by default ``malformed_frame``)."""
        body = bytes(frame.body)
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            try:
                doc = orjson.loads(body.decode("utf-8", "replace"))
            except orjson.JSONDecodeError:
                pass  # not JSON even repaired: what undecodable says of it
            else:
                self.emit("error", Error(
                    error_type=INVALID_UTF8, retryable=False,
                    message=f"frame {frame.frame_id} is not valid UTF-8; the undecodable bytes "
                            "were replaced by U+FFFD (the envelope keeps them as received)"))
                return doc
        return self.undecodable(frame, error)

    def _typed(self, out: list[ModelEvent]) -> None:
        """Hold the frame's events to their declared field types (module docstring)."""
        model = self.model
        bad: list[str] = []
        if model is not None and (type(model) is not str or len(model) > MODEL_CHARS):
            # Copied onto every event and no content that pieces cut: a "model" of megabytes
            # would make every event of the run too large for a record.
            self.model = model = None
            bad.append("model")
        fits = _FITS
        for event in out:
            if bad and event.model is not model:
                event.model = model
            payload = event.payload
            if fits[type(payload)](payload):
                continue
            for name, types, nullable, empty in _FIELD_TYPES[type(payload)]:
                value = getattr(payload, name)
                if value is None:
                    if nullable:
                        continue
                elif type(value) in types and types[0] is not int and types[0] is not dict:
                    continue  # the common case, without _ill_typed's call
                elif not _ill_typed(value, types, INT32_LIMIT
                                    if name in _INT32_FIELDS[type(payload)] else _INT64,
                                    (type(payload), name) in _STR_MAPS):
                    continue
                setattr(payload, name, empty if empty is not None or nullable else {})
                bad.append(f"{event.kind}.{name} ({type(value).__name__})")
        if bad:
            self.emit("error", Error(
                error_type=UNEXPECTED_SHAPE, retryable=False,
                message=f"frame {self._source_id}: values of an unexpected type, emitted empty: "
                        + ", ".join(dict.fromkeys(bad))))

    def _guard_caught(self, exc: Exception, what: str | None = None) -> None:
        """A handler raised on what the provider sent: the frame's events so far are kept, one
        ``unexpected_shape`` error follows, the adapter goes on (module docstring). ``what``
        names the event that could not be read, when the adapter knows it."""
        where = self._frame.frame_id if self._frame is not None else "(no frame)"
        detail = repr(exc)
        if len(detail) > 300:
            detail = detail[:300] + "…"
        unread = f"{what} could not be read" if what else \
            "a field is missing or of an unexpected type"
        try:
            self.emit("error", Error(
                error_type=UNEXPECTED_SHAPE, retryable=False,
                message=f"frame {where}: {unread} ({type(exc).__name__}: {detail}); what the "
                        "frame gave before it is kept"))
        except Exception:
            pass

    # --- what subclasses implement ------------------------------------------------------------

    def undecodable(self, frame: ProviderFrame, error: orjson.JSONDecodeError) -> Any:
        """A frame body that is not JSON → its document after all, or ``MALFORMED`` once
        reported. Override for sentinels such as Chat's ``[DONE]`` and for repairs."""
        self.malformed(f"not JSON ({error}); first bytes: {bytes(frame.body[:80])!r}")
        return MALFORMED

    def handle(self, doc: Any) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        """Called once at close, before the truncation check. Default: nothing open to flush."""

    @classmethod
    def recognizes(cls, doc: Any) -> bool:
        """True when a decoded frame or object is unmistakably this adapter's API (auto-detect)."""
        return False

    # --- emission helpers ---------------------------------------------------------------------

    @property
    def frame(self) -> ProviderFrame:
        """The frame being translated (during ``close``: the last one fed)."""
        assert self._frame is not None
        return self._frame

    def emit(self, kind: str, payload: Payload) -> None:
        """Append an event of ``kind`` (its payload must be ``KIND_PAYLOAD[kind]``: the
        contract tests check every event the corpus produces)."""
        out = self._out
        index = len(out)
        frame = self._frame
        assert frame is not None, "emit outside feed/close"
        source_id = self._source_id
        envelope = self._envelope
        if envelope is None:  # the frame's first event; its other events share the envelope
            envelope = self._envelope = _new(Envelope)
            envelope.content_type = frame.content_type
            envelope.body = frame.body
        # This runs once per event: the event and its source (and the envelope) are made by
        # object.__new__ and one store per field rather than by calling the classes — CPython
        # 3.11 calls a dataclass through a tuple of its arguments and a C-level call of
        # __init__, ~0.1 µs more for these two. Every field is set, in
        # declaration order (tests/schemas/test_fast_records.py compares with the classes' own
        # constructors); event_id_for is inlined, the index's text taken from a table
        # (formatting an int costs several times more). Callers build payloads positionally on
        # their hot paths: a keyword call of a dataclass costs about twice a positional one.
        source = _new(EventSource)
        source.frame_id = source_id
        source.index = index
        source.transport = frame.transport
        source.cursor = self._cursor
        event = _new(ModelEvent)
        number = INDEX_TEXT[index] if index < INDEXED else str(index)
        event.event_id = f"{self._run_hash}:{source_id}:{number}"
        event.run_id = self.run_id
        event.tenant = self.tenant
        event.provider = self.provider
        event.api = self.api
        event.model = self.model
        event.kind = kind
        event.source = source
        event.received_at = frame.received_at
        event.adapter = self._adapter_id
        event.envelope = envelope
        event.payload = payload
        event.seq = -1
        event.piece = None
        event.elided = None
        if kind == "run.started" and frame.headers and isinstance(payload, RunStarted):
            # The gateway names the call's bundle on its frames; the pure adapter passes it on.
            payload.bundle = frame.headers.get(BUNDLE_FRAME_HEADER)
        out.append(event)

    def elide_last(self, parts: Parts, field: str, from_kind: str) -> None:
        """The done event just emitted carries ``parts``' value in ``field``: when that was too
        large to hold (``adapters/accumulate.py``), say which deltas rebuild it."""
        if parts.elided:
            self._out[-1].elided = Elided(field, from_kind, parts.size)

    def too_large_to_hold(self, parts: Parts, what: str) -> None:
        """A value streamed without deltas of its own was too large to hold
        (``adapters/accumulate.py``): its event carries "" — say so, never drop it silently."""
        if parts.elided:
            self.emit("error", Error(
                error_type="value_too_large", retryable=False,
                message=f"{what} was {parts.size} bytes, more than an adapter holds "
                        f"({HOLD_BYTES}); it is in the frames' envelopes only"))

    def valid_for(self) -> str:
        """Where opaque signatures and encrypted content are valid (Reasoning.valid_for):
        ``provider/model``, or the provider alone while the model is not known."""
        return f"{self.provider}/{self.model}" if self.model else self.provider

    def use_cursor(self, cursor: str) -> None:
        """The provider's cursor for this frame when the body, not the transport, carries it
        (Interactions ``event_id``); events of the frame record it as ``source.cursor``."""
        self._cursor = cursor

    def malformed(self, why: str) -> None:
        """A frame the adapter cannot use: say so in the log of events, and go on."""
        self.emit("error", Error(error_type=MALFORMED_FRAME, retryable=False,
                                 message=f"frame {self.frame.frame_id}: {why}"))

    def protocol_violation(self, why: str) -> None:
        """Well-formed frames the protocol does not allow here: reported, the frame ignored."""
        self.emit("error", Error(error_type=PROTOCOL_VIOLATION, retryable=False,
                                 message=f"frame {self.frame.frame_id}: {why}"))

    def emit_tool_call(self, output_index: int, tool_name: str, tool_call_id: str,
                       arguments: Parts | str | None, item_id: str | None = None,
                       valid: bool = True, free_text: bool = False) -> None:
        """The one way a tool call is finalized: ``tool.call`` with the arguments as
        ``tool_arguments`` rules (no arguments → ``"{}"``; valid only as a JSON object), and,
        when the arguments were too large to hold, the ``elided`` note naming their deltas
        (``arguments_valid`` is then unknown: None). ``valid=False`` when the adapter already
        knows the arguments are damaged (a fragment it could not place). ``free_text=True`` for
        a tool whose input is text by contract (OpenAI custom tools: a grammar, not a JSON
        schema): carried as sent, ``arguments_valid`` None (there is no JSON to judge)."""
        if isinstance(arguments, Parts):
            if arguments.elided:
                self.emit("tool.call", ToolCall(output_index, tool_name, tool_call_id, "",
                                                item_id, arguments_valid=None))
                self.elide_last(arguments, "arguments", "tool.call.delta")
                return
            arguments = arguments.text()
        if free_text:
            self.emit("tool.call", ToolCall(output_index, tool_name, tool_call_id,
                                            arguments or "", item_id, arguments_valid=None))
            return
        text, is_object = tool_arguments(arguments)
        self.emit("tool.call", ToolCall(output_index, tool_name, tool_call_id, text, item_id,
                                        valid and is_object))  # arguments_valid

    def unknown(self, provider_type: str, detail: str | None = None) -> None:
        """The deliberate path for what the reference does not name: keep it, never crash."""
        self.emit("unknown", Unknown(provider_type=provider_type, detail=detail))

    def carry(self, frame: ProviderFrame) -> None:
        """Events of ``frame`` go out with another frame's (a reorder buffer released them
        while a later frame is fed): when ``frame`` is large, what this feed returns is cut into
        pieces as ``frame``'s own feed would have cut them."""
        if len(frame.body) > _LIGHT_FRAME_BYTES:
            self._carries_large = True

    # --- internals ----------------------------------------------------------------------------

    def _end(self) -> list[ModelEvent]:
        out, self._out = self._out, _BETWEEN_FRAMES
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_out"] = []
        state["_envelope"] = None
        del state["_seen"]  # the frame ids of _seen_order: rebuilt from it (half the state's size)
        frame = state.get("_frame")
        if frame is not None and frame.body:
            # Kept for what close() says about the last frame, which never needs its body: a
            # run's state must not carry a delivery of megabytes (schemas/limits.py).
            state["_frame"] = replace(frame, body=b"")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._seen = set(self._seen_order)
        self._out = _BETWEEN_FRAMES  # emit between frames raises, unpickled as made

