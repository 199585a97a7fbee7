"""The capability manifest (services/gateway/calls/capabilities.py + capabilities.yaml) and the router
(services/gateway/calls/router.py): incompatible targets are rejected before anything is sent, with
exactly what each candidate lacks."""

from __future__ import annotations

import pytest

from modelevents.schemas.errors import InputError
from modelevents.schemas.transcript import CAPABILITIES, NeutralRequest
from modelevents.services.errors import CapabilityRejected, ManifestError
from modelevents.services.gateway.calls.capabilities import load_manifest, parse_manifest
from modelevents.services.gateway.calls.router import route


@pytest.fixture(scope="module")
def manifest():
    return load_manifest()


def request(*parts: dict, **extra) -> NeutralRequest:
    document = {"transcript": [{"role": "user",
                                "parts": [{"type": "text", "text": "hi"}, *parts]}]}
    document.update(extra)
    if "target" not in document and "preferences" not in document:
        document["target"] = {"provider": "openai", "model": "gpt-5"}
    return NeutralRequest.model_validate(document)


IMAGE = {"type": "image", "url": "https://example.org/a.png"}
AUDIO = {"type": "file", "data": "AAAA", "media_type": "audio/wav"}


def test_shipped_manifest_loads_and_speaks_the_vocabulary(manifest):
    resolved = manifest.lookup("anthropic", "anthropic-messages", "claude-sonnet-4-5")
    assert resolved is not None
    assert resolved.capabilities.names() <= set(CAPABILITIES)
    assert "reasoning" in resolved.capabilities.names()
    assert "background" not in resolved.capabilities.names()


def test_model_entries_override_the_api_defaults(manifest):
    assert manifest.lookup("openai", "openai-responses", "gpt-5-mini").capabilities.reasoning
    assert not manifest.lookup("openai", "openai-responses", "gpt-4o").capabilities.reasoning
    assert not manifest.lookup("anthropic", "anthropic-messages",
                               "claude-3-5-haiku-latest").capabilities.reasoning
    assert manifest.lookup("openai", "openai-responses", "davinci-002") is None


def test_route_to_the_named_target(manifest):
    chosen = route(request(target={"provider": "anthropic", "api": "anthropic-messages",
                                   "model": "claude-sonnet-4-5"}), manifest)
    assert (chosen.provider, chosen.api, chosen.model) == (
        "anthropic", "anthropic-messages", "claude-sonnet-4-5")


def test_target_without_api_takes_the_first_compatible_api(manifest):
    chosen = route(request(target={"provider": "google", "model": "gemini-2.5-flash"}), manifest)
    assert chosen.api == "gemini-interactions"


def test_image_part_needs_image_input(manifest):
    with pytest.raises(CapabilityRejected) as info:
        route(request(IMAGE, target={"provider": "openai", "api": "openai-chat",
                                     "model": "gpt-4o-audio-preview"}), manifest)
    (rejection,) = info.value.rejections
    assert [(m.capability, m.because) for m in rejection.missing] == [
        ("input.image", "transcript[0].parts[1] is an image")]
    assert isinstance(info.value, InputError)


def test_audio_file_needs_audio_input(manifest):
    with pytest.raises(CapabilityRejected) as info:
        route(request(AUDIO, target={"provider": "anthropic", "model": "claude-sonnet-4-5"}),
              manifest)
    assert info.value.rejections[0].missing[0].capability == "input.audio"


def test_rejection_lists_every_candidate_and_exactly_what_it_lacks(manifest):
    with pytest.raises(CapabilityRejected) as info:
        route(request(IMAGE, required_capabilities=["webhooks"], background=True, preferences=[
            {"provider": "anthropic", "model": "claude-sonnet-4-5"},
            {"provider": "openai", "api": "openai-chat", "model": "gpt-4.1"},
            {"provider": "mistral", "model": "mistral-large"},
            {"provider": "openai", "api": "openai-responses", "model": "gpt-3.5-turbo"}]),
            manifest)
    body = info.value.to_dict()
    assert body["code"] == "capability_rejected" and body["error"] == str(info.value)
    candidates = body["candidates"]
    assert candidates[0] == {"provider": "anthropic", "api": "anthropic-messages",
                             "model": "claude-sonnet-4-5", "missing": [
                                 {"capability": "webhooks",
                                  "because": "listed in required_capabilities"},
                                 {"capability": "background", "because": "background is true"}]}
    assert [m["capability"] for m in candidates[1]["missing"]] == ["webhooks", "background"]
    assert "provider 'mistral' is not in the capability manifest" in candidates[2]["reason"]
    assert "add it to the gateway's capability manifest" in candidates[3]["reason"]
    # What a client reads names no path of the server's installation.
    assert manifest.source.startswith("/") and manifest.source not in str(body)
    assert "claude-sonnet-4-5 lacks webhooks" in str(info.value)
    assert info.value.details() == candidates


def test_history_with_tool_calls_needs_tools(manifest):
    document = {"transcript": [
        {"role": "user", "parts": [{"type": "text", "text": "search"}]},
        {"role": "assistant", "parts": [{"type": "tool_call", "tool_name": "s",
                                         "tool_call_id": "c1"}]}],
        "target": {"provider": "openai", "api": "openai-chat",
                   "model": "gpt-4o-search-preview"}}
    with pytest.raises(CapabilityRejected) as info:
        route(NeutralRequest.model_validate(document), manifest)
    assert info.value.rejections[0].missing[0].because == "transcript[1].parts[0] is a tool_call"


def test_preferred_capabilities_rank_compatible_targets(manifest):
    preferences = [{"provider": "anthropic", "model": "claude-sonnet-4-5"},
                   {"provider": "openai", "model": "gpt-5"}]
    assert route(request(preferences=preferences), manifest).provider == "anthropic"
    chosen = route(request(preferences=preferences, preferred_capabilities=["background"]),
                   manifest)
    assert (chosen.provider, chosen.api, chosen.preferred_met) == (
        "openai", "openai-responses", ("background",))


def test_an_incompatible_first_preference_falls_through(manifest):
    chosen = route(request(background=True, preferences=[
        {"provider": "anthropic", "model": "claude-sonnet-4-5"},
        {"provider": "google", "api": "gemini-generate", "model": "gemini-2.5-flash"},
        {"provider": "google", "api": "gemini-interactions", "model": "gemini-2.5-flash"}]),
        manifest)
    assert chosen.api == "gemini-interactions"


def test_manifest_errors_say_where(tmp_path):
    with pytest.raises(ManifestError, match="not valid YAML"):
        parse_manifest("apis: [", "bad.yaml")
    text = """
version: 1
apis:
  - provider: openai
    api: openai-responses
    capabilities: {input: [text, smell], tools: true, server_state: true, background: true,
                   webhooks: true, hosted_tools: [], citations: true, prompt_caching: true,
                   parallel_tool_calls: true, structured_output: true, reasoning: true}
    models: [{match: ["gpt-5*"]}]
"""
    with pytest.raises(ManifestError, match=r"apis\.0\.capabilities\.input\.1"):
        parse_manifest(text, "bad.yaml")
    with pytest.raises(ManifestError, match="listed twice"):
        fixed = text.replace("smell", "image")
        parse_manifest(fixed + fixed.split("apis:\n")[1], "dup.yaml")
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifest(tmp_path / "missing.yaml")
