"""The input packet's redaction policy (services/gateway/inputs/redaction.py) and the packet the gateway
builds from a neutral request (services/gateway/inputs/packets.py), without a broker."""

from __future__ import annotations

import hashlib

import pytest
from pydantic import ValidationError

from modelevents.schemas import run_input
from modelevents.schemas.errors import SchemaError
from modelevents.schemas.transcript import NeutralRequest
from modelevents.services.gateway.config import GatewayConfig, ProviderConfig
from modelevents.services.gateway.inputs.packets import InputPackets
from modelevents.services.gateway.inputs.redaction import RedactionConfig, Redactor

KEY = "sk-live-0123456789abcdef0123"


def test_fields_are_replaced_whole_and_case_insensitively():
    redactor = Redactor(RedactionConfig())
    clean, count = redactor.redact({"arguments": {"Password": {"nested": "x"}, "city": "Oslo"},
                                    "list": [{"API_KEY": "k"}]})
    assert clean == {"arguments": {"Password": "[REDACTED:field]", "city": "Oslo"},
                     "list": [{"API_KEY": "[REDACTED:field]"}]}
    assert count == 2


def test_patterns_and_held_secrets_are_cut_from_every_string():
    redactor = Redactor(RedactionConfig(), secrets=[KEY, "tok_short"])
    clean, count = redactor.redact(["mail me: a.b@example.org", f"key={KEY}", "use tok_short",
                                    "Bearer abc.def_ghi-123", "AIza" + "A" * 35])
    assert clean == ["mail me: [REDACTED:email]", "key=[REDACTED:secret]",
                     "use [REDACTED:secret]", "[REDACTED:bearer_token]",
                     "[REDACTED:google_key]"]
    assert count == 5


def test_an_unknown_key_like_string_is_cut_by_its_pattern_not_only_when_held():
    clean, _ = Redactor(RedactionConfig()).redact("sk-proj-ABCDEFGHIJKLMNOPQRSTUV")
    assert clean == "[REDACTED:openai_key]"


def test_a_configured_policy_replaces_the_default_and_is_recorded():
    config = RedactionConfig(name="acme", fields=["ssn"], patterns={"order": r"ORD-\d+"})
    redactor = Redactor(config)
    clean, count = redactor.redact({"ssn": "1", "text": "ORD-42 for x@y.io"})
    assert clean == {"ssn": "[REDACTED:field]", "text": "[REDACTED:order] for x@y.io"}
    policy = redactor.record(count)
    assert (policy.name, policy.fields, policy.redactions) == ("acme", ["ssn"], 2)
    assert policy.patterns == [run_input.RedactionPattern("order", r"ORD-\d+")]
    assert policy.fingerprint == config.fingerprint != RedactionConfig().fingerprint


@pytest.mark.parametrize(("patterns", "says"), [({"bad": "("}, "not a regular expression"),
                                                ({"empty": "x*"}, "matches the empty string")])
def test_a_bad_pattern_is_refused_when_the_config_is_read(patterns, says):
    with pytest.raises(ValidationError, match=says):
        GatewayConfig(redaction={"patterns": patterns})


def _neutral(text: str, **extra) -> NeutralRequest:
    return NeutralRequest.model_validate({
        "transcript": [{"role": "user", "parts": [{"type": "text", "text": text}]}],
        "target": {"provider": "openai", "model": "gpt-4.1"}, **extra})


def test_the_packet_holds_the_redacted_request_and_its_fingerprint():
    config = GatewayConfig(providers={"openai": ProviderConfig(
        base_url="http://127.0.0.1:1", api_key=KEY)})
    packets = InputPackets(config)
    packet = packets.packet(_neutral(f"my key {KEY}", run_id="run_a", session_id="s-1",
                                     background=True),
                            run_id="run_a", tenant="t", call="c0-00000000",
                            provider="openai", api="openai-responses", model="gpt-4.1")
    assert KEY not in packet.request and "[REDACTED:secret]" in packet.request
    assert packet.fingerprint == hashlib.sha256(packet.request.encode()).hexdigest()
    doc = packet.request_doc()
    assert "run_id" not in doc and "session_id" not in doc and "tenant" not in doc
    assert packet.correlation_id == "s-1"  # no header: the session id
    assert packet.cancellable_by == ["t"]  # a background Responses call: its owner cancels
    # Another run, the same request: the same fingerprint; another text: another.
    again = packets.packet(_neutral(f"my key {KEY}", run_id="run_b", background=True),
                           run_id="run_b", tenant="t", call="c0-11111111",
                           provider="openai", api="openai-responses", model="gpt-4.1")
    assert again.fingerprint == packet.fingerprint
    other = packets.packet(_neutral("another question", background=True), run_id="run_c",
                           tenant="t", call="c0-2", provider="openai",
                           api="openai-responses", model="gpt-4.1")
    assert other.fingerprint != packet.fingerprint
    assert run_input.decode(run_input.encode(packet)) == packet


def test_a_packet_value_that_is_not_one_is_a_clear_error():
    with pytest.raises(SchemaError, match="not a RunInput"):
        run_input.decode(b"\xc3\x01" + bytes(8) + b"x")
    good = run_input.encode(InputPackets(GatewayConfig()).packet(
        _neutral("hi"), run_id="r", tenant="t", call="s0", provider="openai",
        api="openai-chat", model="m", origin="forwarded"))
    with pytest.raises(SchemaError, match="cannot be read"):
        run_input.decode(good[:20])
