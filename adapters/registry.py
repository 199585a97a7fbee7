"""Which adapter reads an input, and the driver that runs it over whole bodies and cassettes.

- ``ADAPTERS``: provider API name → adapter class; ``ALIASES`` the short names the CLI accepts;
  ``FAMILIES`` the provider names that leave the choice among that provider's APIs to detection.
- ``detect_api``: the request uri when there is one (a cassette records it), else what the
  first decoded frames say through each adapter's ``recognizes``.
- ``normalize_bytes``: one body (SSE, JSON lines, a JSON array, one object) or a whole VCR
  cassette → the ModelEvents of ONE run, ``seq`` assigned in order. In a cassette every model-API
  interaction is its own stream (``i1``, ``i2``, ...) of the same run, because an agentic turn
  spans several provider calls; calls that are not model calls (file uploads, vector stores,
  conversations, auth tokens) are skipped and listed in the result.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from modelevents.adapters import (
    anthropic_messages,
    gemini_generate,
    gemini_interactions,
    openai_chat,
    openai_responses,
)
from modelevents.adapters.anthropic_messages import AnthropicMessagesAdapter
from modelevents.adapters.api_facts import ApiFacts
from modelevents.adapters.base import Adapter
from modelevents.adapters.cassette import Interaction, looks_like_cassette, read_cassette
from modelevents.adapters.errors import UnknownApi
from modelevents.adapters.framing import detect_framing, frames_from_bytes, gc_paused
from modelevents.adapters.gemini_generate import GeminiGenerateAdapter
from modelevents.adapters.gemini_interactions import GeminiInteractionsAdapter
from modelevents.adapters.openai_chat import OpenAIChatAdapter
from modelevents.adapters.openai_responses import OpenAIResponsesAdapter
from modelevents.schemas.errors import DetectionError, InputError
from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame

ADAPTERS: dict[str, type[Adapter]] = {
    "openai-responses": OpenAIResponsesAdapter,
    "openai-chat": OpenAIChatAdapter,
    "anthropic-messages": AnthropicMessagesAdapter,
    # Order matters only as a tie-break (e.g. a bare Google error body): the common API first.
    "gemini-generate": GeminiGenerateAdapter,
    "gemini-interactions": GeminiInteractionsAdapter,
}

# What the gateway, the simulator and the registry know of each API (adapters/api_facts.py),
# declared in the API's own module.
API_FACTS: dict[str, ApiFacts] = {facts.api: facts for facts in (
    openai_responses.FACTS, openai_chat.FACTS, anthropic_messages.FACTS, gemini_generate.FACTS,
    gemini_interactions.FACTS)}

# Unambiguous short names.
ALIASES: dict[str, str] = {
    "anthropic": "anthropic-messages",
    "claude": "anthropic-messages",
    "messages": "anthropic-messages",
    "responses": "openai-responses",
    "chat": "openai-chat",
    "chat-completions": "openai-chat",
    "interactions": "gemini-interactions",
    "generate-content": "gemini-generate",
}

# A provider with several APIs: detection picks among them.
FAMILIES: dict[str, tuple[str, ...]] = {
    "openai": ("openai-responses", "openai-chat"),
    "google": ("gemini-generate", "gemini-interactions"),
    "gemini": ("gemini-generate", "gemini-interactions"),
}

CLI_CHOICES: tuple[str, ...] = ("auto", *ADAPTERS, *ALIASES, *FAMILIES)

# How many decoded frames detection looks at: the first frame usually decides.
_DETECT_FRAMES = 8

# Hosts of OpenAI-compatible and Google endpoints → the provider named on events.
_HOST_PROVIDERS: dict[str, str] = {
    "api.openai.com": "openai",
    "api.anthropic.com": "anthropic",
    "generativelanguage.googleapis.com": "google",
    "aiplatform.googleapis.com": "google",
    "api.groq.com": "groq",
    "api.x.ai": "xai",
    "openrouter.ai": "openrouter",
    "api.deepseek.com": "deepseek",
}
_HOST_SUFFIX_PROVIDERS: tuple[tuple[str, str], ...] = (
    (".openai.azure.com", "azure"),
    (".services.ai.azure.com", "azure"),
    ("-aiplatform.googleapis.com", "google"),  # regional Vertex endpoints
)


@dataclass
class NormalizeResult:
    events: list[ModelEvent]
    api: str  # the API read ("a+b" if a cassette mixed APIs)
    framing: str  # sse | jsonl | json-array | json | cassette
    frame_count: int
    run_id: str
    # Cassettes only: one entry per normalized interaction, and what was left out and why.
    streams: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


# --- choosing the API --------------------------------------------------------------------------


def resolve_api(choice: str) -> tuple[str, ...]:
    """CLI choice → the candidate APIs (one for a name or alias, several for a family/auto)."""
    if choice in ADAPTERS:
        return (choice,)
    if choice in ALIASES:
        return (ALIASES[choice],)
    if choice in FAMILIES:
        return FAMILIES[choice]
    if choice == "auto":
        return tuple(ADAPTERS)
    raise DetectionError(f"unknown provider API {choice!r}; {_choices_hint()}")


def api_facts(api: str) -> ApiFacts:
    """The facts of provider API ``api`` (a ModelEvent.api name, e.g. ``openai-responses``)."""
    try:
        return API_FACTS[api]
    except KeyError:
        raise UnknownApi(f"no provider API named {api!r}; the known APIs are "
                         f"{', '.join(API_FACTS)} (adapters/registry.py registers them)") from None


def webhook_api(provider: str) -> ApiFacts | None:
    """The API whose objects the webhooks at ``/webhooks/{provider}`` name (None: none)."""
    return next((facts for facts in API_FACTS.values()
                 if facts.webhooks is not None and facts.webhooks.provider == provider), None)


def api_for_uri(uri: str | None) -> str | None:
    """The model API a request uri calls, or None for anything else (files, tokens, ...)."""
    if not uri:
        return None
    path = urlsplit(uri).path.rstrip("/")
    segments = path.split("/")
    last = segments[-1]
    if ":streamGenerateContent" in last or ":generateContent" in last:
        return "gemini-generate"
    if last == "messages" and "threads" not in segments:  # not OpenAI Assistants' messages
        return "anthropic-messages"
    if path.endswith("/chat/completions"):
        return "openai-chat"
    for name, api in (("responses", "openai-responses"), ("interactions", "gemini-interactions")):
        # create, retrieve by id (background polling), cancel by id
        if last == name or (len(segments) > 1 and segments[-2] == name) or (
                len(segments) > 2 and segments[-3] == name and last == "cancel"):
            return api
    return None


def provider_for_uri(uri: str | None) -> str | None:
    if not uri:
        return None
    host = (urlsplit(uri).hostname or "").lower()
    if host in _HOST_PROVIDERS:
        return _HOST_PROVIDERS[host]
    for suffix, provider in _HOST_SUFFIX_PROVIDERS:
        if host.endswith(suffix):
            return provider
    return None


def detect_api(docs: Iterable[Any], uri: str | None = None,
               candidates: Iterable[str] | None = None) -> str:
    """The API of decoded frames: by request uri if given and known, else by ``recognizes``.

    Every candidate adapter is asked about each of the first few documents; the API recognizing
    the most documents wins. Raises DetectionError when none, or several equally, recognize them.
    """
    names = tuple(candidates) if candidates is not None else tuple(ADAPTERS)
    by_uri = api_for_uri(uri)
    if by_uri in names:
        return by_uri
    scores = dict.fromkeys(names, 0)
    first_hit: dict[str, int] = {}
    looked = 0
    first_doc = None
    for position, doc in enumerate(docs):
        if position >= _DETECT_FRAMES:
            break
        if looked == 0:
            first_doc = doc
        looked += 1
        for name in names:
            if ADAPTERS[name].recognizes(doc):
                scores[name] += 1
                first_hit.setdefault(name, position)
    best = max(scores.values(), default=0)
    if best == 0 and looked:
        by_envelope = _error_envelope_api(first_doc, names)
        if by_envelope is not None:
            return by_envelope
    if best == 0:
        seen = "no frame decoded as JSON" if looked == 0 else f"{looked} decoded frame(s)"
        raise DetectionError(
            f"cannot tell which provider API produced this input ({seen}, none recognized by "
            f"{', '.join(names)}); name it: {_choices_hint()}")
    winners = [name for name in names if scores[name] == best]
    if len(winners) > 1:
        raise DetectionError(
            f"the input fits several provider APIs equally ({', '.join(winners)}); "
            f"name it: {_choices_hint()}")
    return winners[0]


def _error_envelope_api(doc: Any, names: tuple[str, ...]) -> str | None:
    """A bare HTTP error body names the provider, not the API; that provider's APIs translate
    it alike, so the first candidate of that provider reads it. Anthropic's own error body is
    recognized by its adapter (it says ``"type": "error"``)."""
    error = doc.get("error") if isinstance(doc, dict) else None
    if not isinstance(error, dict) or "message" not in error:
        return None
    if isinstance(error.get("code"), int) and "status" in error:  # google.rpc.Status
        family = FAMILIES["google"]
    elif "type" in error or "param" in error or "code" in error:  # OpenAI's error object
        family = FAMILIES["openai"]
    else:
        return None
    return next((name for name in names if name in family), None)


def _choices_hint() -> str:
    return "--provider " + "|".join(c for c in CLI_CHOICES if c != "auto")


def decoded_docs(frames: Iterable[ProviderFrame], limit: int = _DETECT_FRAMES) -> list[Any]:
    """The first ``limit`` frame bodies that are JSON (sentinels like ``[DONE]`` are not)."""
    docs = []
    for frame in frames:
        try:
            docs.append(orjson.loads(frame.body))
        except orjson.JSONDecodeError:
            continue
        if len(docs) >= limit:
            break
    return docs


# --- the driver --------------------------------------------------------------------------------


def default_run_id(body: bytes, source_name: str | None = None) -> str:
    """Deterministic: the same input always normalizes into the same run (and event ids)."""
    digest = hashlib.blake2b(bytes(body), digest_size=8).hexdigest()
    if not source_name or source_name in ("-", "stdin"):
        return f"run-{digest}"
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(source_name).stem).strip("-.") or "run"
    return f"{stem[:60]}-{digest}"


def translate(frames: Iterable[ProviderFrame], api: str, run_id: str, tenant: str = "default",
              provider: str | None = None) -> list[ModelEvent]:
    """Feed one stream's frames to a fresh adapter and close it."""
    adapter = ADAPTERS[api](run_id, tenant, provider)  # positional: a keyword call costs more
    events: list[ModelEvent] = []
    for frame in frames:
        events += adapter.feed(frame)
    events += adapter.close()
    return events


def normalize_bytes(body: bytes, *, api: str = "auto", framing: str = "auto",
                    run_id: str | None = None, tenant: str = "default",
                    source_name: str | None = None) -> NormalizeResult:
    """A whole body or VCR cassette → the events of one run. Raises InputError subclasses.

    ``framing``: auto | sse | jsonl | json-array | json | cassette.
    """
    body = bytes(body)
    candidates = resolve_api(api)
    run_id = run_id or default_run_id(body, source_name)
    if framing == "cassette" or (framing == "auto" and looks_like_cassette(body)):
        interactions = read_cassette(body)
        with gc_paused():
            return _normalize_cassette(interactions, candidates, run_id, tenant)
    if framing == "auto":
        framing = detect_framing(body)
    frames = frames_from_bytes(body, run_key=run_id, provider="", api="", framing=framing)
    chosen = candidates[0] if len(candidates) == 1 else detect_api(
        decoded_docs(frames), candidates=candidates)
    with gc_paused():  # bulk: several objects per event, all kept (see gc_paused)
        events = _stamp(frames, chosen, run_id, tenant, None)
    _sequence(events)
    return NormalizeResult(events, chosen, framing, len(frames), run_id)


def normalize_file(path: str | Path, *, api: str = "auto", framing: str = "auto",
                   run_id: str | None = None, tenant: str = "default") -> NormalizeResult:
    try:
        body = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    return normalize_bytes(body, api=api, framing=framing, run_id=run_id, tenant=tenant,
                           source_name=str(path))


def _stamp(frames: list[ProviderFrame], api: str, run_id: str, tenant: str,
           provider: str | None) -> list[ModelEvent]:
    """Frames were cut before the API was known: name it on them, then translate."""
    cls = ADAPTERS[api]
    provider = provider or cls.default_provider
    for frame in frames:
        frame.api = api
        frame.provider = provider
        frame.tenant = tenant
    return translate(frames, api, run_id, tenant, provider)


def _sequence(events: list[ModelEvent]) -> None:
    # Offline the driver is the sequencer: one run, contiguous seq from 0.
    for seq, event in enumerate(events):
        event.seq = seq


@dataclass
class CassetteStream:
    """One model API call of a cassette, cut into frames that name their API and provider."""

    stream_id: str
    label: str
    api: str
    framing: str
    frames: list[ProviderFrame]


def cassette_streams(interactions: list[Interaction], candidates: tuple[str, ...], run_id: str,
                     on_skip: Callable[[str], None]) -> Iterator[CassetteStream]:
    """The model API calls of a cassette, in order; each call is its own stream of the run.

    Calls that are no model call (files, vector stores, tokens, an empty body) are left out, each
    with a line to ``on_skip`` that says why.
    """
    for number, interaction in enumerate(interactions, 1):
        label = f"#{number} {interaction.method} {interaction.uri}"
        api = api_for_uri(interaction.uri)
        if api is not None and api not in candidates:
            if len(candidates) != 1:
                on_skip(f"{label}: {api}, not among {', '.join(candidates)}")
                continue
            api = candidates[0]  # the caller named the API: trust it over the uri
        if not interaction.body.strip():
            on_skip(f"{label}: empty response body")
            continue
        try:
            framing = ("sse" if interaction.content_type.startswith("text/event-stream")
                       else detect_framing(interaction.body))
        except InputError as exc:
            on_skip(f"{label}: {exc}")
            continue
        stream_id = f"i{number}"
        frames = frames_from_bytes(interaction.body, run_key=run_id, provider="", api="",
                                   framing=framing, stream_id=stream_id,
                                   http_status=interaction.status)
        if not frames:  # a body of whitespace between events, or SSE without a data line
            on_skip(f"{label}: no frames in the response body")
            continue
        if api is None:
            # Not a known model endpoint (a proxy path, or files/vector stores/conversations/
            # tokens): a model call only if an adapter recognizes what came back.
            try:
                api = detect_api(decoded_docs(frames), candidates=candidates)
            except DetectionError:
                on_skip(f"{label}: not a model API call")
                continue
        provider = provider_for_uri(interaction.uri) or ADAPTERS[api].default_provider
        for frame in frames:
            frame.api, frame.provider = api, provider
        yield CassetteStream(stream_id, label, api, framing, frames)


def _normalize_cassette(interactions: list[Interaction], candidates: tuple[str, ...],
                        run_id: str, tenant: str) -> NormalizeResult:
    events: list[ModelEvent] = []
    streams: list[str] = []
    skipped: list[str] = []
    apis: list[str] = []
    frame_count = 0
    # One adapter per API follows the whole run (see Adapter: "one instance follows one run"):
    # a tool-loop continuation resumes the run, a poll re-reading a finished object adds
    # nothing, successive poll snapshots are diffed — none of which a fresh adapter could know.
    open_adapters: dict[str, Adapter] = {}
    for stream in cassette_streams(interactions, candidates, run_id, skipped.append):
        api, frames = stream.api, stream.frames
        adapter = open_adapters.get(api)
        if adapter is None:
            adapter = open_adapters[api] = ADAPTERS[api](run_id, tenant=tenant,
                                                         provider=frames[0].provider)
        for frame in frames:
            frame.tenant = tenant
            events += adapter.feed(frame)
        if frames[0].transport != "poll" and not adapter.stream_complete:
            # A stream cut short: report it here, where it happened; a later call of the run
            # starts afresh. (A poll snapshot that is not terminal yet is not a cut: the next
            # poll continues it.)
            events += adapter.close()
            del open_adapters[api]
        frame_count += len(frames)
        streams.append(f"{stream.stream_id}: {stream.label} → {api}, {stream.framing}, "
                       f"{len(frames)} frames")
        apis.append(api)
    if not streams:
        raise DetectionError(
            "the cassette holds no model API call that modelevents can read"
            + (f" (skipped: {'; '.join(skipped)})" if skipped else "")
            + f"; {_choices_hint()}")
    for adapter in open_adapters.values():
        events += adapter.close()
    _sequence(events)
    api_name = "+".join(dict.fromkeys(apis))
    return NormalizeResult(events, api_name, "cassette", frame_count, run_id, streams, skipped)
