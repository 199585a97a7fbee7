"""Hosted tools under the tenant's policy, before anything is sent (services/gateway/calls/egress.py,
router.py ``admit`` and ``route``): each enabled tool is a required capability; what the policy
forbids is refused on every candidate; what a target cannot enforce refuses that target; the
tenant's domains are merged into what is rendered."""

from __future__ import annotations

import pytest

from modelevents.schemas.transcript import NeutralRequest
from modelevents.services.errors import CapabilityRejected
from modelevents.services.gateway.calls.capabilities import load_manifest
from modelevents.services.gateway.calls.router import admit, route
from modelevents.services.policy.hosted import HostedPolicy, McpServer

GPT = {"provider": "openai", "api": "openai-responses", "model": "gpt-5"}
CLAUDE = {"provider": "anthropic", "api": "anthropic-messages", "model": "claude-sonnet-4-5"}
GEMINI = {"provider": "google", "api": "gemini-generate", "model": "gemini-2.5-flash"}
DOCS = {"type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com/sse"}

ACME = HostedPolicy(tools=("web_search", "web_fetch", "code_execution", "mcp", "url_context"),
                    allowed_domains=("python.org", "example.com"),
                    blocked_domains=("evil.example",),
                    mcp_servers=(McpServer("docs", "https://mcp.example.com/sse/"),))


@pytest.fixture(scope="module")
def manifest():
    return load_manifest()


def request(*hosted: dict, target: dict | None = None, **extra) -> NeutralRequest:
    document = {"transcript": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}],
                "hosted_tools": list(hosted), **extra}
    if "preferences" not in extra:
        document["target"] = target or GPT
    return NeutralRequest.model_validate(document)


def rejected(call) -> dict:
    with pytest.raises(CapabilityRejected) as raised:
        call()
    return raised.value.to_dict()


def sent(manifest, policy, *hosted, **extra):
    """The route and the request as admitted (what is rendered)."""
    admitted = admit(request(*hosted, **extra), policy)
    return route(admitted, manifest, None, policy), admitted


def test_an_enabled_hosted_tool_is_a_required_capability(manifest):
    answer = rejected(lambda: route(request({"type": "url_context"}), manifest))
    assert answer["code"] == "capability_rejected"
    assert answer["candidates"][0]["missing"] == [
        {"capability": "hosted_tools.url_context", "because": "hosted_tools[0] enables it"}]


def test_no_policy_changes_nothing(manifest):
    plain = request({"type": "web_search"}, {"type": "image_generation"})
    assert admit(plain, None) is plain
    assert route(plain, manifest, None, None).api == "openai-responses"


@pytest.mark.parametrize(("hosted", "rule"), [
    ({"type": "image_generation"}, "hosted.tools"),
    ({**DOCS, "server_label": "other"}, "hosted.mcp_servers"),
    ({**DOCS, "server_url": "https://elsewhere.example/sse"}, "hosted.mcp_servers"),
    ({"type": "code_execution", "network": True}, "hosted.code_network"),
    ({"type": "web_search", "allowed_domains": ["rust-lang.org"]}, "hosted.allowed_domains"),
    ({"type": "web_search", "allowed_domains": ["evil.example"]}, "hosted.allowed_domains"),
])
def test_what_the_policy_forbids_is_refused_on_every_candidate(hosted, rule):
    answer = rejected(lambda: admit(request(hosted, preferences=[GPT, CLAUDE]), ACME))
    assert answer["code"] == "egress_rejected"
    assert [c["provider"] for c in answer["candidates"]] == ["openai", "anthropic"]
    assert all(c["refused"][0]["rule"] == rule for c in answer["candidates"])


def test_a_tenant_the_file_does_not_name_may_enable_nothing():
    answer = rejected(lambda: admit(request({"type": "web_search"}), HostedPolicy()))
    assert "its hosted tools: none" in answer["candidates"][0]["refused"][0]["because"]


def test_an_allowed_mcp_server_matches_by_label_and_url(manifest):
    chosen, admitted = sent(manifest, ACME, {**DOCS, "server_url": "https://MCP.example.com/sse"})
    assert chosen.api == "openai-responses" and admitted.hosted_tools[0].server_label == "docs"


def test_the_request_can_only_narrow_the_tenants_domains(manifest):
    _, admitted = sent(manifest, ACME, {"type": "web_search",
                                        "allowed_domains": ["docs.python.org", "rust-lang.org"]})
    assert admitted.hosted_tools[0].allowed_domains == ["docs.python.org"]
    _, admitted = sent(manifest, ACME, {"type": "web_search"}, target=CLAUDE)
    # Claude takes one list: the allowlist, which keeps evil.example out already.
    search = admitted.hosted_tools[0]
    assert (search.allowed_domains, search.blocked_domains) == (["python.org", "example.com"], [])
    blocking = HostedPolicy(tools=("web_fetch",), blocked_domains=("evil.example",))
    _, admitted = sent(manifest, blocking, {"type": "web_fetch",
                                            "blocked_domains": ["spam.example"]}, target=CLAUDE)
    assert admitted.hosted_tools[0].blocked_domains == ["spam.example", "evil.example"]


def test_a_target_that_cannot_enforce_the_domain_rules_is_refused_and_the_next_one_taken(
        manifest):
    chosen, _ = sent(manifest, ACME, {"type": "web_search"}, preferences=[GEMINI, GPT])
    assert chosen.api == "openai-responses"
    answer = rejected(lambda: sent(manifest, ACME, {"type": "web_search"}, target=GEMINI))
    assert answer["code"] == "egress_rejected"
    [candidate] = answer["candidates"]
    assert candidate["refused"][0]["rule"] == "domains"
    assert "cannot be restricted to allowed domains" in candidate["refused"][0]["because"]


def test_claude_cannot_hold_a_blocked_domain_inside_an_allowed_one(manifest):
    policy = HostedPolicy(tools=("web_search",), allowed_domains=("python.org",),
                          blocked_domains=("bad.python.org",))
    answer = rejected(lambda: sent(manifest, policy, {"type": "web_search"}, target=CLAUDE))
    assert "not both" in answer["candidates"][0]["refused"][0]["because"]
    # OpenAI cannot block at all: refused too, rather than sent with the allowlist alone.
    answer = rejected(lambda: sent(manifest, policy, {"type": "web_search"}))
    assert "cannot block domains" in answer["candidates"][0]["refused"][0]["because"]


def test_url_reading_tools_without_domain_fields_are_refused_under_domain_rules(manifest):
    gemini_interactions = {**GEMINI, "api": "gemini-interactions"}
    answer = rejected(lambda: sent(manifest, ACME, {"type": "url_context"},
                                   target=gemini_interactions))
    assert answer["candidates"][0]["refused"][0]["rule"] == "domains"
    open_policy = HostedPolicy(tools=("url_context",))
    assert sent(manifest, open_policy, {"type": "url_context"},
                target=gemini_interactions)[0].api == "gemini-interactions"


def test_code_without_network_goes_only_where_it_is_enforced(manifest):
    policy = HostedPolicy(tools=("code_execution",))
    assert sent(manifest, policy, {"type": "code_execution"})[0].api == "openai-responses"
    assert sent(manifest, policy, {"type": "code_execution"},
                target=CLAUDE)[0].api == "anthropic-messages"
    answer = rejected(lambda: sent(manifest, policy, {"type": "code_execution"}, target=GEMINI))
    assert answer["candidates"][0]["refused"][0]["rule"] == "hosted.code_network"
    networked = HostedPolicy(tools=("code_execution",), code_network=True)
    assert sent(manifest, networked, {"type": "code_execution"},
                target=GEMINI)[0].api == "gemini-generate"


def test_code_network_allowlist_is_the_tenants(manifest):
    policy = HostedPolicy(tools=("code_execution",), code_network=True,
                          allowed_domains=("pypi.org",))
    _, admitted = sent(manifest, policy, {"type": "code_execution", "network": True})
    assert admitted.hosted_tools[0].allowed_domains == ["pypi.org"]
    blocking = HostedPolicy(tools=("code_execution",), code_network=True,
                            blocked_domains=("evil.example",))
    answer = rejected(lambda: sent(manifest, blocking, {"type": "code_execution",
                                                        "network": True}))
    assert "cannot block domains" in answer["candidates"][0]["refused"][0]["because"]


def test_the_requests_own_rules_are_checked_without_a_policy_too(manifest):
    answer = rejected(lambda: route(request({"type": "web_search",
                                             "blocked_domains": ["evil.example"]}),
                                    manifest, None, None))
    assert answer["code"] == "egress_rejected"
    assert route(request({"type": "web_search", "blocked_domains": ["evil.example"]},
                         target=CLAUDE), manifest).api == "anthropic-messages"


def test_every_hosted_tool_the_manifest_offers_has_a_rendering(manifest):
    # Else the router would pick a target its renderer then cannot serve.
    from typing import get_args

    from modelevents.adapters.requests import RENDERERS
    from modelevents.schemas.hosted_tools import HostedTool

    enableable = {get_args(member.model_fields["type"].annotation)[0]
                  for member in get_args(get_args(HostedTool)[0])}
    assert len(enableable) == 10 and "web_fetch" in enableable
    for entry in manifest.document.apis:
        offered = set(entry.capabilities.hosted_tools)
        for model in entry.models:
            offered |= set(model.capabilities.hosted_tools or ())
        missing = (offered & enableable) - set(RENDERERS[entry.api].HOSTED)
        assert not missing, f"{entry.api} offers {missing} but does not render them"


def test_a_bad_policy_file_stops_the_gateway_before_it_starts(tmp_path, manifest):
    from modelevents.schemas.errors import ConfigError
    from modelevents.services.gateway.app import create_app
    from modelevents.services.gateway.config import GatewayConfig

    policy = tmp_path / "policy.yaml"
    policy.write_text("tenants:\n  acme:\n    hosted:\n      tools: [teleport]\n")
    with pytest.raises(ConfigError, match=r"tenant 'acme', hosted.tools: unknown hosted tools"):
        create_app(GatewayConfig(policy=policy), manifest=manifest)
