"""The hosted: section of the policy file (services/policy/hosted.py): parsing with clear
errors, domain matching, and the trust of a source."""

from __future__ import annotations

import pytest

from modelevents.schemas.errors import ConfigError
from modelevents.services.policy.hosted import (
    HostedPolicy,
    McpServer,
    domain_matches,
    load_hosted_policies,
    load_policy_file,
    trust_of,
)

ACME = {"tools": ["web_search", "mcp"], "allowed_domains": ["Docs.Python.org.", "bücher.example"],
        "blocked_domains": ["evil.example"],
        "mcp_servers": [{"label": "docs", "url": "https://mcp.example.com/sse"}],
        "code_network": True,
        "sources": {"trusted": ["docs.python.org", "file:file_abc123", "mcp:docs"],
                    "untrusted": ["reddit.com"], "blocked": ["evil.example", "x.reddit.com"]}}


@pytest.fixture
def acme() -> HostedPolicy:
    return load_hosted_policies({"tenants": {"acme": {"hosted": ACME}}})["acme"]


def test_the_section_parses_into_the_shared_dataclass(acme):
    assert acme == HostedPolicy(
        tools=("web_search", "mcp"),
        allowed_domains=("docs.python.org", "xn--bcher-kva.example"),
        blocked_domains=("evil.example",),
        mcp_servers=(McpServer("docs", "https://mcp.example.com/sse"),), code_network=True,
        trusted=("docs.python.org", "file:file_abc123", "mcp:docs"), untrusted=("reddit.com",),
        blocked=("evil.example", "x.reddit.com"))


def test_a_tenant_without_hosted_gets_the_empty_policy_and_the_executor_keys_are_ignored():
    policies = load_hosted_policies({"tenants": {"bob": {"tools": ["add_note"]}, "eve": None}})
    assert policies == {"bob": HostedPolicy(), "eve": HostedPolicy()}
    assert HostedPolicy().code_network is False and HostedPolicy().tools == ()
    assert load_hosted_policies({}) == {}


@pytest.mark.parametrize(("hosted", "says"), [
    ({"tools": ["web_search", "teleport"]}, r"unknown hosted tools \['teleport'\]"),
    ({"allowed_domains": ["https://docs.python.org/3"]}, "allowed_domains: 'https://"),
    ({"blocked_domains": "evil.example"}, "blocked_domains: expected a list of strings"),
    ({"mcp_servers": [{"label": "docs", "url": "http://mcp.example.com"}]}, "https://"),
    ({"mcp_servers": [{"name": "docs"}]}, r"mcp_servers\[0\]"),
    ({"code_network": "no"}, "code_network: expected true or false"),
    ({"sources": {"trusted": ["a b"]}}, "sources.trusted"),
    ({"sources": {"maybe": []}}, "sources: expected"),
    ({"egress": []}, "unknown keys \\['egress'\\]"),
])
def test_a_bad_section_is_refused_naming_tenant_and_key(hosted, says):
    with pytest.raises(ConfigError, match="tenant 'acme'") as raised:
        load_hosted_policies({"tenants": {"acme": {"hosted": hosted}}})
    assert raised.match(says)


def test_policy_file(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("tenants:\n  acme:\n    tools: [find_notes]\n    hosted:\n"
                    "      tools: [web_search]\n")
    assert load_policy_file(path)["acme"].tools == ("web_search",)
    with pytest.raises(ConfigError, match="policy file"):
        load_policy_file(tmp_path / "missing.yaml")


@pytest.mark.parametrize(("host", "rules", "expected"), [
    ("docs.python.org", ["docs.python.org"], True),
    ("a.docs.python.org", ["docs.python.org"], True),
    ("DOCS.Python.ORG.", ["docs.python.org"], True),
    ("python.org", ["docs.python.org"], False),
    ("notdocs.python.org", ["docs.python.org"], False),
    ("bücher.example", ["xn--bcher-kva.example"], True),
    ("shop.xn--bcher-kva.example", ["Bücher.example"], True),
    ("not a host", ["example.com"], False),
])
def test_domain_matches(host, rules, expected):
    assert domain_matches(host, rules) is expected


@pytest.mark.parametrize(("source", "trust"), [
    ("https://docs.python.org/3/library/", "trusted"),
    ("https://sub.evil.example/page", "blocked"),
    ("https://www.reddit.com/r/python", "untrusted"),
    ("https://x.reddit.com/", "blocked"),  # blocked wins over untrusted
    ("file:file_abc123", "trusted"),
    ("file:file_other", "unknown"),
    ("mcp:docs", "trusted"),
    ("https://MCP.example.com/sse/", "trusted"),  # the MCP server the policy lists as docs
    ("https://example.org/", "unknown"),
])
def test_trust_of(acme, source, trust):
    assert trust_of(source, acme) == trust


def test_blocked_wins_over_trusted_and_no_policy_is_unknown():
    both = HostedPolicy(trusted=("example.com",), blocked=("example.com",))
    assert trust_of("https://example.com/", both) == "blocked"
    assert trust_of("https://example.com/", None) == "unknown"


def test_trust_of_each_kind_of_source_and_the_egress_block_list():
    acme = load_hosted_policies({"tenants": {"acme": {"hosted": {
        "tools": ["web_search", "mcp"], "blocked_domains": ["evil.example"],
        "mcp_servers": [{"label": "docs", "url": "https://mcp.example.com/sse"}],
        "sources": {"trusted": ["docs.python.org", "file:file_abc", "mcp:docs"],
                    "untrusted": ["reddit.com"], "blocked": ["spam.example"]}}}}})["acme"]
    assert trust_of("https://docs.python.org/3/", acme) == "trusted"
    assert trust_of("https://old.reddit.com/r/x", acme) == "untrusted"
    assert trust_of("https://spam.example/", acme) == "blocked"
    assert trust_of("https://a.evil.example/", acme) == "blocked"  # egress blocked_domains
    assert trust_of("https://example.org/", acme) == "unknown"
    assert trust_of("file:file_abc", acme) == "trusted"
    assert trust_of("file:file_other", acme) == "unknown"
    assert trust_of("mcp:docs", acme) == "trusted"
    assert trust_of("https://mcp.example.com/sse", acme) == "trusted"  # the server's URL
    assert trust_of("", acme) == "unknown"


def test_a_policy_file_that_is_not_yaml_is_one_line(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("tenants:\n  acme: [\n")
    with pytest.raises(ConfigError) as caught:
        load_policy_file(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)
