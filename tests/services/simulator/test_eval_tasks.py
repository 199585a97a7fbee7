"""The corpus-aware simulator (``modelevents simulator --corpus``) over real HTTP: a request whose
conversation is an eval task is answered with the scenario the task names for the request's API,
whatever model it names and however the client spells the user text; a task that names no
scenario for the API gets a 4xx in the provider's shape naming the task and the API; any other
request is answered as before (``sim:`` models, the endpoint's default)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelevents.schemas.errors import ConfigError
from modelevents.schemas.transcript import TextPart
from modelevents.services.migration.eval.corpus import Task
from modelevents.services.simulator.app import Simulator
from modelevents.services.simulator.eval_tasks import TaskIndex, conversation_key
from modelevents.services.simulator.scenarios import ScenarioRegistry
from modelevents.services.simulator.server import SimulatorHandle, run_in_thread
from tests.paths import REPO_ROOT
from tests.services.migration.eval.test_corpus import copy_example

TASKS = TaskIndex.load("example")
PATHS = {"openai-responses": "/v1/responses", "openai-chat": "/v1/chat/completions",
         "anthropic-messages": "/v1/messages",
         "gemini-generate": "/v1beta/models/gemini-2.5-flash:generateContent",
         "gemini-interactions": "/v1beta/interactions"}


@pytest.fixture(scope="module")
def sim() -> Iterator[SimulatorHandle]:
    assert TASKS.recordings is not None
    registry = ScenarioRegistry.default([TASKS.recordings], with_corpus=False)
    handle = run_in_thread(Simulator(registry, tasks=TASKS).app)
    yield handle
    handle.stop()


def _user_text(task: Task) -> list[str]:
    return [p.text for m in task.transcript if m.role == "user" for p in m.parts
            if isinstance(p, TextPart)]


def _body(api: str, texts: list[str]) -> dict[str, Any]:
    """A request as a client writes it by hand — not as our renderers do: one string where it
    can be, the parts re-wrapped, a system text beside, a real model name."""
    joined = "\n\n".join(texts)
    if api == "openai-responses":
        return {"model": "gpt-5-mini", "input": joined, "instructions": "Be brief."}
    if api == "openai-chat":
        return {"model": "gpt-4o-mini", "messages": [
            {"role": "system", "content": "Be brief."}, {"role": "user", "content": joined}]}
    if api == "anthropic-messages":
        return {"model": "claude-sonnet-4-5", "max_tokens": 256, "system": "Be brief.",
                "messages": [{"role": "user", "content": joined}]}
    if api == "gemini-generate":
        return {"contents": [{"role": "user", "parts": [{"text": t} for t in texts]}],
                "systemInstruction": {"parts": [{"text": "Be brief."}]}}
    return {"model": "gemini-2.5-flash", "input": joined}


@pytest.mark.parametrize("task", TASKS.corpus.tasks, ids=lambda t: t.id)
def test_a_task_is_answered_with_its_scenario_for_the_api_whatever_the_model(
        sim: SimulatorHandle, task: Task):
    for api, scenario in task.simulator.items():
        sim.simulator.reset()
        # Not streamed: what is answered (a recording folded into one object, or why it
        # cannot be) is the scenario's business; which scenario answers is the point here.
        response = httpx.post(sim.base_url + PATHS[api], json=_body(api, _user_text(task)),
                              timeout=60)
        assert response.status_code not in (400, 404), response.text
        (received,) = sim.simulator.requests(api)
        assert (received["task"], received["scenario"]) == (task.id, scenario), api


def test_a_task_without_a_scenario_for_the_api_gets_a_provider_shaped_400(
        sim: SimulatorHandle):
    task = TASKS.corpus.task("one-tool")
    assert "anthropic-messages" not in task.simulator
    response = httpx.post(sim.base_url + PATHS["anthropic-messages"],
                          json=_body("anthropic-messages", _user_text(task)), timeout=60)
    assert response.status_code == 400
    error = response.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert "'one-tool'" in error["error"]["message"]
    assert "anthropic-messages" in error["error"]["message"]


def test_a_request_of_no_task_is_answered_as_before(sim: SimulatorHandle):
    sim.simulator.reset()
    other = _body("openai-chat", ["What is the capital of Italy?"])
    assert httpx.post(sim.base_url + PATHS["openai-chat"], json=other,
                      timeout=60).status_code == 200
    named = {**other, "model": "sim:openai-chat/refusal"}
    assert httpx.post(sim.base_url + PATHS["openai-chat"], json=named,
                      timeout=60).status_code == 200
    default, by_model = sim.simulator.requests("openai-chat")
    assert "task" not in default and "task" not in by_model
    assert default["scenario"] == sim.simulator.registry.defaults["openai-chat"]
    assert by_model["scenario"] == "openai-chat/refusal"


def test_the_scenario_header_still_wins_over_the_task(sim: SimulatorHandle):
    sim.simulator.reset()
    task = TASKS.corpus.task("simple-generation")
    httpx.post(sim.base_url + PATHS["openai-chat"], json=_body("openai-chat", _user_text(task)),
               headers={"x-simulator-scenario": "openai-chat/refusal"}, timeout=60)
    (received,) = sim.simulator.requests("openai-chat")
    assert received["scenario"] == "openai-chat/refusal" and "task" not in received


def test_tool_results_and_images_are_not_part_of_the_key():
    text = [{"type": "text", "text": "What is the weather in Paris right now?"}]
    plain = {"messages": [{"role": "user", "content": text}]}
    more = {"messages": [
        {"role": "user", "content": [*text, {"type": "image", "source": {"type": "base64"}}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "w"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": [{"type": "text", "text": "14 C"}]}]}]}
    assert conversation_key("anthropic-messages", plain) == conversation_key(
        "anthropic-messages", more) is not None
    assert conversation_key("anthropic-messages", {"messages": []}) is None


def test_two_tasks_with_the_same_user_text_are_refused(tmp_path: Path):
    root = copy_example(tmp_path)
    source = (root / "tasks" / "one-tool.yaml").read_text()
    (root / "tasks" / "refusal.yaml").write_text(
        source.replace("id: one-tool", "id: refusal").replace("class: one_tool",
                                                              "class: refusal"))
    with pytest.raises(ConfigError, match="one-tool and refusal|refusal and one-tool"):
        TaskIndex.load(root)


def test_a_corpus_naming_a_scenario_that_does_not_exist_is_refused(tmp_path: Path):
    root = copy_example(tmp_path)
    path = root / "tasks" / "refusal.yaml"
    path.write_text(path.read_text().replace("openai-chat/refusal", "openai-chat/no-such"))
    with pytest.raises(ConfigError, match="openai-chat/no-such"):
        Simulator(ScenarioRegistry.default(with_corpus=False), validate=False,
                  tasks=TaskIndex.load(root))


def test_the_command_serves_the_corpus_and_its_recordings():
    """``modelevents simulator --corpus example`` as a user starts it: a task on an API whose
    scenario is one of the corpus's own recordings."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = "import sys; from modelevents.services.cli import main; sys.exit(main())"
    proc = subprocess.Popen([sys.executable, "-c", code, "simulator", "--port", str(port),
                             "--no-corpus", "--corpus", "example"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    task = TASKS.corpus.task("schema-extraction")
    try:
        lines = [proc.stdout.readline() for _ in range(6)]
        assert any("eval corpus   example@1" in line for line in lines), lines
        base, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 30
        while True:
            try:
                answer = httpx.post(base + PATHS["openai-chat"], timeout=60,
                                    json=_body("openai-chat", _user_text(task)))
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, proc.stderr.read()
                time.sleep(0.1)
        assert answer.status_code == 200, answer.text
        (received,) = httpx.get(base + "/_simulator/requests", timeout=30).json()
        assert received["task"] == task.id
        assert received["scenario"] == task.simulator["openai-chat"] \
            == "openai-chat/eval-structured-city"
    finally:
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(10)


def test_the_command_refuses_a_corpus_that_does_not_load(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]):
    from modelevents.services.cli.main import main
    assert main(["simulator", "--no-corpus", "--corpus", str(tmp_path)]) == 2
    assert "is not an eval corpus" in capsys.readouterr().err
