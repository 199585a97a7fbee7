"""NeutralRequest.hosted_tools (schemas/hosted_tools.py): typed entries, checked with clear
errors."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from modelevents.schemas.domains import normalize_domain
from modelevents.schemas.hosted_tools import McpTool, WebSearchTool
from modelevents.schemas.transcript import HOSTED_TOOLS, NeutralRequest


def request(*hosted: dict) -> NeutralRequest:
    return NeutralRequest.model_validate({
        "transcript": [{"role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        "target": {"provider": "openai", "model": "gpt-5"}, "hosted_tools": list(hosted)})


def test_each_entry_is_typed_and_domains_are_normalized():
    parsed = request({"type": "web_search", "allowed_domains": ["Docs.Python.org.", "bücher.example",
                                                               "docs.python.org"]},
                     {"type": "mcp", "server_label": "docs",
                      "server_url": "https://mcp.example.com/sse", "allowed_tools": ["search"]})
    search, mcp = parsed.hosted_tools
    assert isinstance(search, WebSearchTool) and isinstance(mcp, McpTool)
    assert search.allowed_domains == ["docs.python.org", "xn--bcher-kva.example"]
    assert request().hosted_tools == []


def test_every_enableable_type_is_a_capability_name():
    types = {"web_search", "web_fetch", "code_execution", "shell", "mcp", "file_search",
             "image_generation", "computer", "url_context", "google_maps"}
    assert types <= set(HOSTED_TOOLS)


@pytest.mark.parametrize(("hosted", "says"), [
    ([{"type": "web_search", "allowed_domains": ["https://docs.python.org/3"]}],
     "not a bare domain"),
    ([{"type": "web_fetch", "blocked_domains": ["*.evil.example"]}], "not a bare domain"),
    ([{"type": "web_search", "allowed_domains": ["a.example"], "blocked_domains": ["A.example"]}],
     "both allowed and blocked"),
    ([{"type": "code_execution", "allowed_domains": ["pypi.org"]}], "set network to true"),
    ([{"type": "mcp", "server_label": "docs", "server_url": "http://mcp.example.com"}],
     "must be an https:// URL"),
    ([{"type": "file_search", "store_ids": []}], "store_ids"),
    ([{"type": "web_search"}, {"type": "web_search"}], r"hosted_tools\[1\] repeats 'web_search'"),
    ([{"type": "mcp", "server_label": "a", "server_url": "https://a.example"},
      {"type": "mcp", "server_label": "a", "server_url": "https://b.example"}],
     "repeats MCP server label 'a'"),
    ([{"type": "teleport"}], "does not match any of the expected tags"),
    ([{"type": "web_search", "max_results": 3}], "Extra inputs are not permitted"),
])
def test_bad_entries_are_refused_with_what_to_change(hosted, says):
    with pytest.raises(ValidationError, match=says):
        request(*hosted)


def test_two_mcp_servers_with_their_own_labels():
    parsed = request({"type": "mcp", "server_label": "a", "server_url": "https://a.example"},
                     {"type": "mcp", "server_label": "b", "server_url": "https://b.example"})
    assert [t.server_label for t in parsed.hosted_tools] == ["a", "b"]


@pytest.mark.parametrize("bad", ["", "a..b", "-a.example", "a.example:443", "a b.example"])
def test_normalize_domain_refuses_what_is_no_host_name(bad):
    with pytest.raises(ValueError):
        normalize_domain(bad)


def test_a_request_without_hosted_tools_keeps_its_json_form():
    # The input packet's fingerprint and the idempotency digest hash this form.
    assert "hosted_tools" not in request().model_dump(mode="json")
    assert "hosted_tools" not in request().model_dump_json()
    assert request({"type": "web_search"}).model_dump(mode="json")["hosted_tools"] == [
        {"type": "web_search", "allowed_domains": [], "blocked_domains": []}]
