"""`modelevents eval parity` against a real broker's frames topic.

The frames of every project fixture (cut as the feeder cuts them, end-of-input markers
included) and the events the installed adapters publish for them go on fresh topics through the
project's own producer; then the command reads them as a user runs it. This module's own broker
(base port 19980).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

import pytest

from modelevents.schemas import codec
from modelevents.services.cli import main as cli_main
from modelevents.services.kafka.clients import start_producer, topic_name
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.run_logic.renormalize import renormalize
from tests.integration.conftest import broker_fixture
from tests.services.migration.parity.recorded import (
    BEFORE_CHAT_FIXES,
    CHAT_FIX_RUNS,
    CHAT_FIXES,
    adapters_copy,
    fixture_runs,
    json_lines,
)

pytestmark = pytest.mark.kafka

kafka_broker = broker_fixture(base_port=19980, scope="module")

RUNS = fixture_runs()


def produce(settings: PipelineSettings, topic: str,
            records: Iterable[tuple[str, bytes]]) -> None:
    async def go() -> None:
        producer = await start_producer(settings)
        try:
            futures = [await producer.send(topic_name(settings, topic), key=key.encode(),
                                           value=value) for key, value in records]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(go())


def publish_all(settings: PipelineSettings) -> None:
    produce(settings, "frames", [(f.run_key, codec.encode(f))
                                 for frames in RUNS.values() for f in frames])
    produce(settings, "events", [(run_id, codec.encode(e)) for run_id, frames in RUNS.items()
                                 for e in renormalize(frames, run_id).events])


def eval_parity(settings: PipelineSettings, *args: str) -> int:
    return cli_main(["eval", "parity", *args, "--bootstrap-servers",
                     settings.bootstrap_servers, "--prefix", settings.topic_prefix])


def test_eval_parity_reads_the_frames_topic(pipeline_settings: PipelineSettings, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    publish_all(pipeline_settings)

    # A candidate before a known fix: exactly the runs that show the fix differ.
    assert eval_parity(pipeline_settings, "--adapters", BEFORE_CHAT_FIXES, "--json") == 1
    lines = json_lines(capsys.readouterr().out)
    assert {line["run_id"] for line in lines if "run_id" in line} == CHAT_FIX_RUNS
    summary = lines[-1]["summary"]
    assert (summary["runs"], summary["differs"]) == (len(RUNS), len(CHAT_FIXES))
    chat = next(line for line in lines if line.get("api") == "openai-chat")
    assert chat["runs_differing"] == len(CHAT_FIXES)

    # Old against old: the same code loaded from a copy of the checkout differs in nothing.
    assert eval_parity(pipeline_settings, "--adapters", str(adapters_copy(tmp_path)),
                       "--json") == 0
    summary = json_lines(capsys.readouterr().out)[-1]["summary"]
    assert (summary["equal"], summary["added"], summary["removed"], summary["changed"]) == (
        len(RUNS), 0, 0, 0)

    # Against what is published on the events topic.
    assert eval_parity(pipeline_settings, "--adapters", BEFORE_CHAT_FIXES, "--against",
                       "published", "--json") == 1
    lines = json_lines(capsys.readouterr().out)
    assert {line["run_id"] for line in lines if "run_id" in line} == CHAT_FIX_RUNS
    assert eval_parity(pipeline_settings, "--adapters", "installed", "--against",
                       "published") == 0
    capsys.readouterr()


def test_an_empty_frames_topic_is_exit_2(pipeline_settings: PipelineSettings,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert eval_parity(pipeline_settings, "--adapters", "installed") == 2
    assert "no frames in" in capsys.readouterr().err
