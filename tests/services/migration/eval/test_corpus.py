"""The eval corpus loader (services/migration/eval/corpus.py): the shipped example covers every
task class and names simulator scenarios that exist; a broken corpus is refused with every
problem named by file and field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from modelevents.schemas.errors import ConfigError
from modelevents.services.migration.eval.corpus import (
    EXAMPLE_CORPUS,
    TASK_CLASSES,
    load_corpus,
)
from modelevents.services.simulator.scenarios import ScenarioRegistry


def test_the_example_corpus_covers_every_task_class():
    corpus = load_corpus("example")
    assert corpus.ref == "example@1"
    assert corpus.classes() == set(TASK_CLASSES)


def test_every_scenario_the_example_names_is_served_by_the_simulator():
    registry = ScenarioRegistry.default([EXAMPLE_CORPUS / "recordings"], with_corpus=False)
    for task in load_corpus("example").tasks:
        assert task.simulator, task.id
        for api, name in task.simulator.items():
            scenario = registry.resolve(name, api)
            recording = registry.recording(scenario)
            assert recording.api == api, (task.id, name)


def test_an_included_text_becomes_the_part_text():
    task = load_corpus("example").task("long-context")
    text = task.transcript[0].parts[0].text  # type: ignore[union-attr]
    assert len(text) > 50_000 and "held in Paris" in text


def test_a_multimodal_task_carries_its_image():
    parts = load_corpus("example").task("multimodal-input").transcript[0].parts
    assert [p.type for p in parts] == ["text", "image"]


def copy_example(tmp_path: Path) -> Path:
    """The example corpus copied under ``tmp_path`` (to be broken by a test)."""
    root = tmp_path / "corpus"
    shutil.copytree(EXAMPLE_CORPUS, root)
    return root


def test_every_problem_is_named_by_file_and_field(tmp_path: Path):
    root = copy_example(tmp_path)
    (root / "tasks" / "refusal.yaml").write_text(
        "id: refusal\nclass: refusl\ntranscript: []\nexpect: {checker: refusal}\n")
    (root / "tasks" / "one-tool.yaml").write_text(
        "id: other\nclass: one_tool\ntranscript: [{role: user, parts: [{type: text, text: x}]}]\n"
        "expect: {checker: tool_calls}\nsimulator: {openai-nope: x}\n")
    with pytest.raises(ConfigError) as caught:
        load_corpus(root)
    message = str(caught.value)
    assert "refusal.yaml: class: Value error, unknown task class 'refusl'" in message
    assert "refusal.yaml: transcript: List should have at least 1 item" in message
    assert "one-tool.yaml: simulator: Value error, unknown API ['openai-nope']" in message
    # The listed task whose file failed is reported too, and nothing is half-loaded.
    assert "tasks lists" in message


def test_a_directory_without_corpus_yaml_says_what_a_corpus_is(tmp_path: Path):
    with pytest.raises(ConfigError, match="has no corpus.yaml"):
        load_corpus(tmp_path)


def test_a_task_without_a_scenario_for_an_api_says_which_it_has():
    task = load_corpus("example").task("refusal")
    with pytest.raises(ConfigError, match="names no simulator scenario for anthropic-messages"):
        task.scenario("anthropic-messages")
