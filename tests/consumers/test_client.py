"""The consumer API's parts that need no broker: rebuilding elided values, start positions and the
errors a wrong argument gives (consumers/client.py; the broker tests are
tests/integration/consumers/test_consumer_api.py)."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

import pytest

from modelevents.adapters.registry import normalize_bytes
from modelevents.consumers import ElidedRebuilder, at_offset, at_time, rebuild_elided, subscribe
from modelevents.schemas.errors import ConfigError
from modelevents.schemas.events import ModelEvent
from modelevents.services.kafka.settings import PipelineSettings
from tests.integration.processor.test_big_runs import _text, chat_run

SETTINGS = PipelineSettings(bootstrap_servers="127.0.0.1:1", topic_prefix="unit.")


def big_chat_run() -> tuple[list[ModelEvent], str]:
    """A Chat Completions run of 300,000 characters in 1,000-character deltas: its text.done is
    elided (more than an adapter holds)."""
    deltas = _text(300_000, "rebuild")
    return normalize_bytes(chat_run(deltas, "chatcmpl-rebuild")).events, "".join(deltas)


def test_rebuild_elided_gives_the_whole_text_from_the_deltas() -> None:
    events, text = big_chat_run()
    done = next(e for e in events if e.kind == "text.done")
    assert done.elided is not None and done.payload.text == ""
    assert rebuild_elided(done, events) == text
    with pytest.raises(ValueError, match="the value had"):
        rebuild_elided(done, [e for e in events if e.seq != 5])


def test_the_rebuilder_fills_the_done_event_and_says_when_it_cannot(caplog) -> None:
    events, text = big_chat_run()
    rebuilder = ElidedRebuilder()
    out = [rebuilder.feed(e) for e in events]
    done = next(e for e in out if e.kind == "text.done")
    assert done.payload.text == text and done.elided is not None and rebuilder.rebuilt == 1
    assert [e for e in out if e.kind != "text.done"] == [e for e in events if e.kind != "text.done"]
    partial = ElidedRebuilder()
    with caplog.at_level(logging.WARNING):
        late = [partial.feed(e) for e in events[10:]]  # started after the first deltas
    assert next(e for e in late if e.kind == "text.done").payload.text == ""
    assert partial.unrebuilt == 1 and "could not be rebuilt" in caplog.text


def test_start_positions() -> None:
    assert at_offset(3).offset == 3 and at_offset({0: 5}).offset == {0: 5}
    with pytest.raises(ConfigError):
        at_offset(-1)
    naive = dt.datetime(2026, 12, 1, 12, 0, 0)
    assert at_time(naive).time_ms == at_time(naive.replace(tzinfo=dt.UTC)).time_ms \
        == 1_796_126_400_000
    assert at_time(1234).time_ms == 1234


@pytest.mark.parametrize("kwargs, message", [
    ({"kinds": {"text"}}, "unknown event kinds"),
    ({"start": "beginning"}, "start is 'earliest', 'latest'"),
    ({"on_undecodable": "ignore"}, "on_undecodable is 'skip' or 'raise'"),
    ({"topics": "dlq"}, "reads the events and runs topics"),
    ({"topics": []}, "needs a topic"),
])
def test_a_wrong_argument_is_a_config_error_before_anything_connects(kwargs, message) -> None:
    with pytest.raises(ConfigError, match=message):
        subscribe(settings=SETTINGS, **kwargs)


def test_the_sync_iterator_inside_an_event_loop_says_to_use_async_for() -> None:
    async def inside() -> None:
        with pytest.raises(ConfigError, match="async for"):
            next(iter(subscribe(settings=SETTINGS)))
    asyncio.run(inside())
