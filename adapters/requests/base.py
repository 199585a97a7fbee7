"""What every request renderer shares: the shape of a rendered request and its small helpers.

A renderer module (one per provider API) exposes

- ``API``, ``PROVIDER``: the API it speaks (``ModelEvent.api`` names) and its default provider;
- ``render(request, model, *, stream, provider=PROVIDER) -> dict``: the JSON body;
- ``endpoint(model, *, stream) -> Endpoint``: method, path below the provider's base URL,
  query and the non-secret headers the call needs (auth is the caller's business).

Renderers are pure: no I/O, no clock, the same request renders to the same body. What a
target API cannot express raises ``RenderError`` naming the message and part, rather than
being dropped — except opaque reasoning from another origin, which is dropped on purpose (see
``replayable``).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import orjson

from modelevents.schemas.transcript import Origin, ToolCallPart


@dataclass(frozen=True, slots=True)
class Endpoint:
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WireRequest:
    """A rendered request: everything but the base URL and the credentials."""

    api: str
    provider: str
    model: str
    endpoint: Endpoint
    body: dict[str, Any]


def replayable(origin: Origin | None, provider: str, api: str, model: str) -> bool:
    """May an opaque signature / encrypted blob from ``origin`` go to this target?

    Only back to the provider, API and model that produced it (DESIGN.md "reasoning.done":
    "only replayed where valid"); anywhere else it is dropped — and so is the readable text of
    that reasoning: another model's private reasoning replayed as if it were said aloud would
    change what the conversation claims the assistant said. The visible answer (text parts) and
    the tool calls carry the session over.
    """
    return origin is not None and origin.accepts(provider, api, model)


def arguments_text(call: ToolCallPart) -> str:
    """A call's arguments as JSON text (what OpenAI's wire takes), the model's own text if it
    was not a JSON object."""
    if call.raw_arguments is not None:
        return call.raw_arguments
    return orjson.dumps(call.arguments).decode()


def data_url(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


def decoded_text(data: str) -> str:
    return base64.b64decode(data).decode("utf-8")
