"""Validate a provider request body against the official SDKs' request types.

The simulator (``services/simulator``) answers requests as a provider would; a provider rejects
a request with a wrong field name or a wrong type with HTTP 400, so the simulator must too, or a
test could pass against it and fail against the real service. The request types are taken from
the official SDKs rather than written here, so they follow the providers' own definitions:

- ``openai-responses``: ``openai.types.responses.response_create_params``
  ``ResponseCreateParamsStreaming`` / ``…NonStreaming``
- ``openai-chat``: ``openai.types.chat.completion_create_params``
  ``CompletionCreateParamsStreaming`` / ``…NonStreaming``
- ``anthropic-messages``: ``anthropic.types.message_create_params`` ``MessageCreateParamsStreaming`` /
  ``…NonStreaming`` (the beta types too, and the sampling fields SDK 2.x no longer declares)
- ``gemini-interactions``: ``google.genai._gaos.types.interactions``
  ``CreateModelInteractionParam`` / ``CreateAgentInteractionParam`` (snake_case on the wire,
  Gemini Interactions API reference)
- ``gemini-generate``: the REST body ``{contents, systemInstruction, generationConfig, tools,
  toolConfig, safetySettings, …}`` with a ``google.genai.types`` model for each field (camelCase
  on the wire; the models accept their aliases)

The SDKs' TypedDicts are permissive for a validator: pydantic ignores unknown keys of a
TypedDict and validates ``Iterable[...]`` fields lazily (never, for a dict that is not
iterated). So the pydantic core schema built from them is rewritten before use: every
typed-dict forbids extra keys, every lazy iterable becomes a list. That catches a misspelt
field or a wrong message part type, and a request the SDK itself would build still passes.
Values are checked in pydantic's lax mode (the types are Python types, not JSON ones): a number
sent as a numeric string passes, as some providers' own parsers also accept.

Usage: ``validate_request("anthropic-messages", body) -> list[str]`` — one line per problem, ``[]`` when
the body is valid. The SDKs are an optional dependency: ``pip install modelevents[simulator]``.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from types import GenericAlias, new_class
from typing import Any

from modelevents.services.errors import MissingSDKError

# The provider API names of the adapters and renderers (ModelEvent.api).
APIS = ("openai-responses", "openai-chat", "anthropic-messages", "gemini-interactions",
        "gemini-generate")

_INSTALL_HINT = "pip install 'modelevents[simulator]'"

# Wire fields of the Gemini REST generateContent body (ai.google.dev/api/generate-content,
# "Request body"); the SDK folds several of them into GenerateContentConfig on its side.
_GEMINI_GENERATE_FIELDS = ("contents", "systemInstruction", "generationConfig", "tools",
                           "toolConfig", "safetySettings", "cachedContent", "labels",
                           "serviceTier", "store", "continuationToken", "modelArmorConfig",
                           "outputConfig", "model")


def validate_request(api: str, body: Any) -> list[str]:
    """Problems with ``body`` as a request of ``api`` (empty when valid).

    ``api`` is one of ``APIS``. The ``stream`` flag of the body picks the SDK's streaming or
    non-streaming type where the SDK has both.
    """
    if api not in APIS:
        raise ValueError(f"unknown api {api!r}; expected one of {', '.join(APIS)}")
    if not isinstance(body, dict):
        return [f"request body must be a JSON object, got {type(body).__name__}"]
    variant = _variant(api, body)
    problems = _validator(api, variant)(body)
    if problems and api == "anthropic-messages" and not _validator(api, "beta-" + variant)(body):
        # Fields of the beta surface (mcp_servers, context_management, ...) are accepted when
        # the client sends the anthropic-beta header; the SDK's beta client does that itself.
        return []
    return problems


def require_sdks() -> None:
    """Raise MissingSDKError now (cheaply, without importing them) if an SDK is absent."""
    import importlib.util

    missing = [name for name in ("openai", "anthropic", "google.genai")
               if _find_spec(importlib.util, name) is None]
    if missing:
        raise MissingSDKError(f"request validation needs the official provider SDKs; missing: "
                              f"{', '.join(missing)}. Install them with: {_INSTALL_HINT} "
                              "(or run the simulator without validation)")


def _find_spec(util: Any, name: str) -> Any:
    try:
        return util.find_spec(name)
    except ModuleNotFoundError:  # the parent package (google) is absent
        return None


def warm(apis: tuple[str, ...] = APIS) -> None:
    """Build the validators now (importing the SDKs' types takes seconds the first time)."""
    variants = {"gemini-interactions": ("model", "agent"), "gemini-generate": ("generate",),
                "anthropic-messages": ("streaming", "non-streaming", "beta-streaming",
                                       "beta-non-streaming")}
    for api in apis:
        for variant in variants.get(api, ("streaming", "non-streaming")):
            _validator(api, variant)


def _variant(api: str, body: dict) -> str:
    if api == "gemini-interactions":
        # CreateAgentInteraction names `agent` instead of `model`.
        return "agent" if "agent" in body and "model" not in body else "model"
    if api == "gemini-generate":
        return "generate"
    return "streaming" if body.get("stream") is True else "non-streaming"


@functools.cache
def _validator(api: str, variant: str) -> Callable[[dict], list[str]]:
    request_type = _request_type(api, variant)

    from pydantic import ConfigDict, TypeAdapter, ValidationError
    from pydantic_core import SchemaValidator

    # A one-element list around the request type: pydantic refuses a config for a TypedDict
    # itself, and Speakeasy's Interactions types reach an IO[bytes] (file upload) that needs
    # arbitrary types allowed. The list index is dropped from error locations again.
    # GenericAlias(list, …) is what list[request_type] makes, spelt so for a type known only
    # at run time (written as list[request_type], it reads to the type checker as a type).
    list_of_requests: Any = GenericAlias(list, (request_type,))
    adapter: TypeAdapter[list[Any]] = TypeAdapter(
        list_of_requests, config=ConfigDict(arbitrary_types_allowed=True))
    schema = copy.deepcopy(adapter.core_schema)
    _tighten(schema)
    validator = SchemaValidator(schema)

    def validate(body: dict) -> list[str]:
        try:
            validator.validate_python([body])
        except ValidationError as exc:
            return _problems(exc)
        return []

    return validate


def _request_type(api: str, variant: str) -> Any:
    try:
        if api == "openai-responses":
            from openai.types.responses import response_create_params
            return (response_create_params.ResponseCreateParamsStreaming
                    if variant == "streaming"
                    else response_create_params.ResponseCreateParamsNonStreaming)
        if api == "openai-chat":
            from openai.types.chat import completion_create_params
            return (completion_create_params.CompletionCreateParamsStreaming
                    if variant == "streaming"
                    else completion_create_params.CompletionCreateParamsNonStreaming)
        if api == "anthropic-messages":
            streaming = variant in ("streaming", "beta-streaming")
            if variant.startswith("beta-"):
                from anthropic.types.beta import message_create_params as beta_params
                return _with_sampling(beta_params.MessageCreateParamsStreaming if streaming
                                      else beta_params.MessageCreateParamsNonStreaming)
            from anthropic.types import message_create_params
            return _with_sampling(message_create_params.MessageCreateParamsStreaming if streaming
                                  else message_create_params.MessageCreateParamsNonStreaming)
        if api == "gemini-interactions":
            from google.genai._gaos.types.interactions import createagentinteraction as agent
            from google.genai._gaos.types.interactions import createmodelinteraction as model
            return (agent.CreateAgentInteractionParam if variant == "agent"
                    else model.CreateModelInteractionParam)
        return _gemini_generate_type()
    except ImportError as exc:
        raise MissingSDKError(
            f"validating {api} requests needs the official provider SDKs "
            f"(openai, anthropic, google-genai), and importing one failed: {exc}. "
            f"Install them with: {_INSTALL_HINT}") from exc


def _with_sampling(request_type: Any) -> Any:
    """Claude's request type plus the sampling fields the installed SDK may no longer declare.

    anthropic-sdk-python 2.x dropped ``temperature``, ``top_p`` and ``top_k`` from
    MessageCreateParams, but the Messages API still accepts them for the models that support
    them (recorded requests of the corpus's anthropic/llm-anthropic folder send ``temperature``
    and were answered 200).
    """
    declared = set(getattr(request_type, "__annotations__", {}))
    if {"temperature", "top_p", "top_k"} <= declared:
        return request_type

    # A subclass of a base known only at run time: made by new_class, the dynamic form of
    # `class WithSampling(request_type, total=False)`, which the type checker cannot follow.
    def body(namespace: dict[str, Any]) -> None:
        namespace["__module__"] = __name__
        namespace["__annotations__"] = {"temperature": float, "top_p": float, "top_k": int}

    return new_class(request_type.__name__, (request_type,), {"total": False}, body)


def _gemini_generate_type() -> Any:

    from typing import Required

    from google.genai import types
    from typing_extensions import TypedDict

    # The functional form, so the annotations are evaluated here and not left as strings that
    # pydantic would have to resolve in this module (which imports google.genai lazily).
    # The REST request body of models/{model}:generateContent and :streamGenerateContent.
    GenerateContentRequest = TypedDict("GenerateContentRequest", {  # noqa: UP013
        "contents": Required[list[types.Content]],
        "systemInstruction": types.Content,
        "generationConfig": types.GenerationConfig,
        "tools": list[types.Tool],
        "toolConfig": types.ToolConfig,
        "safetySettings": list[types.SafetySetting],
        "cachedContent": str,
        "labels": dict[str, str],
        "serviceTier": str,
        "store": bool,
        "continuationToken": str,
        # Vertex AI only (the SDK's _GenerateContentParameters_to_vertex).
        "modelArmorConfig": types.ModelArmorConfig,
        "outputConfig": dict[str, Any],
        # Some clients repeat the model in the body as well as in the path; the API accepts it.
        "model": str,
    }, total=False)
    assert tuple(GenerateContentRequest.__annotations__) == _GEMINI_GENERATE_FIELDS
    return GenerateContentRequest


def _tighten(schema: Any) -> None:
    """Forbid unknown keys in every typed-dict and validate iterables eagerly, in place."""
    if isinstance(schema, list):
        for item in schema:
            _tighten(item)
        return
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if kind == "typed-dict" and "extras_schema" not in schema:
        # A TypedDict that declares extra items (PEP 728) keeps accepting them.
        schema["extra_behavior"] = "forbid"
    elif kind == "generator":
        # Iterable[X] → list[X]: a generator validator checks items only when iterated.
        schema["type"] = "list"
        schema.pop("max_length", None)
    for value in schema.values():
        if isinstance(value, (dict, list)):
            _tighten(value)


def _problems(exc: Any) -> list[str]:
    """One readable line per problem, as a provider's 400 message would list them.

    A value that fits no member of a union yields errors for every member; report only the
    member that came closest (see ``_closest``), so that a misspelt key in a text part reads
    ``messages.0.content.0.txt: unknown field`` and not thirty lines about image parts.
    """
    errors = [dict(e, loc=tuple(e["loc"][1:])) for e in exc.errors(include_url=False)]
    lines: list[str] = []
    for error in _closest(errors, 0):
        path = ".".join(str(p) for p in error["loc"] if _is_wire_key(p)) or "(body)"
        if error["type"] == "extra_forbidden":
            message = "unknown field (not in the provider's request schema)"
        elif error["type"] == "missing":
            message = "required field missing"
        else:
            message = error["msg"]
        line = f"{path}: {message}"
        if line not in lines:
            lines.append(line)
    return lines


def _closest(errors: list[dict], depth: int) -> list[dict]:
    """The errors below ``depth`` with every union reduced to its closest member."""
    here = [e for e in errors if len(e["loc"]) <= depth]
    groups: dict[Any, list[dict]] = {}
    for error in errors:
        if len(error["loc"]) > depth:
            groups.setdefault(error["loc"][depth], []).append(error)
    members = [key for key in groups if not _is_wire_key(key)]
    reduced = {key: _closest(errs, depth + 1) for key, errs in groups.items()}
    if len(members) > 1:
        best = min(members, key=lambda m: _distance(reduced[m], depth + 1))
        reduced = {key: errs for key, errs in reduced.items() if key == best or _is_wire_key(key)}
    return here + [error for errs in reduced.values() for error in errs]


def _distance(errors: list[dict], depth: int) -> tuple[int, int, int, int]:
    """How far a union member is from the value, most telling first.

    A member whose own shape does not fit (a string member for a list) is furthest; then one
    whose tag (a literal such as `type` or `role` at its top level) differs; then one whose
    top-level keys differ (missing or unknown fields); a wrong value deep inside is closest.
    """
    shape = tag = keys = 0
    for error in errors:
        # List indexes do not count: a list member's items are judged like the member itself.
        wire = [p for p in error["loc"][depth:] if _is_wire_key(p) and not isinstance(p, int)]
        if not wire:
            shape += 1
        elif len(wire) == 1 and error["type"] == "literal_error":
            tag += 1
        elif len(wire) == 1 and error["type"] in ("missing", "extra_forbidden"):
            keys += 1
    return shape, tag, keys, len(errors)


# Names pydantic puts into error locations for union members and wrappers, not wire keys.
_SCHEMA_WORDS = {"str", "int", "float", "bool", "bytes", "none", "list", "dict", "set", "tuple",
                 "typed-dict", "model", "nullable", "literal", "json-or-python", "is-instance",
                 "lax-or-strict", "generator", "union", "tagged-union", "any", "function-plain"}


def _is_wire_key(part: Any) -> bool:
    if isinstance(part, int):
        return True
    text = str(part)
    # Union members appear as their class name ("TextBlockParam") or as a schema word with
    # parameters ("list[...]", "function-after[...]"); wire keys are snake_case or camelCase.
    return not (text[:1].isupper() or "[" in text or text in _SCHEMA_WORDS)
