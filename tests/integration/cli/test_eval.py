"""``modelevents eval run`` end to end on the real broker, worker, gateway and tool executor, the
providers played by the simulator given the corpus (each task answered by its scenario, the
bundles' own models named): the shipped corpus run twice under two bundles (OpenAI Responses
and Chat Completions), one rejected by a hard gate and the other compared on accepted runs only;
the result on the eval-results topic, read back by ``eval show`` and ``eval compare``; the same
runs re-scored from the topics (``--from-topic``) give the same verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelevents.services.cli.main import main
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local.asgi_thread import ServedApp
from modelevents.services.migration.eval.corpus import EXAMPLE_CORPUS, load_corpus
from modelevents.services.simulator.server import SimulatorHandle
from tests.integration.eval_stack import db, executor, simulator  # noqa: F401 (fixtures)
from tests.integration.simulated_gateway import (  # noqa: F401 (fixtures)
    gateway,
    settings,
    sim,
    start_gateway,
)
from tests.integration.tools.test_executor import invocations, rows
from tests.services.migration.eval.runs import bundle

pytestmark = pytest.mark.kafka

CORPUS = load_corpus("example")
TOOLS = list({t.name: t for task in CORPUS.tasks for t in task.tools}.values())
RESPONSES = bundle("responses", "openai", "openai-responses", "gpt-5-mini", TOOLS)
CHAT = bundle("chat", "openai", "openai-chat", "gpt-4o-mini", TOOLS)


def _kafka(settings: PipelineSettings) -> list[str]:
    return ["--bootstrap-servers", settings.bootstrap_servers, "--prefix", settings.topic_prefix]


def _bundle_files(tmp_path: Path) -> list[str]:
    out = []
    for b in (RESPONSES, CHAT):
        path = tmp_path / f"{b.name}.json"
        path.write_text(b.model_dump_json(by_alias=True))
        out += ["--bundle", str(path)]
    return out


def test_two_bundles_through_the_pipeline_one_rejected_by_a_gate(
        settings: PipelineSettings, sim: SimulatorHandle, gateway: ServedApp, executor: str,
        db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    code = main(["eval", "run", "--corpus", "example", *_bundle_files(tmp_path),
                 "--gateway", gateway.url, "--simulator", "--tenant", executor,
                 "--repeat", "2", "--timeout", "120", "--prices", str(EXAMPLE_CORPUS / "prices.example.yaml"),
                 "--json", *_kafka(settings)])
    out, err = capsys.readouterr()
    assert code == 0, err
    record = json.loads(out)
    assert "runs settled" in err or "runs started" in err  # progress went to stderr
    assert record["tenant"] == executor
    # Every call reached the simulator as the bundle rendered it, the bundle's own model named,
    # and the simulator knew the task by its conversation.
    calls = [r for r in sim.simulator.requests()
             if r["method"] == "POST" and r["path"] in ("/v1/responses", "/v1/chat/completions")]
    assert calls and all("task" in r for r in calls), [r["body"] for r in calls if "task" not in r]
    assert {(r["api"], r["body"]["model"]) for r in calls} == {
        ("openai-responses", "gpt-5-mini"), ("openai-chat", "gpt-4o-mini")}
    assert all(r["scenario"] == CORPUS.task(r["task"]).simulator[r["api"]] for r in calls)
    responses, chat = record["bundles"]
    assert (responses["bundle"], chat["bundle"]) == (RESPONSES.bundle_id, CHAT.bundle_id)
    # Every task of the corpus ran twice under each bundle that has a scenario for it, but one:
    # the gateway refuses a background run on Chat Completions, and the result says so.
    assert responses["runs"] == 2 * sum("openai-responses" in t.simulator for t in CORPUS.tasks)
    assert responses["not_started"] == []
    assert chat["runs"] == 2 * (sum("openai-chat" in t.simulator for t in CORPUS.tasks) - 1)
    assert [r.split(":")[0] for r in chat["not_started"]] == [
        "interrupted-stream (repeat 0)", "interrupted-stream (repeat 1)"]
    assert all(": 422 " in r and "background" in r for r in chat["not_started"])
    # Chat's multi-tool run called get_time with a city its schema does not take: rejected.
    assert chat["rejected"] == 2, [(r["task"], r["gates"]) for r in record["runs"]
                                   if not r["accepted"]]
    assert chat["gate_failures"] == {"invalid_schema": 2}
    assert responses["rejected"] == 0
    rejected = [r for r in record["runs"] if not r["accepted"]]
    assert [(r["task"], r["repeat"], r["bundle"]) for r in rejected] == [
        ("multi-tool", 0, CHAT.bundle_id), ("multi-tool", 1, CHAT.bundle_id)]
    (gate,) = rejected[0]["gates"]
    assert "call_eval_time to get_time" in gate["evidence"]
    # The snapshots the simulator's recordings report, read from the events.
    assert responses["model_snapshots"] == ["gpt-5-mini-2025-08-07"]
    assert "gpt-4o-mini-2024-07-18" in chat["model_snapshots"]
    # The tool executor ran the calls. One write timed out after it committed; the executor
    # reconciled it instead of running it again: every uncertain-side-effect run is accepted
    # (no duplicated effect) and done, and each write ran once.
    notes = [r for r in record["runs"] if r["task"] == "uncertain-side-effect"]
    assert len(notes) == 4 and all(r["accepted"] and r["success"] for r in notes), notes
    assert rows(db, "SELECT remaining FROM tool_faults") == [(0,)]  # the timeout happened
    assert invocations(db, "add_note") == 4 == rows(db, "SELECT count(*) FROM notes")[0][0]
    by_task = {(r["task"], r["bundle"]): r for r in record["runs"] if r["repeat"] == 1}
    assert by_task[("one-tool", RESPONSES.bundle_id)]["success"]
    # The interrupted stream was resumed by the gateway and completed.
    assert by_task[("interrupted-stream", RESPONSES.bundle_id)]["success"]
    # Compared on accepted runs only, the rejected count beside every figure.
    (comparison,) = record["comparisons"]
    for figure in comparison["figures"]:
        assert (figure["rejected_a"], figure["rejected_b"]) == (0, 2)
    success = next(f for f in comparison["figures"] if f["name"] == "task_success")
    shared = {t.id for t in CORPUS.tasks
              if {"openai-responses", "openai-chat"} <= t.simulator.keys()}
    assert success["tasks"] == len(shared - {"multi-tool", "interrupted-stream"})
    chat_success = next(f for f in chat["figures"] if f["name"] == "task_success")
    assert chat_success["n"] == chat["runs"] - 2 and chat_success["rejected"] == 2

    # The result is on the topic: show and compare read it back.
    assert main(["eval", "show", record["result_id"][:24], "--json", *_kafka(settings)]) == 0
    assert json.loads(capsys.readouterr().out) == record
    assert main(["eval", "compare", f"{record['result_id']}:{RESPONSES.bundle_id}",
                 f"{record['result_id']}:{CHAT.bundle_id}", "--json", *_kafka(settings)]) == 0
    assert json.loads(capsys.readouterr().out)["figures"] == comparison["figures"]

    # Frozen: the same runs re-scored from the topics, no provider call, the same verdicts.
    requests_before = len(sim.simulator.requests())
    assert main(["eval", "run", "--corpus", "example", *_bundle_files(tmp_path),
                 "--from-topic", "--no-publish", "--json",
                 "--prices", str(EXAMPLE_CORPUS / "prices.example.yaml"),
                 *_kafka(settings)]) == 0
    frozen = json.loads(capsys.readouterr().out)
    assert frozen["mode"] == "frozen"
    assert sorted(frozen["runs"], key=lambda r: r["run_id"]) == sorted(
        record["runs"], key=lambda r: r["run_id"])
    assert len(sim.simulator.requests()) == requests_before

