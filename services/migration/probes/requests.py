"""The minimal request that exercises each capability, as the body of ``POST /v1/runs``.

``plan(resolved, max_output_tokens)`` gives one ``Probe`` per capability the manifest claims for
the target, in the vocabulary's order: the neutral request that asks for exactly that capability
(one user message, a small ``max_output_tokens``, the capability in
``required_capabilities``), or no request and the reason when no single minimal request can show
it (server_state needs a second call, webhooks a public URL, file_search a vector store, mcp a
server). Pure: nothing is sent here.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from modelevents.schemas.hosted_tools import HostedTool
from modelevents.schemas.transcript import CAPABILITIES
from modelevents.services.gateway.calls.capabilities import Resolved

__all__ = ["Probe", "plan", "NOT_PROBED"]

# A 1×1 PNG, a one-page PDF saying "ok" and 10 ms of silence (8 kHz, 8-bit WAV): the smallest
# inputs of each modality a provider accepts.
_PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0f01f0005000201e221bc330000000049454e44ae426082"
)).decode()
_PDF = base64.b64encode(
    b"%PDF-1.1\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
    b"2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n"
    b"3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 72 72]/Contents 4 0 R>>endobj\n"
    b"4 0 obj<</Length 21>>stream\nBT /F1 12 Tf (ok) Tj ET\nendstream endobj\n"
    b"trailer<</Root 1 0 R>>\n%%EOF\n").decode()
_WAV = base64.b64encode(
    b"RIFF" + (36 + 80).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
    + (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + (8000).to_bytes(4, "little")
    + (8000).to_bytes(4, "little") + (1).to_bytes(2, "little") + (8).to_bytes(2, "little")
    + b"data" + (80).to_bytes(4, "little") + b"\x80" * 80).decode()

_ECHO = {"name": "probe_echo", "description": "Echo a word back.",
         "parameters": {"type": "object", "properties": {"word": {"type": "string"}},
                        "required": ["word"], "additionalProperties": False}}
_CLOCK = {"name": "probe_clock", "description": "The current UTC time.",
          "parameters": {"type": "object", "properties": {}, "additionalProperties": False}}
_ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}},
                  "required": ["answer"], "additionalProperties": False}

# Capabilities no single minimal request can show, and why (recorded as inconclusive).
NOT_PROBED = {
    "server_state": "needs a second call that continues the first one's stored state",
    "webhooks": "needs a public URL the provider can deliver to",
}
# What a hosted tool is asked to do.
_HOSTED_TASKS = {
    "web_search": "Search the web for the capital of France and cite the page.",
    "web_fetch": "Fetch https://example.com and give its title.",
    "code_execution": "Run code that prints 6*7 and give the output.",
    "image_generation": "Generate a 1-pixel white image.",
    "url_context": "Read https://example.com and give its title.",
    "google_maps": "Find the Eiffel Tower on the map and give its address.",
    "shell": "Run `echo ok` in the shell.",
    "computer": "Take a screenshot.",
    "tool_search": "Find a tool that tells the time.",
}
_HOSTED_ADAPTER: TypeAdapter[Any] = TypeAdapter(HostedTool)


@dataclass(frozen=True, slots=True)
class Probe:
    capability: str
    request: dict[str, Any] | None  # None: not probed, ``reason`` says why
    reason: str = ""


def _user(*parts: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "parts": list(parts)}]


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _hosted(tool: str) -> dict[str, Any] | str:
    """The hosted tool's declaration, or why it cannot be declared without the user's setup."""
    try:
        _HOSTED_ADAPTER.validate_python({"type": tool})
    except ValidationError as exc:
        missing = ", ".join(str(e["loc"][-1]) for e in exc.errors() if e["type"] == "missing")
        if not missing:
            return f"a neutral request cannot enable it (hosted_tools has no {tool})"
        return f"needs configuration the probe does not have ({missing})"
    return {"type": tool}


def _body(capability: str, resolved: Resolved) -> dict[str, Any] | str:
    """The request's capability-specific fields, or why none is sent."""
    if capability in NOT_PROBED:
        return NOT_PROBED[capability]
    if capability == "input.text":
        return {"transcript": _user(_text("Reply with the single word: ok."))}
    if capability == "input.image":
        return {"transcript": _user(_text("What colour is this image? One word."),
                                    {"type": "image", "data": _PNG, "media_type": "image/png"})}
    if capability == "input.file":
        return {"transcript": _user(_text("What word does this document say? One word."),
                                    {"type": "file", "data": _PDF,
                                     "media_type": "application/pdf", "filename": "probe.pdf"})}
    if capability == "input.audio":
        return {"transcript": _user(_text("Is this audio silent? Answer yes or no."),
                                    {"type": "file", "data": _WAV, "media_type": "audio/wav",
                                     "filename": "probe.wav"})}
    if capability == "tools":
        return {"transcript": _user(_text("Call probe_echo with the word ok.")), "tools": [_ECHO]}
    if capability == "parallel_tool_calls":
        return {"transcript": _user(_text("Call probe_echo with the word ok and probe_clock, "
                                          "both at once in this turn.")),
                "tools": [_ECHO, _CLOCK]}
    if capability == "structured_output":
        return {"transcript": _user(_text("Answer in JSON: what is the capital of France?")),
                "structured_output": {"name": "probe_answer", "schema": _ANSWER_SCHEMA}}
    if capability == "reasoning":
        return {"transcript": _user(_text("Think step by step: what is 17 × 23? Answer with "
                                          "the number."))}
    if capability == "background":
        return {"transcript": _user(_text("Reply with the single word: ok.")), "background": True}
    if capability == "prompt_caching":
        return {"transcript": _user(_text("Reply with the single word: ok."))}
    if capability == "citations":
        if "web_search" not in resolved.capabilities.hosted_tools:
            return "citations are asked for through the web_search hosted tool, which the " \
                   "manifest does not claim for this target"
        return {"transcript": _user(_text(_HOSTED_TASKS["web_search"])),
                "hosted_tools": [{"type": "web_search"}]}
    tool = capability.removeprefix("hosted_tools.")
    declared = _hosted(tool)
    if isinstance(declared, str):
        return declared
    return {"transcript": _user(_text(_HOSTED_TASKS.get(tool, f"Use the {tool} tool once."))),
            "hosted_tools": [declared]}


def plan(resolved: Resolved, max_output_tokens: int, run_prefix: str) -> list[Probe]:
    """One Probe per claimed capability, in CAPABILITIES order; run ids ``run_prefix-<cap>``."""
    claimed = resolved.capabilities.names()
    probes = []
    for capability in (c for c in CAPABILITIES if c in claimed):
        body = _body(capability, resolved)
        if isinstance(body, str):
            probes.append(Probe(capability, None, body))
            continue
        request = {**body, "target": {"provider": resolved.provider, "api": resolved.api,
                                      "model": resolved.model},
                   "required_capabilities": [capability],
                   "max_output_tokens": max_output_tokens,
                   "run_id": f"{run_prefix}-{capability.replace('_', '-')}"}
        probes.append(Probe(capability, request))
    return probes
