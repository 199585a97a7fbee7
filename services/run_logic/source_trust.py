"""Judging what a hosted tool brought back against the tenant's policy, after the fact. Pure.

The worker hands each frame's candidate events to :func:`judge` with the tenant's
:class:`~modelevents.services.policy.hosted.HostedPolicy` (``worker.policy``). It

- stamps every ``citation`` with the verdict on its URL (or ``file:ID``), and every
  ``hosted.call`` / ``hosted.result`` with the verdict on each source of its arguments and
  evidence (``source_trust``: URL, ``file:ID``, ``mcp:LABEL``) and the worst of them (``trust``);
- adds a ``policy.violation`` event after the event where it found one:

  - ``blocked_source``: a citation, or a hosted call's arguments or evidence, from a blocked
    source (the ``sources.blocked`` list or the egress ``blocked_domains``);
  - ``mcp_server_not_allowed``: an MCP call to a server the tenant's ``mcp_servers`` do not name
    (by label or URL);
  - ``code_network_forbidden``: with ``code_network: false``, code execution whose code or
    output shows network use (:data:`NETWORK_USE`: URLs, HTTP clients, sockets, package
    installs). The stream shows what the code says and printed, never the packets: this finds
    the attempts the code or its output reveal, not a connection made silently;
  - ``injection_in_hosted_content``: what a hosted tool brought back (its evidence: fetched
    pages, search snippets, MCP results, code output) holds text that addresses the model —
    the tool executor's injection signals (``services/policy/injection.py``), named in the note.

A violation's id is derived from the run, the violation, the call and the source, so the same
finding on a call and on its result is one event (the sequencer drops the repeated id). The run
machine flags the run ``needs_reconciliation`` on each (fail-safe) and counts the verdicts.
Without a policy for the tenant nothing changes: every verdict stays ``unknown``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterator
from typing import Any

import orjson

from modelevents.schemas.events import (
    Citation,
    Envelope,
    EventSource,
    Hosted,
    ModelEvent,
    PolicyViolation,
)
from modelevents.schemas.vocabulary import PolicyViolationType, SourceTrust
from modelevents.services.policy.hosted import HostedPolicy, trust_of

__all__ = ["ADAPTER", "MAX_SOURCES", "MAX_SOURCE_CHARS", "NETWORK_USE", "judge", "sources_of"]

ADAPTER = "modelevents-policy/1"  # the adapter field of a policy.violation: no adapter made it
# Worst first: a hosted call's trust is the first of these among its sources' verdicts.
_SEVERITY: tuple[SourceTrust, ...] = ("blocked", "untrusted", "unknown", "trusted")
# Keys of arguments and evidence whose values name sources, by provider API (url: OpenAI,
# Anthropic; uri: Gemini; urls: web fetch arguments; server_url: MCP).
_URL_KEYS = frozenset({"url", "uri", "urls", "server_url"})
_FILE_KEYS = frozenset({"file_id"})
_MCP_LABEL_KEYS = frozenset({"server_label", "server_name"})
_CODE_KEYS = frozenset({"code", "input", "command", "stdout", "stderr", "output", "result",
                        "logs"})
# Per event, a hostile evidence must not grow the event without bound: source_trust is repeated
# on every piece of an event cut into pieces (schemas/pieces.py), so it stays small (~50 KB).
MAX_SOURCES = 50
MAX_SOURCE_CHARS = 1024  # a longer source is judged whole and kept cut to this
# How much of a hosted call's evidence text is scanned for injection (a page can be megabytes;
# what a model reads first is at its start).
MAX_SCANNED_CHARS = 256 * 1024
_MAX_DEPTH = 12
NETWORK_USE = re.compile(
    r"https?://|\b(?:requests|httpx|aiohttp|urllib\d?|http\.client|socket|ftplib|smtplib)\b"
    r"|\b(?:curl|wget)\s|\bpip3? install\b|\bnpm install\b", re.IGNORECASE)


def judge(events: list[ModelEvent], policy: HostedPolicy | None) -> list[ModelEvent]:
    """``events`` with their verdicts, each violation after the event it was found in."""
    if policy is None:
        return events
    out: list[ModelEvent] = []
    for event in events:
        payload = event.payload
        if event.piece is not None:
            # A piece holds part of each string (schemas/pieces.py), and every piece must carry
            # the same verdicts: an event the adapter already cut is left unjudged.
            out.append(event)
        elif isinstance(payload, Citation):
            event.payload = payload = _judged_citation(payload, policy)
            out.append(event)
            source = _citation_source(payload)
            if payload.trust == "blocked" and source:
                out.append(_violation(event, "blocked_source", None, source,
                                      f"a citation from the blocked source {source}"))
        elif isinstance(payload, Hosted):
            event.payload = payload = _judged_hosted(payload, policy)
            out.append(event)
            out += _hosted_violations(event, payload, policy)
        else:
            out.append(event)
    return out


def _citation_source(payload: Citation) -> str | None:
    return payload.url or (f"file:{payload.file_id}" if payload.file_id else None)


def _judged_citation(payload: Citation, policy: HostedPolicy) -> Citation:
    source = _citation_source(payload)
    return dataclasses.replace(payload, trust=trust_of(source, policy) if source else "unknown")


def _judged_hosted(payload: Hosted, policy: HostedPolicy) -> Hosted:
    verdicts = {source[:MAX_SOURCE_CHARS]: trust_of(source, policy)
                for source in sources_of(payload)}
    trust: SourceTrust = next((t for t in _SEVERITY if t in verdicts.values()), "unknown")
    return dataclasses.replace(payload, trust=trust, source_trust=verdicts)


def sources_of(payload: Hosted) -> list[str]:
    """The sources a hosted call names in its authority, arguments and evidence (at most
    :data:`MAX_SOURCES`, in order of appearance)."""
    found: dict[str, None] = {}
    if payload.authority.startswith("mcp:"):
        found[payload.authority] = None
    for text in (payload.arguments, payload.evidence):
        for key, value in _leaves(_parsed(text), None, 0):
            if len(found) >= MAX_SOURCES:
                break
            if key in _URL_KEYS and value.startswith(("http://", "https://")):
                found[value] = None
            elif key in _FILE_KEYS:
                found[f"file:{value}"] = None
            elif key in _MCP_LABEL_KEYS and payload.tool_type == "mcp":
                found[f"mcp:{value}"] = None
    return list(found)[:MAX_SOURCES]


def _parsed(text: str | None) -> Any:
    if not text:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


def _leaves(node: Any, key: str | None, depth: int) -> Iterator[tuple[str | None, str]]:
    """Every string of a JSON tree with the key it is under (a list's items: the list's key)."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(node, str):
        yield key, node
    elif isinstance(node, dict):
        for name, value in node.items():
            yield from _leaves(value, name, depth + 1)
    elif isinstance(node, list):
        for value in node:
            yield from _leaves(value, key, depth + 1)


def _hosted_violations(event: ModelEvent, payload: Hosted,
                       policy: HostedPolicy) -> list[ModelEvent]:
    found: list[ModelEvent] = []
    tool = (f"{payload.name} ({payload.tool_type})"
            if payload.name and payload.name != payload.tool_type else payload.tool_type)
    for source, trust in payload.source_trust.items():
        if trust == "blocked":
            found.append(_violation(event, "blocked_source", payload.call_id, source,
                                    f"{tool} used the blocked source {source}"))
    if payload.tool_type == "mcp":
        server = _unlisted_mcp_server(payload, policy)
        if server is not None:
            found.append(_violation(event, "mcp_server_not_allowed", payload.call_id, server,
                                    f"MCP call {payload.name or '(unnamed)'!r} to {server}, a server the tenant's "
                                    "mcp_servers do not name"))
    signals = _injection_in(payload)
    if signals:
        found.append(_violation(event, "injection_in_hosted_content", payload.call_id, None,
                                f"{tool} brought back text that addresses the model "
                                f"({', '.join(signals)}): data, not instructions"))
    if payload.tool_type == "code_execution" and not policy.code_network:
        match = _network_use(payload)
        if match is not None:
            found.append(_violation(event, "code_network_forbidden", payload.call_id, None,
                                    f"code execution shows network use ({match!r}) where the "
                                    "tenant's code_network is false"))
    return found


def _unlisted_mcp_server(payload: Hosted, policy: HostedPolicy) -> str | None:
    """The MCP server of the call when the policy does not list it (by label or URL)."""
    labels = {s.label for s in policy.mcp_servers}
    urls = {s.url.rstrip("/") for s in policy.mcp_servers}
    servers = [s for s in payload.source_trust if s.startswith("mcp:")]
    urls_used = [s for s in payload.source_trust
                 if s.startswith(("http://", "https://")) and _is_server_url(payload, s)]
    if any(s.removeprefix("mcp:") in labels for s in servers) or any(
            u.rstrip("/") in urls for u in urls_used):
        return None
    named = servers + urls_used
    return named[0] if named else "an unnamed server"


def _is_server_url(payload: Hosted, url: str) -> bool:
    return any(key == "server_url" and value == url
               for text in (payload.arguments, payload.evidence)
               for key, value in _leaves(_parsed(text), None, 0))


def _injection_in(payload: Hosted) -> list[str]:
    """The injection signals of the evidence's text (each string of its JSON, or the text)."""
    if not payload.evidence:
        return []
    # Imported here: replay reads this module's ADAPTER in a core install, which lacks the
    # confusables data the signals need (the worker's extra has it).
    from modelevents.services.policy.injection import injection_signals

    parsed = _parsed(payload.evidence)
    texts = ([value for _key, value in _leaves(parsed, None, 0)] if parsed is not None
             else [payload.evidence])
    budget, signals = MAX_SCANNED_CHARS, dict[str, None]()
    for text in texts:
        if budget <= 0:
            break
        signals.update(dict.fromkeys(injection_signals(text[:budget])))
        budget -= len(text)
    return list(signals)


def _network_use(payload: Hosted) -> str | None:
    for text in (payload.arguments, payload.evidence):
        for key, value in _leaves(_parsed(text), None, 0):
            if key in _CODE_KEYS:
                match = NETWORK_USE.search(value)
                if match is not None:
                    return match.group(0).strip()
    return None


def _violation(found_in: ModelEvent, violation: PolicyViolationType, call_id: str | None,
               source: str | None, note: str) -> ModelEvent:
    key = "\x00".join((found_in.run_id, violation, call_id or "", source or ""))
    event_id = "pv_" + hashlib.sha256(key.encode()).hexdigest()[:32]
    origin = found_in.source
    return ModelEvent(
        event_id=event_id, run_id=found_in.run_id, tenant=found_in.tenant,
        provider=found_in.provider, api=found_in.api, model=found_in.model,
        kind="policy.violation",
        source=EventSource(frame_id=origin.frame_id, index=origin.index,
                           transport=origin.transport, cursor=origin.cursor),
        received_at=found_in.received_at, adapter=ADAPTER,
        envelope=Envelope(content_type="application/json", body=orjson.dumps(
            {"found_in": found_in.event_id, "kind": found_in.kind})),
        payload=PolicyViolation(violation=violation, note=note, call_id=call_id, source=source))
