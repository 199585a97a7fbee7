"""The hosted section of the policy file: parsing, domain rules and source trust."""

from __future__ import annotations

import pytest

from modelevents.schemas.errors import ConfigError
from modelevents.services.policy.hosted import (
    HostedPolicy,
    McpServer,
    domain_matches,
    hosted_policies_from_file,
    load_hosted_policies,
    trust_of,
)

RAW = {"tenants": {
    "acme": {"tools": ["find_notes"], "hosted": {
        "tools": ["web_search", "mcp"],
        "allowed_domains": ["docs.python.org"],
        "blocked_domains": ["evil.example"],
        "mcp_servers": [{"label": "docs", "url": "https://mcp.example.com/sse"}],
        "code_network": False,
        "sources": {"trusted": ["docs.python.org", "file:file_abc", "mcp:docs"],
                    "untrusted": ["reddit.com"], "blocked": ["spam.example"]}}},
    "other": {"tools": ["find_notes"]},
}}


def test_the_hosted_section_of_each_tenant_is_read():
    policies = load_hosted_policies(RAW)
    assert set(policies) == {"acme"}  # a tenant without a hosted section has none
    acme = policies["acme"]
    assert acme.tools == ("web_search", "mcp")
    assert acme.allowed_domains == ("docs.python.org",)
    assert acme.mcp_servers == (McpServer(label="docs", url="https://mcp.example.com/sse"),)
    assert acme.untrusted == ("reddit.com",)
    assert HostedPolicy().allowed_domains is None  # omitted: any domain not blocked


def test_a_policy_file_is_read_from_yaml(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("tenants:\n  acme:\n    hosted:\n      sources: {blocked: [evil.example]}\n")
    assert hosted_policies_from_file(path)["acme"].blocked == ("evil.example",)


@pytest.mark.parametrize("hosted, named", [
    ({"tools": "web_search"}, "hosted.tools"),
    ({"wildcard": True}, "unknown keys"),
    ({"code_network": "yes"}, "code_network"),
    ({"mcp_servers": [{"label": "x"}]}, "mcp_servers"),
    ({"sources": {"maybe": ["x"]}}, "sources"),
])
def test_a_wrong_hosted_section_names_tenant_and_key(hosted, named):
    with pytest.raises(ConfigError, match=named) as caught:
        load_hosted_policies({"tenants": {"acme": {"hosted": hosted}}})
    assert "'acme'" in str(caught.value)


def test_a_domain_covers_its_subdomains_case_and_idna_insensitively():
    assert domain_matches("docs.python.org", ["python.org"])
    assert domain_matches("Docs.Python.ORG.", ["python.org"])
    assert not domain_matches("notpython.org", ["python.org"])
    assert not domain_matches("python.org", ["docs.python.org"])
    assert domain_matches("xn--bcher-kva.example", ["Bücher.example"])
    assert domain_matches("shop.bücher.example", ["xn--bcher-kva.example"])
    assert not domain_matches("", ["python.org"])


def test_trust_of_each_kind_of_source():
    acme = load_hosted_policies(RAW)["acme"]
    assert trust_of("https://docs.python.org/3/", acme) == "trusted"
    assert trust_of("https://old.reddit.com/r/x", acme) == "untrusted"
    assert trust_of("https://spam.example/", acme) == "blocked"
    assert trust_of("https://a.evil.example/", acme) == "blocked"  # egress blocked_domains
    assert trust_of("https://example.org/", acme) == "unknown"
    assert trust_of("file:file_abc", acme) == "trusted"
    assert trust_of("file:file_other", acme) == "unknown"
    assert trust_of("mcp:docs", acme) == "trusted"
    assert trust_of("https://docs.python.org/", None) == "unknown"


def test_blocked_wins_over_trusted_and_untrusted_over_trusted():
    both = HostedPolicy(trusted=("example.com",), untrusted=("forum.example.com",),
                        blocked=("bad.forum.example.com",))
    assert trust_of("https://example.com/", both) == "trusted"
    assert trust_of("https://forum.example.com/", both) == "untrusted"
    assert trust_of("https://bad.forum.example.com/", both) == "blocked"
    listed_twice = HostedPolicy(trusted=("example.com",), blocked=("example.com",))
    assert trust_of("https://example.com/", listed_twice) == "blocked"
