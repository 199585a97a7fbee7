"""``modelevents capabilities probe`` on real components: the gateway (uvicorn on a loopback
port) calling the provider simulator, the real broker and worker. The simulator answers each
probe request by what it asks for (scenarios.yaml ``by_request``): gpt-4.1-mini shows the
capabilities, gpt-4.1-nano refuses image input with a 400 — the claim the probe must call
contradicted, with the error and the run as evidence. What was observed is read back from the
JSON output, the ``--out`` file and the ``capability-probes`` topic, and checked against what
the simulator was actually sent.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelevents.adapters.registry import normalize_bytes
from modelevents.services.cli.main import main
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local.asgi_thread import ServedApp
from modelevents.services.migration.probes import record as rec
from modelevents.services.simulator.server import SimulatorHandle
from tests.integration.pipeline import run
from tests.integration.simulated_gateway import (  # noqa: F401  (fixtures used by name)
    gateway,
    requests_to,
    settings,
    sim,
    simulator,
    start_gateway,
)

pytestmark = pytest.mark.kafka


def probe(capsys: pytest.CaptureFixture[str], gateway: ServedApp, settings: PipelineSettings,
          target: str, *extra: str) -> tuple[int, dict, str]:
    code = main(["capabilities", "probe", "--target", target, "--gateway", gateway.url,
                 "--json", "--bootstrap-servers", settings.bootstrap_servers,
                 "--prefix", settings.topic_prefix, *extra])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def by_capability(doc: dict) -> dict[str, dict]:
    return {o["capability"]: o for o in doc["observations"]}


def published(settings: PipelineSettings) -> list[rec.CapabilityProbe]:
    async def read() -> list[rec.CapabilityProbe]:
        return [rec.decode(r.raw) async for r in clients.read_records(
            settings, rec.TOPIC, to_end=True, timeout=10) if r is not None]
    return run(read())


def reported_models(sim: SimulatorHandle, requests: list[dict]) -> list[str]:
    """The models that the recordings served for ``requests`` report, normalized offline."""
    models: set[str] = set()
    for name in {r["scenario"] for r in requests}:
        path = sim.simulator.registry.scenarios[name].path
        events = normalize_bytes(path.read_bytes(), source_name=path.name).events
        models.update(e.model for e in events if e.model)
    return sorted(models)


def creates(sim: SimulatorHandle) -> list[dict]:
    return [r for r in requests_to(sim, "openai-responses") if r["method"] == "POST"]


def test_each_claim_is_confirmed_by_the_events_its_run_produced(
        capsys, gateway: ServedApp, settings: PipelineSettings, sim: SimulatorHandle,
        tmp_path: Path):
    out = tmp_path / "probe.json"
    code, doc, err = probe(capsys, gateway, settings, "openai/openai-responses/gpt-4.1-mini",
                           "--out", str(out), "--account", "org-probe", "--region", "us")
    assert code == 0, err
    seen = by_capability(doc)
    # Every capability the manifest claims for the model, and only those (reasoning is not).
    assert "reasoning" not in seen and {"tools", "background", "hosted_tools.mcp"} <= set(seen)
    assert all(o["claimed"] for o in doc["observations"])
    expected = {
        "input.text": "confirmed", "input.image": "confirmed", "input.file": "confirmed",
        "tools": "confirmed", "parallel_tool_calls": "confirmed",
        "structured_output": "confirmed", "background": "confirmed", "citations": "confirmed",
        "prompt_caching": "confirmed", "hosted_tools.web_search": "confirmed",
        "hosted_tools.code_execution": "confirmed", "hosted_tools.computer": "confirmed",
        "hosted_tools.shell": "confirmed",
        # The simulator answers image_generation with plain text: the model did not use it.
        "hosted_tools.image_generation": "inconclusive",
        # No single minimal request shows these: nothing is sent, the record says why.
        "server_state": "inconclusive", "webhooks": "inconclusive",
        "hosted_tools.file_search": "inconclusive", "hosted_tools.mcp": "inconclusive",
        "hosted_tools.tool_search": "inconclusive",
    }
    assert {c: o["observed"] for c, o in seen.items()} == expected
    # The evidence is what the run's events showed.
    assert "tool.call" in seen["tools"]["event_kinds"]
    assert seen["parallel_tool_calls"]["evidence"] == "2 tool.call events in one turn"
    assert "structured.done" in seen["structured_output"]["event_kinds"]
    assert "hosted.call" in seen["hosted_tools.web_search"]["event_kinds"]
    assert "citation" in seen["citations"]["event_kinds"]
    assert seen["background"]["evidence"].endswith("polled to completed")
    assert seen["server_state"]["run_id"] is None and "second call" in seen["server_state"][
        "evidence"]
    # The count printed before sending is the number of requests the provider received, each
    # minimal.
    sent = creates(sim)
    assert f": {doc['requests_sent']} requests (max_output_tokens 64)" in err
    assert len(sent) == doc["requests_sent"] == 14
    assert all(r["body"]["max_output_tokens"] == 64 for r in sent)
    # What the provider reported: the models of the recordings the simulator served.
    assert doc["model_snapshots"] and doc["model_snapshots"] == reported_models(sim, sent)
    assert seen["tools"]["model_snapshot"] in doc["model_snapshots"]
    assert (doc["account"], doc["region"], doc["api_revision"]) == ("org-probe", "us", None)
    # The same record in the file and on the topic, under its content-addressed id.
    assert json.loads(out.read_text()) == doc
    on_topic = [r for r in published(settings) if r.probe_id == doc["probe_id"]]
    assert len(on_topic) == 1 and on_topic[0].as_json() == doc
    assert on_topic[0].with_id().probe_id == doc["probe_id"]
    # `modelevents tail` prints it as --json did.
    assert main(["tail", "--topic", "capability-probes", "--timeout", "2", "--bootstrap-servers",
                 settings.bootstrap_servers, "--prefix", settings.topic_prefix]) == 0
    tailed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert doc in tailed


def test_a_claim_the_provider_refuses_is_contradicted_with_its_evidence(
        capsys, gateway: ServedApp, settings: PipelineSettings, sim: SimulatorHandle):
    code, doc, err = probe(capsys, gateway, settings, "openai/openai-responses/gpt-4.1-nano",
                           "--no-publish")
    assert code == 1, err
    image = by_capability(doc)["input.image"]
    assert image["observed"] == "contradicted"
    assert "error" in image["event_kinds"] and image["run_id"]
    assert "image_url is only supported by certain models" in image["error"]
    assert image["evidence"].startswith("error event (invalid_request")
    # The other claims still hold for the model.
    assert by_capability(doc)["tools"]["observed"] == "confirmed"
    # The refused request is the one the simulator got for that run.
    refused = [r for r in creates(sim) if r["scenario"] == "openai-responses/image-unsupported"]
    assert len(refused) == 1
    assert not [r for r in published(settings) if r.model == "gpt-4.1-nano"]


def test_a_missing_topic_fails_the_publish_but_keeps_the_record(
        capsys, gateway: ServedApp, settings: PipelineSettings, tmp_path: Path):
    out = tmp_path / "probe.json"
    code = main(["capabilities", "probe", "--target", "openai/openai-responses/gpt-4.1-mini",
                 "--gateway", gateway.url, "--out", str(out), "--bootstrap-servers",
                 settings.bootstrap_servers, "--prefix", "nowhere."])
    err = capsys.readouterr().err
    assert code == 2 and "topic nowhere.capability-probes does not exist" in err, err
    assert "modelevents topics create --prefix nowhere." in err
    assert by_capability(json.loads(out.read_text()))["tools"]["observed"] == "confirmed"
