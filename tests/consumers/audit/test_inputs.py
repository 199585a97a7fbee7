"""audit verify's input-packet check (consumers/audit/inputs.py) without a broker: archives
written by the real AuditWriter from the project's fixtures, with packets built by the gateway's
own InputPackets. The same on the real broker, gateway and worker:
tests/integration/gateway/test_input_packet.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from modelevents.adapters.registry import normalize_file
from modelevents.consumers.audit import inputs
from modelevents.consumers.audit.verify import verify_archive
from modelevents.schemas import codec, ids, run_input, run_input_pieces
from modelevents.schemas.transcript import NeutralRequest
from modelevents.services.gateway.calls.in_flight import LocalRuns
from modelevents.services.gateway.config import GatewayConfig
from modelevents.services.gateway.inputs.packets import InputPackets
from tests.consumers.audit.test_verify import write_archive
from tests.integration.pipeline import ONE_PER_API

SOURCE = {"events_topic": "t.events", "frames_topic": None, "inputs_topic": "t.run-inputs",
          "group": "g"}
CALL = "c0-1a2b3c4d"


def _events(run_id: str, call: str | None) -> list[tuple[str, int, bytes, bytes]]:
    """The events of a fixture as run ``run_id``; ``call``: as the gateway's call made them
    (their frame ids start with its tag)."""
    out = []
    for event in normalize_file(ONE_PER_API[0]).events:
        source = event.source
        if call is not None:
            source = dataclasses.replace(source, frame_id=f"{call}.{source.frame_id}")
        event = dataclasses.replace(event, run_id=run_id, tenant="default", source=source)
        out.append(("t.events", 0, run_id.encode(), codec.encode(event)))
    return out


def _packet(run_id: str, **changes) -> tuple[str, int, bytes, bytes]:
    neutral = NeutralRequest.model_validate({
        "transcript": [{"role": "user", "parts": [{"type": "text", "text": "Hello"}]}],
        "target": {"provider": "openai", "model": "gpt-4.1"}})
    packet = InputPackets(GatewayConfig()).packet(
        neutral, run_id=run_id, tenant="default", call=CALL, provider="openai",
        api="openai-responses", model="gpt-4.1")
    packet = dataclasses.replace(packet, **changes)
    return ("t.run-inputs", 0, run_id.encode(), run_input.encode(packet))


def _findings(report, check="input"):
    return ([(f.where, f.message) for f in report.problems if f.check == check],
            [(f.where, f.message) for f in report.notes if f.check == check])


def test_a_gateway_run_with_its_packet_and_a_fed_run_without_one_verify(tmp_path: Path):
    root = tmp_path / "a"
    write_archive(root, [_packet("run_g"), *_events("run_g", CALL), *_events("run_fed", None)],
                  source=SOURCE)
    report = verify_archive(root)
    assert report.ok, report.problems
    problems, notes = _findings(report)
    assert problems == []
    assert notes == [("run run_fed", "no input packet recorded (a run fed, or forwarded without "
                                     "POST /v1/runs/{id}/input)")]
    assert [p.call for p in report.input_packets["run_g"]] == [CALL]


def test_a_gateway_run_without_its_packet_fails(tmp_path: Path):
    root = tmp_path / "a"
    write_archive(root, _events("run_g", CALL), source=SOURCE)
    report = verify_archive(root)
    problems, _notes = _findings(report)
    assert not report.ok
    assert [where for where, _ in problems] == ["run run_g"]
    assert "started through the gateway" in problems[0][1]


def test_a_packet_changed_after_it_was_written_fails(tmp_path: Path):
    root = tmp_path / "a"
    edited = '{"transcript":[{"parts":[{"text":"Goodbye","type":"text"}],"role":"user"}]}'
    write_archive(root, [_packet("run_g", request=edited), *_events("run_g", CALL)],
                  source=SOURCE)
    problems, _notes = _findings(verify_archive(root))
    assert [(where, "fingerprint" in message) for where, message in problems] == [
        (f"run run_g call {CALL}", True)]


def test_a_packet_in_another_tenants_directory_or_without_events_is_reported(tmp_path: Path):
    root = tmp_path / "a"
    write_archive(root, [_packet("run_g"), *_events("run_g", CALL),
                         _packet("run_lone", tenant="acme")], source=SOURCE)
    report = verify_archive(root)
    problems, notes = _findings(report)
    assert problems == []  # the writer put acme's packet under tenant=acme
    assert notes == [("run run_lone", "an input packet, but none of the run's events is in "
                                      "this archive")]
    manifests = "".join(p.read_text() for p in root.glob("tenant=*/hour=*/*.manifest.jsonl"))
    assert '"inputs":1' in manifests and '"input_redaction":{"' in manifests


def test_the_call_tags_the_gateway_makes_are_the_ones_the_audit_reads(tmp_path: Path):
    # One home for the format (schemas/ids.py): what LocalRuns.next_tag makes, the audit reads.
    assert inputs.GATEWAY_FRAME_ID is ids.GATEWAY_FRAME_ID
    tags = {LocalRuns().next_tag("run_x") for _ in range(20)}
    assert len(tags) == 20 and all(ids.CALL_TAG.fullmatch(tag) for tag in tags)
    tag = tags.pop()
    assert ids.GATEWAY_FRAME_ID.match(f"{tag}.s0:5") and not ids.GATEWAY_FRAME_ID.match("s0:5")
    root = tmp_path / "a"
    write_archive(root, _events("run_g", tag), source=SOURCE)
    problems, _notes = _findings(verify_archive(root))
    assert [where for where, _ in problems] == ["run run_g"]


def _big_packet_records(run_id: str, revision: int = 0) -> list[tuple[str, int, bytes, bytes]]:
    *_, value = _packet(run_id, revision=revision,
                        request='{"transcript":[{"parts":[{"text":"'
                        + "big words " * 200_000 + '","type":"text"}],"role":"user"}]}')
    packet = run_input.decode(value)
    packet = dataclasses.replace(packet, fingerprint=run_input.request_fingerprint(packet.request))
    return [("t.run-inputs", 0, key.encode(), piece)
            for key, piece in run_input_pieces.packet_records(packet)]


def test_a_packet_in_pieces_is_joined_and_pieces_never_joined_are_a_note(tmp_path: Path):
    pieces = _big_packet_records("run_g")
    assert len(pieces) >= 3
    stale = _big_packet_records("run_g", revision=5)[1:]  # their head gone (compaction)
    root = tmp_path / "a"
    write_archive(root, [*stale, *pieces, *_events("run_g", CALL)], source=SOURCE)
    report = verify_archive(root)
    problems, notes = _findings(report)
    assert problems == [], problems
    assert [(p.revision, len(p.request) > 1_000_000) for p in report.input_packets["run_g"]] == [
        (0, True)]
    assert [(where, "pieces of input packet" in message) for where, message in notes] == [
        ("run run_g", True)]
    manifests = "".join(p.read_text() for p in root.glob("tenant=*/hour=*/*.manifest.jsonl"))
    assert '"input_redaction":{"' in manifests
