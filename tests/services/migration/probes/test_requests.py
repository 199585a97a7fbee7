"""requests.plan: one probe per claimed capability, each a valid, minimal neutral request that
asks for exactly that capability; what no single request can show is listed with its reason."""

from __future__ import annotations

from modelevents.schemas.transcript import NeutralRequest
from modelevents.services.gateway.calls.capabilities import load_manifest
from modelevents.services.migration.probes.requests import plan


def test_only_claimed_capabilities_are_probed_each_with_a_valid_minimal_request():
    resolved = load_manifest().lookup("anthropic", "anthropic-messages", "claude-3-5-haiku-latest")
    assert resolved is not None
    probes = plan(resolved, 32, "probe-t")
    assert [p.capability for p in probes] == [
        c for c in ("input.text", "input.image", "input.file", "input.audio", "tools",
                    "server_state", "background", "webhooks", "citations", "prompt_caching",
                    "parallel_tool_calls", "structured_output", "reasoning",
                    "hosted_tools.web_search", "hosted_tools.file_search",
                    "hosted_tools.code_execution", "hosted_tools.web_fetch",
                    "hosted_tools.image_generation", "hosted_tools.mcp", "hosted_tools.shell",
                    "hosted_tools.computer", "hosted_tools.tool_search",
                    "hosted_tools.url_context", "hosted_tools.google_maps")
        if c in resolved.capabilities.names()]
    assert "reasoning" not in {p.capability for p in probes}  # not claimed for 3.5
    for probe in probes:
        if probe.request is None:
            assert probe.reason
            continue
        request = NeutralRequest.model_validate(probe.request)
        assert request.max_output_tokens == 32
        assert request.required_capabilities == [probe.capability]
        assert request.target is not None and request.target.model == "claude-3-5-haiku-latest"
        assert len(request.transcript) == 1
        assert request.run_id == f"probe-t-{probe.capability.replace('_', '-')}"


def test_each_request_asks_for_its_capability_alone():
    resolved = load_manifest().lookup("openai", "openai-responses", "gpt-4.1-mini")
    assert resolved is not None
    requests = {p.capability: p.request for p in plan(resolved, 64, "p")}
    assert [t["name"] for t in requests["tools"]["tools"]] == ["probe_echo"]
    assert len(requests["parallel_tool_calls"]["tools"]) == 2
    assert requests["background"]["background"] is True
    assert requests["hosted_tools.web_search"]["hosted_tools"] == [{"type": "web_search"}]
    assert "structured_output" in requests["structured_output"]
    parts = requests["input.image"]["transcript"][0]["parts"]
    assert [p["type"] for p in parts] == ["text", "image"]
    plain = ("tools", "hosted_tools", "structured_output", "background")
    assert not any(key in requests["input.text"] for key in plain)
    # What needs the user's setup or a second call is not sent.
    assert requests["hosted_tools.file_search"] is None and requests["server_state"] is None
