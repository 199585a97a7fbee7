"""What the services need to know about a provider API besides its frames: the type, declared once.

Each API's module declares one :class:`ApiFacts` beside its adapter (``FACTS`` in
``adapters/openai_responses.py`` …) and ``adapters/registry.py`` registers it
(``api_facts(api)``). The gateway, the simulator and the registry read every API-specific fact
from there, so adding an API means: its adapter, its request renderer, its facts, registered —
nothing else to edit.

- :class:`FollowUp` — what the API offers after the create call: read the object back, cancel
  it, resume its stream (OpenAI Background mode guide, Gemini Interactions API reference).
- :class:`Webhooks` — the signed webhooks that name the API's objects (OpenAI Webhooks guide,
  Gemini Interactions API reference): which gateway URL receives them, which event types name an
  object to fetch, where the object id is in the payload.
- the cursor a stream frame carries (where a cut stream resumes), the object statuses after
  which nothing more happens without a new request, how the key is sent, how the API frames
  its SSE events.

Facts are data and small pure functions: no I/O, like the adapters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["ApiFacts", "FollowUp", "Webhooks", "bearer_auth", "key_header_auth",
           "sse_id_cursor", "body_field_cursor"]


@dataclass(frozen=True)
class FollowUp:
    """What an API offers after the create call (the create call itself is rendered by
    ``adapters/requests``): read the object back, cancel it, resume its stream."""

    get: str | None = None  # path of the object ({id})
    cancel: str | None = None  # path that cancels it ({id})
    resume_param: str | None = None  # GET {get}?stream=true&<param>=<cursor>
    resume_background_only: bool = False  # only a background call's stream can be resumed


@dataclass(frozen=True)
class Webhooks:
    """The provider's signed webhooks about this API's objects."""

    provider: str  # the gateway's URL and config name: POST /webhooks/{provider}
    fetch_prefix: str  # event types naming an object whose content the gateway fetches
    # The object id a payload's ``data`` names (a str, or anything else: none).
    object_id: Callable[[dict[str, Any]], Any] = field(default=lambda data: data.get("id"))


def bearer_auth(key: str) -> dict[str, str]:
    """``Authorization: Bearer <key>`` (OpenAI API authentication)."""
    return {"authorization": f"Bearer {key}"}


def key_header_auth(name: str, **fixed: str) -> Callable[[str], dict[str, str]]:
    """The key in header ``name``, with fixed headers beside it (e.g. an API version)."""
    return lambda key: {name: key, **fixed}


def sse_id_cursor(sse_id: str | None, body: bytes) -> str | None:
    """The SSE ``id`` field is the cursor (or there is none)."""
    return sse_id


def body_field_cursor(name: str, *, sse_id_first: bool) -> Callable[[str | None, bytes],
                                                                     str | None]:
    """The cursor is field ``name`` of the frame's JSON body (an int or a non-empty string);
    ``sse_id_first``: the SSE ``id`` wins when the stream sets one."""

    def from_body(sse_id: str | None, body: bytes) -> str | None:
        try:
            value = _loads(body).get(name)
        except (orjson.JSONDecodeError, AttributeError):
            return None
        if type(value) is int:  # not a bool
            return str(value)
        return value if type(value) is str and value else None

    def sse_id_else_body(sse_id: str | None, body: bytes) -> str | None:
        return sse_id if sse_id else from_body(sse_id, body)

    return sse_id_else_body if sse_id_first else from_body


_loads = orjson.loads


@dataclass(frozen=True)
class ApiFacts:
    """One provider API as the gateway, the simulator and the registry know it."""

    api: str  # ModelEvent.api
    provider: str  # the provider named on frames and events (the adapter's default_provider)
    config_provider: str  # the gateway config's ``providers.<name>``
    # The headers that carry the API key (the gateway builds them only when it sends).
    auth_headers: Callable[[str], dict[str, str]]
    follow_up: FollowUp = FollowUp()
    # Object statuses after which nothing more happens without a new request: a poll reading
    # one stops polling. Empty: the API has no object to poll.
    terminal_statuses: frozenset[str] = frozenset()
    # (SSE id, body) of a stream frame → the cursor a resume starts after.
    stream_cursor: Callable[[str | None, bytes], str | None] = sse_id_cursor
    # The key of the provider object in the stream's events ({"response": {...}}): a
    # background object's first state. None: the stream carries no such object.
    stream_object_key: str | None = None
    # How the API frames an SSE event: the body field it names in the ``event:`` line (None:
    # no ``event:`` line) and the line ending.
    sse_event_field: str | None = None
    sse_line_end: bytes = b"\n"
    sse_content_type: str = "text/event-stream"
    webhooks: Webhooks | None = None
