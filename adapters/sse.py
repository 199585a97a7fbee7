"""Incremental Server-Sent Events decoder (WHATWG HTML, "Interpreting an event stream").

Bytes in, messages out; chunks may split the stream at any byte, including inside a line ending
or a multi-byte UTF-8 character, because the decoder works on bytes and only decodes the short
``event`` and ``id`` values. ``data`` stays bytes, verbatim: providers put JSON there and the
adapters hand it to orjson directly, so a frame with invalid UTF-8 reaches the adapter unchanged
(and becomes its ``malformed_frame`` error) instead of being silently repaired here.

What the spec asks, and where it is done:
- line endings CRLF, LF and CR — all rewritten to LF as chunks arrive (``feed``), remembering a
  CR at the end of a chunk so that an LF opening the next chunk is not a second line ending;
- one leading BOM is dropped (``_strip_bom``);
- a blank line dispatches; ``data`` lines are joined with LF; a block without any ``data`` field
  dispatches nothing; ``:`` starts a comment; a line without a colon is a field with an empty
  value; one space after the colon is dropped, trailing spaces are kept (``_parse_lines``);
- ``id`` containing NUL is ignored; the last event id persists across messages, as the
  ``lastEventId`` a reconnecting client sends; ``retry`` takes ASCII digits only.

One deliberate departure: at ``close()`` a final event that lacks its terminating blank line is
dispatched, not discarded (recorded bodies often end right after the last ``data:`` line). Pass
``strict=True`` for the spec's discard.

More on this module: docs/adapters.md, ``adapters/sse.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelevents.adapters.errors import InputLimitError
from modelevents.adapters.limits import current_limits

_BOM = b"\xef\xbb\xbf"
# One event of an `event:` line, one `data:` line and the blank line (one optional space after
# each colon is the field separator's, as the spec drops it).
_EVENT_DATA = re.compile(rb"event: ?([^\n]*)\ndata: ?([^\n]*)\n\n")
_LF = 0x0A


def as_tuple(*fields: Any) -> tuple[Any, ...]:
    """The plain-tuple message maker: (event, data, id, retry). A tuple costs far less than an
    SSEMessage, and the decoder's whole-chunk fast paths build it inline, without this call."""
    return fields


@dataclass(slots=True)
class SSEMessage:
    event: str | None  # the `event:` field; None when absent or empty (the spec's "message")
    data: bytes  # the `data:` lines joined with LF, verbatim bytes
    id: str | None  # last event id in effect when dispatched (persists across messages)
    retry: int | None  # a `retry:` value set since the previous message, if any


class SSEDecoder:
    """Feed bytes as they arrive; get each message once its blank line has been seen."""

    __slots__ = ("strict", "last_event_id", "retry", "_pending", "_tail_lf", "_cr_pending",
                 "_at_start", "_head", "_retry_new", "_names", "_make", "max_event_bytes",
                 "_pending_size")

    def __init__(self, *, strict: bool = False,
                 message: Callable[[str | None, bytes, str | None, int | None], Any] = SSEMessage,
                 max_event_bytes: int | None = None) -> None:
        """``message`` builds what ``feed`` returns from (event, data, id, retry); bulk callers
        that consume messages at once pass ``as_tuple`` and skip an object per frame.
        ``max_event_bytes``: the longest event accepted (default: the limits in effect)."""
        self.strict = strict
        self.max_event_bytes = (current_limits().max_event_bytes if max_event_bytes is None
                                else max_event_bytes)
        self._pending_size = 0  # bytes in _pending: the open event's length so far
        self._make = message
        self.last_event_id: str | None = None
        self.retry: int | None = None  # the reconnection time currently in effect
        self._pending: list[bytes] = []  # LF-normalized bytes after the last blank line
        self._tail_lf = False  # the pending bytes end with LF (a blank line may straddle chunks)
        self._cr_pending = False  # the previous chunk ended with CR: a leading LF belongs to it
        self._at_start = True  # a BOM may still come
        self._head = b""  # first bytes held back while they could still be a split BOM
        self._retry_new: int | None = None
        self._names: dict[bytes, str | None] = {}

    def feed(self, chunk: bytes | bytearray | memoryview) -> list[SSEMessage]:
        """Bytes as they arrive → the messages completed by them (possibly none)."""
        if not chunk:
            return []
        chunk = bytes(chunk)
        if self._at_start:
            chunk = self._strip_bom(chunk)
            if not chunk:
                return []
        if self._cr_pending:
            self._cr_pending = False
            if chunk[0] == _LF:
                chunk = chunk[1:]
                if not chunk:
                    return []
        if chunk.find(b"\r") >= 0:
            self._cr_pending = chunk[-1] == 0x0D
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if (not chunk.endswith(b"\n\n") and chunk.find(b"\n\n") < 0
                and not (self._tail_lf and chunk[0] == _LF)):
            self._pending.append(chunk)
            self._tail_lf = chunk[-1] == _LF
            self._pending_size += len(chunk)
            if self._pending_size > self.max_event_bytes:
                self._too_long(self._pending_size)
            return []
        if self._pending:
            self._pending.append(chunk)
            chunk = b"".join(self._pending)
            self._pending.clear()
        self._pending_size = 0
        if len(chunk) > self.max_event_bytes:  # rare: only then can one event be too long
            self._check_events(chunk)
        make = self._make
        last_id = self.last_event_id
        retry_new = self._retry_new
        names = self._names
        if retry_new is None and chunk.endswith(b"\n\n"):
            whole = _whole_events(chunk, last_id, names, make)
            if whole is not None:
                self._tail_lf = False
                return whole
        blocks = chunk.split(b"\n\n")
        rest = blocks.pop()
        if rest:
            self._pending.append(rest)
            self._tail_lf = rest[-1] == _LF
            self._pending_size = len(rest)
        else:
            self._tail_lf = False
        out: list[SSEMessage] = []
        append = out.append
        for block in blocks:
            # Fast paths, inlined: a lone `data:` line (Chat Completions, Gemini, most
            # recordings) and `event:` + one `data:` line (Anthropic, OpenAI Responses).
            if retry_new is None:
                if block.startswith(b"data:"):
                    if block.find(b"\n") < 0:
                        data = block[6:] if block.startswith(b" ", 5) else block[5:]
                        append(make(None, data, last_id, None))
                        continue
                elif block.startswith(b"event:"):
                    nl = block.find(b"\n")  # >= 6 when found: block[6] exists below
                    if (nl > 0 and block.startswith(b"data:", nl + 1)
                            and block.find(b"\n", nl + 1) < 0):
                        raw = block[7:nl] if block[6] == 0x20 else block[6:nl]
                        name = names.get(raw)
                        if name is None:
                            name = _event_name(raw, names)
                        start = nl + 7 if block.startswith(b" ", nl + 6) else nl + 6
                        append(make(name, block[start:], last_id, None))
                        continue
            self._parse_lines(block.split(b"\n"), out)
            last_id, retry_new = self.last_event_id, self._retry_new
        return out

    def close(self) -> list[SSEMessage]:
        """End of input: flush a final unterminated event (unless strict) and reset."""
        out: list[SSEMessage] = []
        if self._at_start and self._head:  # fewer than 3 bytes, all a BOM prefix
            self._pending.append(self._head)
        rest = b"".join(self._pending)
        if rest and not self.strict:
            self._parse_lines(rest.split(b"\n"), out)
        self._pending.clear()
        self._pending_size = 0
        self._tail_lf = self._cr_pending = False
        self._at_start, self._head = True, b""
        self._retry_new = None
        return out

    # --- internals ----------------------------------------------------------------------------

    def _check_events(self, chunk: bytes) -> None:
        longest = max(map(len, chunk.split(b"\n\n")))
        if longest > self.max_event_bytes:
            self._too_long(longest)

    def _too_long(self, size: int) -> None:
        raise InputLimitError(f"an SSE event of {size:,} bytes or more", "max_event_bytes",
                              value=self.max_event_bytes)

    def _strip_bom(self, chunk: bytes) -> bytes:
        head = self._head + chunk
        if len(head) < 3 and _BOM.startswith(head):
            self._head = head  # could still become a BOM with the next chunk
            return b""
        self._at_start, self._head = False, b""
        return head[3:] if head.startswith(_BOM) else head

    def _message(self, event: str | None, data: bytes, out: list[SSEMessage]) -> None:
        out.append(self._make(event, data, self.last_event_id, self._retry_new))
        self._retry_new = None

    def _parse_lines(self, lines: list[bytes], out: list[SSEMessage]) -> None:
        event: bytes = b""
        data: list[bytes] | None = None
        for line in lines:
            if not line:  # blank line inside a block (runs of blank lines): dispatch
                if data is not None:
                    self._message(_event_name(event, self._names), b"\n".join(data), out)
                event, data = b"", None
                continue
            colon = line.find(b":")
            if colon == 0:
                continue  # comment
            if colon < 0:
                field, value = line, b""
            else:
                field, value = line[:colon], line[colon + 1:]
                if value[:1] == b" ":
                    value = value[1:]
            if field == b"data":
                if data is None:
                    data = [value]
                else:
                    data.append(value)
            elif field == b"event":
                event = value
            elif field == b"id":
                if b"\x00" not in value:
                    self.last_event_id = value.decode("utf-8", "replace")
            elif field == b"retry":
                if value and value.isdigit():  # bytes.isdigit: ASCII digits only, as the spec says
                    self.retry = self._retry_new = int(value)
            # any other field name is ignored, as the spec says
        if data is not None:
            self._message(_event_name(event, self._names), b"\n".join(data), out)


def messages_of_body(body: bytes) -> list[tuple[str | None, bytes, str | None, int | None]]:
    """Every message of a whole SSE body as (event, data, id, retry) tuples: what an
    ``SSEDecoder(message=as_tuple)`` fed the body and closed returns.

    The bulk path (``adapters/framing.frames_from_bytes``): a body of only whole one-line
    events, without CR or BOM (what providers send and recordings keep), is cut without making
    a decoder — its construction, prologue and close cost ~2 µs, a fifth of a 10-frame stream's
    cutting. Anything else goes through the decoder."""
    # (Slices compared and find, not endswith and `in`: in CPython 3.11 a bytes method parses
    # its arguments as a tuple and `bytes in bytes` first fails to read its operand as an
    # integer, raising and clearing a TypeError — each several times the cost of a slice.)
    if (body[-2:] == b"\n\n" and len(body) <= current_limits().max_event_bytes
            and body.find(b"\r") < 0):
        whole = _whole_events(body, None, {}, as_tuple)
        if whole is not None:
            return whole
    decoder = SSEDecoder(message=as_tuple)
    messages: list[Any] = decoder.feed(body) + decoder.close()
    return messages


def _whole_events(chunk: bytes, last_id: str | None, names: dict[bytes, str | None],
                  make: Callable[[str | None, bytes, str | None, int | None], Any]
                  ) -> list[Any] | None:
    """The messages of a chunk (ending with a blank line, LF line endings, no BOM, no retry
    pending) made only of whole one-line ``data: `` events (Chat Completions, both Gemini APIs)
    or only of ``event:`` + one-line ``data:`` events (Anthropic, OpenAI Responses); None when
    it is another shape (the decoder's general path then reads it all)."""
    if chunk[:6] == b"data: ":
        payloads = chunk[6:-2].split(b"\n\ndata: ")  # without the first `data: `, last LF LF
        # No line break but the separators: nothing but whole one-line `data: ` events.
        # (One scan of the joined payloads costs less than a test of each payload.)
        if b"".join(payloads).find(b"\n") >= 0:
            return None
        if make is as_tuple:  # a tuple display: no call per message
            tuples: list[Any] = [(None, data, last_id, None) for data in payloads]
            return tuples
        return [make(None, data, last_id, None) for data in payloads]
    if chunk[:6] != b"event:":
        return None
    # Cut by one regular expression whose matches must tile the chunk.
    out: list[Any] = []
    append = out.append
    plain = make is as_tuple
    position = 0
    for match in _EVENT_DATA.finditer(chunk):
        if match.start() != position:
            return None
        position = match.end()
        raw, data = match.groups()
        name = names.get(raw)
        if name is None:
            name = _event_name(raw, names)
        append((name, data, last_id, None) if plain else make(name, data, last_id, None))
    return out if position == len(chunk) else None


def _event_name(raw: bytes, names: dict[bytes, str | None]) -> str | None:
    """An ``event`` field's value; a stream uses a handful of names: each is decoded once."""
    name = names.get(raw)
    if name is None:
        name = raw.decode("utf-8", "replace") or None
        if len(names) < 256:
            names[raw] = name
    return name
