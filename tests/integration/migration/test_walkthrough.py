"""The walkthrough of docs/migration.md, step by step as a user runs it, on the real broker,
worker, gateway and tool executor, the providers played by the simulator given the corpus: two
bundles created from the shipped files; the shipped corpus run under both through the gateway
(one rejected by a hard gate, the other compared on accepted runs only, as ``eval show`` reads
the result back); a decision recorded from the eval result's id on the topic; ``decisions
watch`` started; the model snapshot the simulator reports changed; one live run under the
bundle (after one as decided, which leaves it current); the decision demoted by that run
(``decide show``, ``decide list``, the gauge, the gateway's
decisions API the UI reads)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from modelevents.services.cli.main import main
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local.asgi_thread import ServedApp
from modelevents.services.migration.eval.corpus import EXAMPLE_CORPUS, load_corpus
from modelevents.services.simulator.server import SimulatorHandle
from tests.integration.decisions.watching import cli, gauge, wait_for, watching
from tests.integration.eval_stack import db, executor, simulator  # noqa: F401 (fixtures)
from tests.integration.pipeline import kafka_args
from tests.integration.simulated_gateway import (  # noqa: F401 (fixtures)
    gateway,
    settings,
    settled,
    sim,
    start_gateway,
    start_run,
    wait_run,
)

pytestmark = pytest.mark.kafka

CORPUS = load_corpus("example")
BUNDLES = EXAMPLE_CORPUS / "bundles"
SNAPSHOT = "gpt-5-mini-2025-08-07"  # the responses bundle's, and its recordings'
NEWER = "gpt-5-mini-2026-01-15"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[str, str]:
    """``modelevents ARGV`` as the user types it: its stdout and stderr; it must succeed."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, f"modelevents {' '.join(argv)} exited {code}: {err}"
    return out, err


def test_the_migration_walkthrough(settings: PipelineSettings, sim: SimulatorHandle,
                                   gateway: ServedApp, executor: str, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]):
    kafka = kafka_args(settings)

    # 1. Two bundles, from the shipped files.
    responses = _run(capsys, "bundle", "create", str(BUNDLES / "responses.yaml"), *kafka)[0]
    chat = _run(capsys, "bundle", "create", str(BUNDLES / "chat.yaml"), *kafka)[0]
    responses, chat = responses.strip(), chat.strip()
    assert responses.startswith("bnd-") and chat.startswith("bnd-") and responses != chat
    listed = _run(capsys, "bundle", "list", *kafka)[0]
    assert responses in listed and chat in listed

    # 2. The shipped corpus under both, through the gateway to the simulator; the bundles named
    # by a prefix of their ids, as `bundle list` shows them.
    _, err = _run(capsys, "eval", "run", "--corpus", "example", "--bundle", responses[:16],
                  "--bundle", chat[:16], "--simulator", "--gateway", gateway.url,
                  "--tenant", executor, "--timeout", "120", *kafka)
    found = re.search(r"result (evr-[0-9a-f]+) written", err)
    assert found, err
    result_id = found.group(1)

    # 3. One rejected by a hard gate, the other compared on accepted runs only.
    record = json.loads(_run(capsys, "eval", "show", result_id[:20], "--json", *kafka)[0])
    assert record["result_id"] == result_id and record["mode"] == "live"
    on_responses, on_chat = record["bundles"]
    assert (on_responses["bundle"], on_chat["bundle"]) == (responses, chat)
    assert on_responses["runs"] > 0 and on_responses["rejected"] == 0
    assert on_chat["rejected"] > 0 and on_chat["gate_failures"] == {"invalid_schema": 1}
    rejected = [r for r in record["runs"] if not r["accepted"]]
    assert [(r["task"], r["bundle"]) for r in rejected] == [("multi-tool", chat)]
    (gate,) = rejected[0]["gates"]  # a call whose arguments the tool's schema refuses
    assert gate["gate"] == "invalid_schema" and "get_time" in gate["evidence"], gate
    assert on_responses["model_snapshots"] == [SNAPSHOT]
    (comparison,) = record["comparisons"]
    success = next(f for f in comparison["figures"] if f["name"] == "task_success")
    assert (success["rejected_a"], success["rejected_b"]) == (0, 1)
    both = {t.id for t in CORPUS.tasks
            if {"openai-responses", "openai-chat"} <= t.simulator.keys()}
    # Paired over the tasks both ran and neither had rejected: the gated run counts nowhere;
    # Chat Completions cannot run the interrupted stream's background request at all.
    assert success["tasks"] == len(both - {"multi-tool", "interrupted-stream"})
    chat_success = next(f for f in on_chat["figures"] if f["name"] == "task_success")
    assert (chat_success["n"], chat_success["rejected"]) == (on_chat["runs"] - 1, 1)
    # What the UI's Eval results page reads.
    shown = httpx.get(f"{gateway.url}/v1/evals/{result_id}", timeout=30)
    assert shown.status_code == 200 and shown.json()["result_id"] == result_id, shown.text

    # 4. A decision on the accepted bundle, resting on the result on the eval-results topic.
    decision = json.loads(_run(capsys, "decide", "--bundle", responses[:16], "--eval",
                               result_id[:20], "--owner", "platform", "--json", *kafka)[0])
    decision_id = decision["decision_id"]
    assert (decision["status"], decision["bundle_id"]) == ("current", responses)
    assert decision["eval_results"] == [result_id]
    assert decision["triggers"]["model_snapshot"] == SNAPSHOT
    assert decision["availability"]["runs"] == on_responses["runs"]

    # 5. The watcher; 6. the simulator reports another snapshot; 7. one live run under the
    # bundle — the conversation of the corpus's simple-generation task, the rest the bundle's.
    # A run before the change, as decided, must not be what demotes it.
    transcript = [m.model_dump(mode="json", exclude_none=True)
                  for m in CORPUS.task("simple-generation").transcript]
    with watching(settings, tmp_path) as (watcher, port, log):
        assert gauge(port).get(decision_id) == 1.0
        as_decided = start_run(gateway, {"bundle": responses, "transcript": transcript})
        wait_run(gateway, as_decided["run_id"], settled("completed"), "completed")
        changed = httpx.put(f"{sim.base_url}/_simulator/model", json={"model": NEWER},
                            timeout=30)
        assert changed.status_code == 200, changed.text
        run_id = start_run(gateway, {"bundle": responses, "transcript": transcript})["run_id"]
        # 8. Demoted.
        wait_for(lambda: gauge(port).get(decision_id) == 0.0, "decision not demoted", log,
                 watcher)
    assert f"decision {decision_id}" in log.read_text()

    demoted = json.loads(_run(capsys, "decide", "show", decision_id[:12], "--json",
                              *kafka)[0])
    assert (demoted["status"], demoted["revision"]) == ("historical", 1)
    demotion = demoted["demotion"]
    assert (demotion["trigger"], demotion["expected"], demotion["observed"]) == (
        "model_snapshot", SNAPSHOT, NEWER)
    assert demotion["run_id"] == run_id and demotion["event_id"]
    assert demotion["topic"] == settings.topic("events") and demotion["offset"] is not None
    listing = cli("decide", "list", *kafka)
    assert listing.returncode == 0, listing.stderr
    assert decision_id[:16] in listing.stdout and "historical" in listing.stdout
    # What the UI's Decisions page reads.
    page = httpx.get(f"{gateway.url}/v1/decisions/{decision_id}", timeout=30)
    assert page.status_code == 200, page.text
    assert (page.json()["status"], page.json()["demotion"]["trigger"]) == (
        "historical", "model_snapshot")
