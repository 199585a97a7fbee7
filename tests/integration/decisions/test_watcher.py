"""A decision recorded with `modelevents decide`, watched by `modelevents decisions watch`, on
the real broker with the real worker normalizing real recorded frames: runs that report the
decided snapshot leave it current; a run whose provider reports another snapshot demotes it —
the new revision names the trigger and the event that showed it, `decide show` and `decide list`
say so, the gauge reads 0 and the watcher logs it. A capability manifest whose entry for the
target changed demotes the decision when the watcher starts; a tool receipt of a run under it
naming another contract version of a bundle tool demotes it."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from modelevents.consumers.tools.receipts import ToolReceipt, encode_receipt
from modelevents.services.gateway.calls.capabilities import MANIFEST_PATH
from modelevents.services.migration.decisions import store
from tests.integration.decisions.watching import cli, gauge, wait_for, watching
from tests.integration.pipeline import (
    feed,
    fixture_frames,
    kafka_args,
    produce_raw,
    run,
)
from tests.paths import FIXTURES
from tests.services.migration.decisions import examples

pytestmark = pytest.mark.kafka

RECORDING = FIXTURES / "openai-responses" / "text-with-usage.sse"
SNAPSHOT = "gpt-5-mini-2025-08-07"  # what the recording's provider reports
NEWER = "gpt-5-mini-2026-01-15"


def _record(settings, tmp_path: Path, bundle) -> str:
    bundle_file = tmp_path / "bundle.yaml"
    bundle_file.write_text(yaml.safe_dump(bundle.model_dump(mode="json")))
    result_file = tmp_path / "result.json"
    result_file.write_text(json.dumps({
        "result_id": "evr-live", "bundle": bundle.bundle_id, "runs": 16, "rejected": 0,
        "errors": 0, "refusals": 1, "unknown_event_rate": 0.0,
        "needs_reconciliation_rate": 0.0}))
    recorded = cli("decide", "--bundle", str(bundle_file), "--eval", str(result_file),
                    "--owner", "platform", "--evidence", "https://wiki.example.com/r",
                    "--out", str(tmp_path / "decision.md"), "--json", *kafka_args(settings))
    assert recorded.returncode == 0, recorded.stderr
    return json.loads(recorded.stdout)["decision_id"]


def test_another_snapshot_on_live_events_demotes_the_decision_and_matching_runs_do_not(
        settings, start_worker, tmp_path: Path):
    decision_id = _record(settings, tmp_path,
                          examples.bundle(model="gpt-5-mini", snapshot=SNAPSHOT))
    assert "status: current" in (tmp_path / "decision.md").read_text()

    with watching(settings, tmp_path) as (watcher, port, log):
        assert gauge(port) == {decision_id: 1.0}
        start_worker()
        # Two runs as recorded (the decided snapshot), then one whose provider reports a newer.
        newer = tmp_path / "newer.sse"
        newer.write_bytes(RECORDING.read_bytes().replace(SNAPSHOT.encode(), NEWER.encode()))
        for path, run_id in ((RECORDING, "run_same_1"), (RECORDING, "run_same_2"),
                             (newer, "run_newer")):
            run(feed(settings, fixture_frames(path, run_id=run_id)[1]))
        wait_for(lambda: gauge(port).get(decision_id) == 0.0, "decision not demoted", log,
              watcher)

    decision = run(store.read_decisions(settings))[decision_id]
    assert (decision.status, decision.revision) == ("historical", 1)
    demotion = decision.demotion
    assert demotion is not None
    assert (demotion.trigger, demotion.expected, demotion.observed) == \
        ("model_snapshot", SNAPSHOT, NEWER)
    # The runs that matched the bundle did not demote it: the evidence is the newer run's.
    assert demotion.run_id == "run_newer" and demotion.event_id
    assert demotion.topic == settings.topic("events") and demotion.offset is not None
    assert f"decision {decision_id}" in log.read_text() and "demoted" in log.read_text()

    shown = cli("decide", "show", decision_id[:12], *kafka_args(settings))
    assert shown.returncode == 0, shown.stderr
    assert "**Status:** historical (revision 1" in shown.stdout and NEWER in shown.stdout
    listed = cli("decide", "list", *kafka_args(settings))
    assert listed.returncode == 0 and "historical" in listed.stdout
    assert "model_snapshot" in listed.stdout


def test_a_capability_manifest_that_changed_demotes_at_the_watchers_start(settings,
                                                                          tmp_path: Path):
    decision_id = _record(settings, tmp_path, examples.bundle())
    # The shipped manifest with one fact of the target's API changed.
    manifest = yaml.safe_load(MANIFEST_PATH.read_text())
    entry = next(a for a in manifest["apis"] if a["api"] == examples.API)
    entry["capabilities"]["tools"] = False
    changed = tmp_path / "capabilities.yaml"
    changed.write_text(yaml.safe_dump(manifest))
    with watching(settings, tmp_path, "--manifest", str(changed)) as (_, port, log):
        assert "demoted to historical evidence" in log.read_text()  # before it watched
        assert gauge(port) == {decision_id: 0.0}
    demotion = run(store.read_decisions(settings))[decision_id].demotion
    assert demotion is not None and demotion.trigger == "capabilities"
    assert (json.loads(demotion.expected or ""), json.loads(demotion.observed or "")) == \
        ({"tools": True}, {"tools": False})


def _runs_under(port: int, decision_id: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
               if s.name == "modelevents_decision_runs_total"
               and s.labels["decision_id"] == decision_id)


def test_a_receipt_under_another_tool_contract_version_demotes(settings, start_worker,
                                                               tmp_path: Path):
    decision_id = _record(settings, tmp_path,
                          examples.bundle(model="gpt-5-mini", snapshot=SNAPSHOT))
    with watching(settings, tmp_path) as (watcher, port, log):
        start_worker()
        run(feed(settings, fixture_frames(RECORDING, run_id="run_tools")[1]))
        wait_for(lambda: _runs_under(port, decision_id) == 1, "run not found under the decision",
              log, watcher)
        for version in ("2", "3"):  # the bundle's get_weather is version 2
            receipt = ToolReceipt(f"op-{version}", "key", "run_tools", "default", "get_weather",
                                  f"call-{version}", version, 1, "started", 1796630400000)
            run(produce_raw(settings, "receipts", b"run_tools", encode_receipt(receipt)))
        wait_for(lambda: gauge(port).get(decision_id) == 0.0, "decision not demoted", log,
              watcher)
    demotion = run(store.read_decisions(settings))[decision_id].demotion
    assert demotion is not None
    assert (demotion.trigger, demotion.expected, demotion.observed) == \
        ("tool_contract", "get_weather@2", "get_weather@3")
    # The receipt of version 2 did not demote it: the evidence is the second one.
    assert (demotion.run_id, demotion.topic, demotion.offset) == \
        ("run_tools", settings.topic("receipts"), 1)
