"""Nothing teed is lost when Kafka is away (issue #29): the gateway's frame tee on the real
broker, which these tests stop and start again (the module has a broker of its own).

Frames are offered as the proxy offers them, to ``Gateway.tee`` of the app's lifespan (in this
process), or of a gateway process killed while it spools; every frame must then be on
``frames`` at least once, the first copies of a run's frames in the order they were offered.
"""

from __future__ import annotations

import asyncio
import logging
import os
import selectors
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelevents.schemas import codec
from modelevents.schemas.frames import ProviderFrame
from modelevents.services.gateway.app import create_app
from modelevents.services.gateway.config import GatewayConfig, JournalConfig
from modelevents.services.gateway.spool.journal import journal_directory
from modelevents.services.gateway.spool.segments import SegmentLog
from modelevents.services.gateway.upstreams import ProxyConfig
from modelevents.services.kafka.clients import read_records
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local import kafka_broker as local_kafka
from tests.helpers import free_port
from tests.integration.conftest import restartable_broker
from tests.integration.gateway.tee_process import TENANT, sample, stream
from tests.integration.pipeline import run, start_gateway_process

pytestmark = pytest.mark.kafka

PATIENCE_S = float(os.environ.get("JPAT", "90"))  # a broker's restart and the journal's drain, on a loaded machine
SPOOLED = "modelevents_gateway_frames_spooled_total"
DRAINED = "modelevents_gateway_frames_drained_total"
HELD = "modelevents_gateway_journal_frames"


broker_settings, kafka_broker = restartable_broker(base_port=19200)


def gateway_config(settings: PipelineSettings, tmp_path: Path, fail_closed: tuple[str, ...] = (),
                   **journal: Any) -> GatewayConfig:
    return GatewayConfig(kafka=settings, instance_id=f"gw-{tmp_path.name}"[:60],
                         journal=JournalConfig(directory=tmp_path / "journal", deadline_s=0.5,
                                               **journal),
                         proxy=ProxyConfig(fail_closed=list(fail_closed)))


async def until(holds: Callable[[], bool], what: str, within: float = PATIENCE_S) -> None:
    deadline = time.monotonic() + within
    while not holds():
        assert time.monotonic() < deadline, f"not within {within:g} s: {what}"
        await asyncio.sleep(0.05)


async def frames_on_kafka(settings: PipelineSettings, expected: int) -> list[ProviderFrame]:
    """The frames on ``frames``, in offset order per partition, once ``expected`` distinct
    frame ids were read (or after an idle timeout)."""
    seen: set[str] = set()
    read: list[ProviderFrame] = []

    def enough(frame: Any) -> bool:
        seen.add(frame.frame_id)
        return len(seen) >= expected

    async for record in read_records(settings, "frames", timeout=PATIENCE_S, until=enough):
        assert record is not None and record.error is None, record
        read.append(record.value)
    return read


def assert_all_in_order(read: list[ProviderFrame], offered: dict[str, list[ProviderFrame]]
                        ) -> None:
    """Every offered frame is on Kafka at least once, and the first copies of each run's
    frames are in the order they were offered (the worker's dedupe drops later copies)."""
    first: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    for frame in read:
        if frame.frame_id not in seen:
            seen.add(frame.frame_id)
            first[frame.run_key].append(frame.frame_id)
    for run_id, frames in offered.items():
        ids = [frame.frame_id for frame in frames]
        missing = set(ids) - seen
        assert not missing, f"run {run_id}: {len(missing)} frames lost: {sorted(missing)[:5]}"
        assert first[run_id] == ids, f"run {run_id}: out of order on Kafka"


def written(gateway: Any) -> float:
    return gateway.metrics.registry.get_sample_value(
        "modelevents_gateway_frames_written_total",
        {"provider": "openai", "api": "openai-responses", "transport": "sse"}) or 0.0


def dropped(gateway: Any, reason: str | None = None) -> float:
    """Frames counted as dropped (for ``reason``, or for any)."""
    return sum(sample.value for metric in gateway.metrics.registry.collect()
               for sample in metric.samples
               if sample.name == "modelevents_gateway_frames_dropped_total"
               and reason in (None, sample.labels["reason"]))


async def with_gateway(config: GatewayConfig, scenario: Callable[[Any], Awaitable[None]]) -> None:
    app = create_app(config)
    async with app.router.lifespan_context(app):
        await scenario(app.state.gateway)


def test_kafka_stopped_mid_stream_loses_nothing_and_fail_closed_tenants_wait_for_it(
        broker_settings, settings: PipelineSettings, tmp_path: Path) -> None:
    runs = [f"run-{n}" for n in range(3)]
    offered: dict[str, list[ProviderFrame]] = {run_id: [] for run_id in runs}
    config = gateway_config(settings, tmp_path, fail_closed=("strict",))

    def offer(gateway: Any, start: int, count: int) -> None:
        for index in range(start, start + count):
            for run_id in runs:
                frames = stream(run_id, index, 1)
                gateway.tee.offer(frames, TENANT)
                offered[run_id] += frames

    async def scenario(gateway: Any) -> None:
        tee = gateway.tee
        assert tee.accepting("strict") and tee.accepting(TENANT)
        offer(gateway, 0, 40)
        await until(lambda: written(gateway) == 120, "the first frames written to Kafka")
        await asyncio.to_thread(local_kafka.stop, broker_settings)
        # Streams go on while Kafka is away: each offer returns at once, the frames spool.
        returned = 0
        for index in range(40, 100):
            offer(gateway, index, 1)
            returned += 1
            await asyncio.sleep(0.01)
        await until(lambda: sample(gateway, SPOOLED) > 0, "frames spooled while Kafka is away")
        await until(lambda: not tee.accepting("strict"),
                    "a fail_closed tenant refused while Kafka is away")
        assert tee.accepting(TENANT), "a tenant that is not fail_closed is served and spooled"
        assert not local_kafka.status(broker_settings).running
        assert returned == 60, "every offer returned before the broker came back"

        await asyncio.to_thread(local_kafka.start, broker_settings)
        offer(gateway, 100, 40)  # behind the journal's frames if it still holds any
        # Each frame written at least once (a batch that timed out may be written twice).
        await until(lambda: written(gateway) >= 3 * 140 and sample(gateway, HELD) == 0,
                    "every frame written, the journal drained")
        await until(lambda: tee.accepting("strict"), "the fail_closed tenant served again")
        assert sample(gateway, DRAINED) == sample(gateway, SPOOLED) > 0
        assert dropped(gateway) == 0

    run(with_gateway(config, scenario))
    read = run(frames_on_kafka(settings, sum(len(f) for f in offered.values())))
    assert_all_in_order(read, offered)
    assert not list(journal_directory(config).glob("*.seg")), "drained segments deleted"


def test_a_journal_from_before_goes_to_kafka_ahead_of_new_frames(
        settings: PipelineSettings, tmp_path: Path) -> None:
    config = gateway_config(settings, tmp_path)
    # What a gateway killed during an outage leaves: its journal, written by the same code.
    left = SegmentLog.open(journal_directory(config), config.journal.max_bytes)
    before = stream("restarted", 0, 300)
    left.append([codec.encode(frame) for frame in before])
    left.close()
    after = stream("restarted", 300, 50)

    async def scenario(gateway: Any) -> None:
        gateway.tee.offer(after, TENANT)  # at once: the journal has not been drained yet
        await until(lambda: not gateway.tee.spooling and sample(gateway, HELD) == 0,
                    "the journal drained")
        assert sample(gateway, DRAINED) >= 300

    run(with_gateway(config, scenario))
    read = run(frames_on_kafka(settings, 350))
    assert_all_in_order(read, {"restarted": before + after})


def test_a_gateway_killed_while_spooling_restarts_and_drains_its_journal(
        broker_settings, settings: PipelineSettings, tmp_path: Path) -> None:
    directory, instance, runs, per_run = tmp_path / "journal", "gw-killed", 2, 150
    log_path = tmp_path / "spooling.err"
    with log_path.open("wb") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.integration.gateway.tee_process",
             settings.bootstrap_servers, settings.topic_prefix, str(settings.partitions),
             str(directory), instance, str(runs), str(per_run)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, start_new_session=True)
    try:
        assert read_line(child, log_path) == "ready"
        local_kafka.stop(broker_settings)
        try:
            assert child.stdin is not None
            child.stdin.write(b"go\n")
            child.stdin.flush()
            assert read_line(child, log_path) == "spooled"
            os.killpg(child.pid, signal.SIGKILL)  # no shutdown: what it journaled is all
            child.wait(timeout=30)
        finally:
            local_kafka.start(broker_settings)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    journal = directory / instance / settings.topic("frames")
    assert list(journal.glob("*.seg")), "the killed gateway left its journal"

    config_path = tmp_path / "gateway.yaml"
    config_path.write_text(yaml.safe_dump({
        "instance_id": instance, "journal": {"directory": str(directory), "deadline_s": 0.5}}))
    gateway = start_gateway_process(settings, free_port(), tmp_path / "gateway.err",
                                    config=config_path)
    try:
        offered = {f"killed-{n}": stream(f"killed-{n}", 0, per_run) for n in range(runs)}
        read = run(frames_on_kafka(settings, runs * per_run))
        assert_all_in_order(read, offered)
        deadline = time.monotonic() + PATIENCE_S
        while list(journal.glob("*.seg")):
            assert time.monotonic() < deadline, "the drained journal's segments stay"
            time.sleep(0.1)
    finally:
        os.killpg(gateway.pid, signal.SIGKILL)


def test_a_full_journal_applies_its_policy_and_counts_every_drop(
        broker_settings, settings: PipelineSettings, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    config = gateway_config(settings, tmp_path, max_bytes=16 * 1024, on_full="fail_closed")
    offered = stream("overflowing", 0, 200)  # ~400 bytes each: about 40 fit
    counts: dict[str, float] = {}

    async def scenario(gateway: Any) -> None:
        tee = gateway.tee
        await asyncio.to_thread(local_kafka.stop, broker_settings)
        try:
            for frame in offered:
                tee.offer([frame], TENANT)
                await asyncio.sleep(0.002)
            await until(lambda: sample(gateway, SPOOLED) + dropped(gateway) == 200,
                        "every frame spooled or dropped")
            counts["spooled"] = sample(gateway, SPOOLED)
            counts["dropped"] = dropped(gateway, "journal_full")
            assert sample(gateway, "modelevents_gateway_journal_bytes") <= 16 * 1024
            assert not tee.accepting(TENANT), "on_full: fail_closed refuses new calls"
        finally:
            await asyncio.to_thread(local_kafka.start, broker_settings)
        await until(lambda: not tee.spooling, "the journal drained")
        assert tee.accepting(TENANT), "room again: calls served again"

    with caplog.at_level(logging.ERROR, logger="modelevents.gateway.journal"):
        run(with_gateway(config, scenario))
    assert 0 < counts["spooled"] < 200 and counts["dropped"] == 200 - counts["spooled"]
    logged = [r.getMessage() for r in caplog.records if "dropped" in r.getMessage()]
    assert logged and all("run overflowing" in line and "journal is full" in line
                          for line in logged), logged
    assert sum(int(line.split()[0]) for line in logged) == counts["dropped"]
    # drop_newest: what is on Kafka is the beginning of the stream, the rest was counted.
    read = run(frames_on_kafka(settings, int(counts["spooled"])))
    kept = offered[:int(counts["spooled"])]
    assert_all_in_order(read, {"overflowing": kept})
    assert {frame.frame_id for frame in read} == {frame.frame_id for frame in kept}


def read_line(process: subprocess.Popen, log_path: Path, within: float = PATIENCE_S) -> str:
    """The next line the process prints (it must print one within ``within`` seconds)."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(within):
            raise AssertionError("no line from the gateway process:\n"
                                 + log_path.read_text(errors="replace")[-3000:])
    line = process.stdout.readline().decode().strip()
    assert line, "the gateway process ended:\n" + log_path.read_text(errors="replace")[-3000:]
    return line
