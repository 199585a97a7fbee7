"""A streamed recording folded into the complete object the same request without `stream` gets.

So one recorded stream serves both ``stream: true`` and ``stream: false`` requests, and the
terminal object of a background run. Each function follows its provider's streaming section:
OpenAI Responses (the terminal event carries the whole ``response``), Chat Completions
(choices' deltas concatenated), Claude Messages (``message_start`` + content blocks +
``message_delta``), Gemini generateContent (chunks' parts concatenated, last ``finishReason`` and
``usageMetadata``), Interactions (``interaction.completed`` carries the interaction).

Each returns None when the stream holds no terminal object (a truncated recording): the
simulator then says so instead of inventing one.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson

from modelevents.adapters.registry import api_facts

_OPENAI_TERMINAL = ("response.completed", "response.incomplete", "response.failed")


def complete_object(api: str, payloads: list[Any]) -> dict | None:
    docs = [p for p in payloads if isinstance(p, dict)]
    return _ASSEMBLERS[api](docs)


def first_object(api: str, payloads: list[Any]) -> dict | None:
    """The provider object as the first frame announces it (a background run's queued state)."""
    key = api_facts(api).stream_object_key
    if key is None:
        return None
    for doc in payloads:
        if isinstance(doc, dict) and isinstance(doc.get(key), dict):
            return copy.deepcopy(doc[key])
    return None


def _openai_responses(docs: list[dict]) -> dict | None:
    for doc in reversed(docs):
        if doc.get("type") in _OPENAI_TERMINAL and isinstance(doc.get("response"), dict):
            return doc["response"]
    return None


def _gemini_interactions(docs: list[dict]) -> dict | None:
    for doc in reversed(docs):
        if doc.get("event_type") in ("interaction.completed", "interaction.complete") \
                and isinstance(doc.get("interaction"), dict):
            return doc["interaction"]
    return None


def _anthropic(docs: list[dict]) -> dict | None:
    message: dict | None = None
    blocks: dict[int, dict] = {}
    partial_json: dict[int, str] = {}
    for doc in docs:
        kind = doc.get("type")
        if kind == "message_start":
            message = copy.deepcopy(doc.get("message") or {})
        elif kind == "content_block_start":
            blocks[doc["index"]] = copy.deepcopy(doc.get("content_block") or {})
        elif kind == "content_block_delta":
            block = blocks.setdefault(doc["index"], {})
            delta = doc.get("delta") or {}
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif dtype == "input_json_delta":
                partial_json[doc["index"]] = partial_json.get(doc["index"], "") \
                    + delta.get("partial_json", "")
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif dtype == "signature_delta":
                block["signature"] = delta.get("signature")
            elif dtype == "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))
        elif kind == "message_delta" and message is not None:
            message.update(doc.get("delta") or {})
            message["usage"] = {**message.get("usage", {}), **(doc.get("usage") or {})}
        elif kind == "message_stop" and message is not None:
            for index, text in partial_json.items():
                try:
                    blocks[index]["input"] = orjson.loads(text) if text else {}
                except orjson.JSONDecodeError:
                    blocks[index]["input"] = {}  # the API would have sent what it parsed
            message["content"] = [blocks[i] for i in sorted(blocks)]
            return message
    return None


def _openai_chat(docs: list[dict]) -> dict | None:
    head: dict | None = None
    choices: dict[int, dict] = {}
    usage = None
    for doc in docs:
        if doc.get("object") != "chat.completion.chunk":
            continue
        head = head or doc
        usage = doc.get("usage") or usage
        for choice in doc.get("choices") or ():
            out = choices.setdefault(choice.get("index", 0), {
                "index": choice.get("index", 0), "finish_reason": None, "logprobs": None,
                "message": {"role": "assistant", "content": None, "refusal": None}})
            delta = choice.get("delta") or {}
            msg = out["message"]
            for key in ("content", "refusal", "reasoning_content", "reasoning"):
                if delta.get(key):
                    msg[key] = (msg.get(key) or "") + delta[key]
            for call in delta.get("tool_calls") or ():
                calls = msg.setdefault("tool_calls", [])
                while len(calls) <= call.get("index", 0):
                    calls.append({"id": None, "type": "function",
                                  "function": {"name": "", "arguments": ""}})
                slot = calls[call.get("index", 0)]
                slot["id"] = call.get("id") or slot["id"]
                fn = call.get("function") or {}
                slot["function"]["name"] += fn.get("name") or ""
                slot["function"]["arguments"] += fn.get("arguments") or ""
            if choice.get("finish_reason"):
                out["finish_reason"] = choice["finish_reason"]
    if head is None or not any(c["finish_reason"] for c in choices.values()):
        return None
    return {"id": head.get("id"), "object": "chat.completion", "created": head.get("created"),
            "model": head.get("model"), "choices": [choices[i] for i in sorted(choices)],
            "usage": usage, "system_fingerprint": head.get("system_fingerprint")}


def _gemini_generate(docs: list[dict]) -> dict | None:
    if not docs:
        return None
    merged: dict = {key: value for key, value in docs[-1].items() if key != "candidates"}
    candidates: dict[int, dict] = {}
    finished = False
    for doc in docs:
        if "error" in doc:
            return None
        for candidate in doc.get("candidates") or ():
            out = candidates.setdefault(candidate.get("index", 0), {"index": candidate.get(
                "index", 0)})
            for key, value in candidate.items():
                if key == "content":
                    content = out.setdefault("content", {"role": value.get("role", "model"),
                                                         "parts": []})
                    content["parts"].extend(value.get("parts") or ())
                elif key != "index":
                    out[key] = value
            finished = finished or bool(candidate.get("finishReason"))
        if "promptFeedback" in doc:
            merged["promptFeedback"] = doc["promptFeedback"]
            finished = True
    if not finished:
        return None
    if candidates:
        merged["candidates"] = [candidates[i] for i in sorted(candidates)]
    return merged


_ASSEMBLERS = {
    "openai-responses": _openai_responses,
    "openai-chat": _openai_chat,
    "anthropic-messages": _anthropic,
    "gemini-generate": _gemini_generate,
    "gemini-interactions": _gemini_interactions,
}
