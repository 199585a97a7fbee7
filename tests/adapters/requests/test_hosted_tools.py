"""Hosted tools rendered into each API's own request fields (adapters/requests/*), the domain
rules with them, and every rendered body checked against the official SDK's request type."""

from __future__ import annotations

import pytest

from modelevents.adapters.errors import RenderError
from modelevents.adapters.requests import RENDERERS, build
from modelevents.adapters.requests.base import Egress, domain_problem
from modelevents.schemas.transcript import NeutralRequest
from modelevents.services.simulator.provider_schemas import validate_request

MODELS = {"openai-responses": "gpt-5", "openai-chat": "gpt-4o-search-preview",
          "anthropic-messages": "claude-sonnet-4-5", "gemini-interactions": "gemini-2.5-flash",
          "gemini-generate": "gemini-2.5-flash"}
MCP = {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com/sse",
       "allowed_tools": ["search"]}

# Every hosted tool each API renders, with the options that matter for egress.
ENABLED = {
    "openai-responses": [
        {"type": "web_search", "allowed_domains": ["Docs.Python.org"]},
        {"type": "code_execution"},
        {"type": "shell", "network": True, "allowed_domains": ["pypi.org"]},
        {**MCP, "require_approval": "never"},
        {"type": "file_search", "store_ids": ["vs_1"]},
        {"type": "image_generation"}, {"type": "computer"}],
    "openai-chat": [{"type": "web_search"}],
    "anthropic-messages": [
        {"type": "web_search", "blocked_domains": ["evil.example"]},
        {"type": "web_fetch", "allowed_domains": ["docs.python.org"]},
        {"type": "code_execution"}, MCP],
    "gemini-interactions": [
        {"type": "web_search"}, {"type": "code_execution"}, {"type": "url_context"},
        {"type": "google_maps"}, {"type": "file_search", "store_ids": ["fileSearchStores/a"]},
        MCP],
    "gemini-generate": [
        {"type": "web_search"}, {"type": "code_execution"}, {"type": "url_context"},
        {"type": "google_maps"}, {"type": "file_search", "store_ids": ["fileSearchStores/a"]}],
}


def neutral(hosted: list[dict], **extra) -> NeutralRequest:
    return NeutralRequest.model_validate({
        "transcript": [{"role": "user", "parts": [{"type": "text", "text": "look it up"}]}],
        "target": {"provider": "openai", "model": "gpt-5"}, "hosted_tools": hosted, **extra})


def body(api: str, hosted: list[dict], stream: bool = True) -> dict:
    return build(neutral(hosted), api, MODELS[api], stream=stream).body


def test_openai_responses_fields():
    assert body("openai-responses", ENABLED["openai-responses"])["tools"] == [
        {"type": "web_search", "filters": {"allowed_domains": ["docs.python.org"]}},
        {"type": "code_interpreter",
         "container": {"type": "auto", "network_policy": {"type": "disabled"}}},
        {"type": "shell", "environment": {"type": "container_auto", "network_policy": {
            "type": "allowlist", "allowed_domains": ["pypi.org"]}}},
        {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com/sse",
         "allowed_tools": ["search"], "require_approval": "never"},
        {"type": "file_search", "vector_store_ids": ["vs_1"]},
        {"type": "image_generation"}, {"type": "computer"}]


def test_openai_chat_has_web_search_options_only():
    rendered = body("openai-chat", ENABLED["openai-chat"])
    assert rendered["web_search_options"] == {} and "tools" not in rendered


def test_anthropic_fields_and_the_mcp_beta_header():
    request = neutral(ENABLED["anthropic-messages"])
    wire = build(request, "anthropic-messages", MODELS["anthropic-messages"], stream=True)
    assert wire.body["tools"] == [
        {"type": "web_search_20250305", "name": "web_search",
         "blocked_domains": ["evil.example"]},
        {"type": "web_fetch_20250910", "name": "web_fetch", "allowed_domains": ["docs.python.org"]},
        {"type": "code_execution_20250825", "name": "code_execution"}]
    assert wire.body["mcp_servers"] == [{"type": "url", "name": "docs",
                                         "url": "https://mcp.example.com/sse",
                                         "tool_configuration": {"allowed_tools": ["search"]}}]
    assert wire.endpoint.headers["anthropic-beta"] == "mcp-client-2025-04-04"
    plain = build(neutral([{"type": "web_search"}]), "anthropic-messages",
                  MODELS["anthropic-messages"], stream=True)
    assert "anthropic-beta" not in plain.endpoint.headers


def test_gemini_fields():
    assert body("gemini-interactions", ENABLED["gemini-interactions"])["tools"] == [
        {"type": "google_search"}, {"type": "code_execution"}, {"type": "url_context"},
        {"type": "google_maps"},
        {"type": "file_search", "file_search_store_names": ["fileSearchStores/a"]},
        {"type": "mcp_server", "name": "docs", "url": "https://mcp.example.com/sse",
         "allowed_tools": [{"tools": ["search"]}]}]
    assert body("gemini-generate", ENABLED["gemini-generate"])["tools"] == [
        {"googleSearch": {}}, {"codeExecution": {}}, {"urlContext": {}}, {"googleMaps": {}},
        {"fileSearch": {"fileSearchStoreNames": ["fileSearchStores/a"]}}]


def test_application_tools_and_hosted_tools_together():
    request = neutral([{"type": "web_search"}], tools=[{"name": "lookup"}])
    tools = build(request, "gemini-generate", "gemini-2.5-flash", stream=True).body["tools"]
    assert tools[0]["functionDeclarations"][0]["name"] == "lookup"
    assert tools[1] == {"googleSearch": {}}


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("api", list(ENABLED))
def test_rendered_hosted_tools_fit_the_sdk_request_type(api, stream):
    assert validate_request(api, body(api, ENABLED[api], stream)) == []


@pytest.mark.parametrize(("api", "wrong"), [
    ("openai-responses", {"type": "web_search", "filters": {"blocked_domains": ["a.example"]}}),
    ("anthropic-messages", {"type": "web_search_20250305", "name": "web_search",
                            "excluded_domains": ["a.example"]}),
    ("gemini-interactions", {"type": "google_search", "exclude_domains": ["a.example"]}),
])
def test_validator_is_not_blind_to_hosted_tool_fields(api, wrong):
    # The SDK check above means something only if a field the API does not have fails it.
    rendered = body(api, [{"type": "web_search"}])
    rendered["tools"] = [wrong]
    assert validate_request(api, rendered)


def test_every_api_declares_what_it_enforces():
    for module in RENDERERS.values():
        assert module.HOSTED and all(isinstance(e, Egress) for e in module.HOSTED.values())


@pytest.mark.parametrize(("api", "hosted", "says"), [
    ("openai-responses", {"type": "web_search", "blocked_domains": ["evil.example"]},
     "cannot block domains"),
    ("openai-chat", {"type": "web_search", "allowed_domains": ["docs.python.org"]},
     "cannot be restricted to allowed domains"),
    ("gemini-generate", {"type": "web_search", "blocked_domains": ["evil.example"]},
     "cannot block domains"),
    ("anthropic-messages", {"type": "web_search", "allowed_domains": ["example.com"],
                            "blocked_domains": ["bad.example.com"]}, "not both"),
    ("anthropic-messages", {"type": "code_execution", "network": True,
                            "allowed_domains": ["pypi.org"]}, "allowed domains"),
    ("anthropic-messages", {**MCP, "require_approval": "always"}, "no approval step"),
    ("gemini-interactions", {**MCP, "require_approval": "always"}, "no approval step"),
    ("anthropic-messages", {"type": "image_generation"}, "has no form in anthropic-messages"),
    ("gemini-generate", MCP, "has no form in gemini-generate"),
])
def test_what_an_api_cannot_enforce_is_a_render_error_not_dropped(api, hosted, says):
    with pytest.raises(RenderError, match=says):
        body(api, [hosted])


def test_claude_sends_the_allowlist_alone_when_it_keeps_the_blocked_domains_out():
    tools = body("anthropic-messages", [{"type": "web_fetch", "allowed_domains": ["python.org"],
                                         "blocked_domains": ["evil.example"]}])["tools"]
    assert tools == [{"type": "web_fetch_20250910", "name": "web_fetch",
                      "allowed_domains": ["python.org"]}]


def test_domain_problem_rules():
    both = Egress(allowed_domains=True, blocked_domains=True)
    exclusive = Egress(allowed_domains=True, blocked_domains=True, exclusive=True)
    allow_only = Egress(allowed_domains=True)
    assert domain_problem(both, ["a.example"], ["x.a.example"]) is None
    assert domain_problem(exclusive, ["a.example"], ["b.example"]) is None
    assert "not both" in domain_problem(exclusive, ["a.example"], ["x.a.example"])
    assert domain_problem(allow_only, ["a.example"], ["b.example"]) is None
    assert domain_problem(allow_only, [], ["b.example"]) == "it cannot block domains"
    assert domain_problem(Egress(), [], []) is None
