"""What every request renderer shares: the shape of a rendered request and its small helpers.

A renderer module (one per provider API) exposes

- ``API``, ``PROVIDER``: the API it speaks (``ModelEvent.api`` names) and its default provider;
- ``render(request, model, *, stream, provider=PROVIDER) -> dict``: the JSON body;
- ``endpoint(model, *, stream) -> Endpoint``: method, path below the provider's base URL,
  query and the non-secret headers the call needs (auth is the caller's business);
- ``HOSTED: dict[str, Egress]``: the hosted tools it renders (``NeutralRequest.hosted_tools``
  types) and, for each, what the API lets the request restrict at the provider — the table the
  router reads to refuse what a target cannot enforce (``services/gateway/calls/egress.py``);
- optionally ``headers_for(request) -> dict``: headers only some requests need (a beta flag).

Renderers are pure: no I/O, no clock, the same request renders to the same body. What a
target API cannot express raises ``RenderError`` naming the message and part, rather than
being dropped — except opaque reasoning from another origin, which is dropped on purpose (see
``replayable``).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from modelevents.adapters.errors import RenderError
from modelevents.schemas.domains import covered
from modelevents.schemas.hosted_tools import HostedTool
from modelevents.schemas.transcript import Origin, ToolCallPart

# Hosted tools that read from the web wherever the model points them; a sandbox (code_execution,
# shell) does too once it has network.
WEB_TOOLS = frozenset({"web_search", "web_fetch", "url_context", "computer"})
SANDBOXES = frozenset({"code_execution", "shell"})


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


@dataclass(frozen=True, slots=True)
class Egress:
    """What one API enforces at the provider, from the request, for one hosted tool.

    ``allowed_domains`` / ``blocked_domains``: the request can restrict where the tool reads
    (for a sandbox: its network allowlist); ``exclusive``: the API refuses both lists at once
    (Claude). ``network`` (sandboxes): how "no network" holds — ``request`` (a request field
    turns it off), ``sandbox`` (the provider's sandbox has none, by its documentation; nothing to
    send), ``unknown`` (no field, no documented guarantee). ``note``: a sentence for the docs.
    """

    allowed_domains: bool = False
    blocked_domains: bool = False
    exclusive: bool = False
    network: Literal["request", "sandbox", "unknown"] | None = None
    note: str = ""


def domain_problem(egress: Egress, allowed: Sequence[str], blocked: Sequence[str]) -> str | None:
    """Why these rules cannot be enforced with ``egress``, or None.

    Blocked domains outside every allowed one need not be sent: the allowlist already keeps
    the tool away from them. So an API that takes only allowed domains (or not both at once)
    still enforces allowed + blocked when no blocked domain lies inside an allowed one.
    """
    if allowed and not egress.allowed_domains:
        return "it cannot be restricted to allowed domains"
    if not blocked:
        return None
    if egress.blocked_domains and not (egress.exclusive and allowed):
        return None
    if allowed and not any(covered(b, allowed) for b in blocked):
        return None
    if egress.blocked_domains:
        inside = [b for b in blocked if covered(b, allowed)]
        return (f"it takes allowed_domains or blocked_domains, not both, and blocked {inside} "
                "lie inside allowed domains")
    return "it cannot block domains"


def domain_fields(tool: HostedTool, egress: Egress, api: str) -> tuple[list[str], list[str]]:
    """The allowed and blocked domains to send for ``tool`` (blocked ones the allowlist already
    keeps out are not sent); RenderError when the API cannot enforce the tool's rules."""
    allowed: list[str] = list(getattr(tool, "allowed_domains", ()))
    blocked: list[str] = list(getattr(tool, "blocked_domains", ()))
    problem = domain_problem(egress, allowed, blocked)
    if problem:
        raise RenderError(f"hosted tool {tool.type} on {api}: {problem}; drop those domain "
                          "rules or pick a target that enforces them (docs/hosted-tools.md)")
    if allowed and (egress.exclusive or not egress.blocked_domains):
        blocked = []
    return allowed, blocked


def unrenderable(tool: HostedTool, api: str, known: dict[str, Egress]) -> RenderError:
    return RenderError(f"hosted tool {tool.type!r} has no form in {api} (it renders "
                       f"{', '.join(known) or 'no hosted tools'}); target an API whose manifest "
                       f"entry offers hosted_tools.{tool.type}")


def replayable(origin: Origin | None, provider: str, api: str, model: str) -> bool:
    """May an opaque signature / encrypted blob from ``origin`` go to this target?

    Only back to the provider, API and model that produced it (docs/design-notes.md,
    reasoning replay); anywhere else it is dropped — and so is the readable text of
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
