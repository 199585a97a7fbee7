"""``modelevents feed`` of a hostile recording publishes nothing (issue #11 §3), on a real broker.

Each bomb is a cassette whose FIRST model call is an ordinary stream and whose second is the
bomb: a feed that published as it read would have sent the first call's frames before meeting
the second. The command runs as a user runs it, in a subprocess whose address space is capped
(tests/adapters/bombs.py), and must end with one error line, exit status 2, and an empty frames
topic; the same cassette without its bomb is fed in full, so the emptiness is not the test's.
"""

from __future__ import annotations

import asyncio
import gzip
from pathlib import Path

import pytest

from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from tests.adapters.bombs import (
    gzip_of_zeros,
    one_call_cassette,
    run_limited,
    sse_chunks,
    truncated_gzip,
    yaml_alias_bomb,
)
from tests.integration.conftest import broker_fixture
from tests.integration.pipeline import kafka_args

pytestmark = pytest.mark.kafka

kafka_broker = broker_fixture(base_port=19700, scope="module")

FEED = ["-m", "modelevents.services.cli", "feed"]



def _frames_on_topic(settings: PipelineSettings) -> int:
    async def count() -> int:
        return len([r async for r in clients.read_records(settings, "frames", timeout=3.0)])
    return asyncio.run(asyncio.wait_for(count(), 120))


def _ordinary_then(second: bytes) -> bytes:
    """A cassette of an ordinary gzip stream followed by the interactions of ``second``."""
    first = one_call_cassette(_gzip(sse_chunks()))
    return first + second.split(b"interactions:\n", 1)[1]


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _with_alias_bomb() -> bytes:
    # The anchors go before `interactions:`; the bomb is the second interaction's parsed body.
    anchors, calls = yaml_alias_bomb().split(b"interactions:\n", 1)
    return anchors + _ordinary_then(b"interactions:\n" + calls)


BOMBS = {
    "gzip-of-zeros": (lambda: _ordinary_then(one_call_cassette(gzip_of_zeros())), [],
                      "raise it with --max-ratio"),
    "yaml-alias-bomb": (_with_alias_bomb, [], "raise it with --max-yaml-alias-nodes"),
    "truncated-gzip": (lambda: _ordinary_then(one_call_cassette(truncated_gzip())), [],
                       "interaction 2: the gzip response body is cut short"),
    "endless-sse-event": (lambda: _ordinary_then(one_call_cassette(
        _gzip(b"data: " + b"x" * (3 << 20)))),
        ["--max-event-bytes", "2M", "--max-ratio", "100000"],
        "raise it with --max-event-bytes"),
}


@pytest.mark.parametrize("name", BOMBS)
def test_a_hostile_cassette_publishes_nothing(pipeline_settings, tmp_path: Path, name) -> None:
    build, options, message = BOMBS[name]
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(build())
    done = run_limited([*FEED, str(path), *options, *kafka_args(pipeline_settings)])
    assert done.returncode == 2, done.stderr.decode()[-2000:]
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("modelevents: error: "), lines[-20:]
    assert str(path) in lines[0] and message in lines[0]
    assert _frames_on_topic(pipeline_settings) == 0


def test_the_same_cassette_without_its_bomb_is_fed(pipeline_settings, tmp_path: Path) -> None:
    path = tmp_path / "ordinary.yaml"
    path.write_bytes(_ordinary_then(one_call_cassette(_gzip(sse_chunks(5)))))
    done = run_limited([*FEED, str(path), *kafka_args(pipeline_settings)])
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    # 21 + 6 frames of the two calls, an end-of-stream marker after each, one end-of-run.
    assert _frames_on_topic(pipeline_settings) == 21 + 6 + 3
