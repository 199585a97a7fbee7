"""The frame tee's memory bound (services/gateway/spool/journal.py): offer() never waits and
never raises, and what does not fit ``queue_bytes`` is dropped, counted and logged with its run.
Kafka and the journal's disk are in tests/integration/gateway/test_journal.py."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from modelevents.schemas.frames import ProviderFrame
from modelevents.services.gateway.config import JournalConfig
from modelevents.services.gateway.metrics import GatewayMetrics
from modelevents.services.gateway.spool.journal import JournalTee


def frame(index: int, size: int) -> ProviderFrame:
    return ProviderFrame(frame_id=f"s:{index}", run_key="run-big", provider="openai",
                         api="openai-responses", transport="sse", received_at=0,
                         content_type="text/event-stream", body=b"x" * size, tenant="acme",
                         stream_id="s", index=index)


async def never_called(*_: object) -> bool:
    raise AssertionError("the writer was not started: nothing goes to Kafka here")


def test_frames_beyond_the_memory_bound_are_dropped_counted_and_logged(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    metrics = GatewayMetrics()
    tee = JournalTee(JournalConfig(directory=tmp_path, queue_bytes=4096), tmp_path,
                     never_called, never_called, metrics)
    with caplog.at_level(logging.ERROR, logger="modelevents.gateway.journal"):
        tee.offer([frame(i, 1000) for i in range(6)], "acme")  # ~1.25 KB each in the queue
    dropped = metrics.registry.get_sample_value("modelevents_gateway_frames_dropped_total",
                                                {"reason": "queue_full"})
    assert dropped == 3
    assert "3 teed frames of run run-big (tenant acme) dropped" in caplog.text
    assert tee.accepting("acme"), "a full memory queue alone does not refuse calls"


def test_offer_after_stop_is_counted_not_raised(tmp_path: Path) -> None:
    metrics = GatewayMetrics()
    tee = JournalTee(JournalConfig(directory=tmp_path), tmp_path, never_called, never_called,
                     metrics)
    asyncio.run(tee.stop())
    tee.offer([frame(0, 10)], "acme")
    assert metrics.registry.get_sample_value("modelevents_gateway_frames_dropped_total",
                                             {"reason": "stopped"}) == 1
