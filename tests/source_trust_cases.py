"""The source-trust cases the worker's tests share (tests/services/run_logic/test_source_trust.py
without a broker, tests/integration/processor/test_source_trust.py through the real worker): a policy, one
hand-written stream per provider API with sources of each verdict (tests/fixtures/<api>/
hosted-sources-trust.*), and what the worker must find in each."""

from __future__ import annotations

from modelevents.services.policy.hosted import load_hosted_policies
from tests.paths import FIXTURES

TENANT = "acme"
POLICY_YAML = """\
tenants:
  acme:
    hosted:
      tools: [web_search, web_fetch, code_execution, mcp]
      blocked_domains: [evil.example]
      mcp_servers: [{label: docs, url: "https://mcp.example.com/sse"}]
      code_network: false
      sources:
        trusted: [docs.python.org]
        untrusted: [reddit.com]
        blocked: [evil.example]
"""
TRUSTED = "https://docs.python.org/3/library/json.html"
UNTRUSTED = "https://www.reddit.com/r/python/comments/abc"
BLOCKED = "https://evil.example/payload"
VERDICTS = {TRUSTED: "trusted", UNTRUSTED: "untrusted", BLOCKED: "blocked"}


def policy():
    import yaml

    return load_hosted_policies(yaml.safe_load(POLICY_YAML))[TENANT]


# Fixture → the violations the worker adds, as (violation, call_id, source); the citations'
# verdicts are those of VERDICTS in the fixtures' order (trusted, untrusted, blocked).
CASES = {
    FIXTURES / "openai-responses" / "hosted-sources-trust.sse": {
        ("blocked_source", "ws_1", BLOCKED),
        ("mcp_server_not_allowed", "mcp_1", "mcp:rogue"),
        ("code_network_forbidden", "ci_1", None),
        ("blocked_source", None, BLOCKED),
    },
    FIXTURES / "openai-chat" / "hosted-sources-trust.json": {
        ("blocked_source", None, BLOCKED),
    },
    FIXTURES / "anthropic-messages" / "hosted-sources-trust.sse": {
        ("blocked_source", "srvtoolu_trust", BLOCKED),
        ("blocked_source", None, BLOCKED),
    },
    FIXTURES / "gemini-generate" / "hosted-sources-trust.sse": {
        ("blocked_source", "*", BLOCKED),  # the call id is minted (mev_…)
        ("blocked_source", None, BLOCKED),
    },
    FIXTURES / "gemini-interactions" / "hosted-sources-trust.sse": {
        ("blocked_source", "uc1", BLOCKED),
        ("mcp_server_not_allowed", "mcp1", "mcp:rogue"),
    },
}
# Fixture → (untrusted, blocked) sources a run counts: its citations and hosted results' sources.
COUNTS = {
    "openai-responses": (2, 2), "openai-chat": (1, 1), "anthropic-messages": (2, 2),
    "gemini-generate": (2, 2), "gemini-interactions": (1, 1),
}


def found(violations) -> set[tuple[str, str | None, str | None]]:
    """The violations of a run as CASES writes them (a minted call id as ``*``)."""
    return {(v.violation, "*" if (v.call_id or "").startswith("mev_") else v.call_id, v.source)
            for v in violations}
