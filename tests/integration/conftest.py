"""Fixtures for tests against a real Kafka broker (the project's own, services/local/kafka_broker.py).

    kafka_broker       session: starts a broker for this pytest(-xdist) worker on
                       19400 + 10 * worker index (controller on port + 1), state in a temp dir;
                       yields its bootstrap string; stops it at the end of the session.
    pipeline_settings  function: PipelineSettings on that broker with a fresh topic prefix and
                       Faust app id, every topic of services/kafka/settings.TOPICS created
                       (the pipeline's, the gateway's run-owners, run-inputs and calls, the
                       executor's receipts); they are deleted afterwards.
    make_settings      function: a factory for more such settings in one test
                       (``make_settings(partitions=2, create_topics=False)``).
    settings           function: such settings with the pipeline tests' partition count
                       (``pipeline.PARTITIONS``).
    start_worker       function: ``start_worker(name, wait=True, extra=())`` starts a
                       ``modelevents worker`` subprocess on ``settings`` (``pipeline.Worker``),
                       by default waiting until it is ready; ``start_worker.logs(name)`` gives
                       the log lines of the workers of that name; every worker is killed at the
                       end of the test.

A test module that wants a broker of its own (because it stops or restarts it, or to keep its
load apart) overrides ``kafka_broker`` with :func:`broker_fixture`; ``pipeline_settings`` then
uses that broker::

    kafka_broker = broker_fixture(base_port=19300, scope="module")

A module that stops and restarts its broker takes :func:`restartable_broker` instead.
With KAFKA_BOOTSTRAP_SERVERS set, every fixture uses that cluster and starts nothing.
Environment: MODELEVENTS_TEST_KAFKA_HEAP (default 256m) is the heap of each test broker;
MODELEVENTS_TEST_PORT_OFFSET (default 0) shifts every test broker's port, so that two test runs
on one machine (two checkouts) do not collide.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from modelevents.services.kafka import topics
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local import kafka_broker as local_kafka
from tests.integration.pipeline import PARTITIONS, Worker

SHARED_BASE_PORT = 19400


def worker_index() -> int:
    """0 for gw0 or a run without xdist, 1 for gw1, ..."""
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)


def worker_port(base_port: int) -> int:
    return base_port + 10 * worker_index() + int(os.environ.get("MODELEVENTS_TEST_PORT_OFFSET", "0"))


def start_test_broker(tmp_path_factory: pytest.TempPathFactory, base_port: int,
                      ) -> tuple[str, Callable[[], None]]:
    """Start a broker on this worker's port with a throw-away state dir: (bootstrap, stop)."""
    settings = local_kafka.LocalBrokerSettings(
        port=worker_port(base_port),
        state_root=tmp_path_factory.mktemp(f"kafka-{base_port}"),
        heap=os.environ.get("MODELEVENTS_TEST_KAFKA_HEAP", "256m"),
    )
    result = local_kafka.start(settings, fresh=True)

    def stop() -> None:
        if not result.external:
            local_kafka.stop(settings)

    return result.bootstrap_servers, stop


def broker_fixture(base_port: int, scope: str = "module"):
    """A ``kafka_broker`` fixture of its own for a test module (see the module docstring)."""

    @pytest.fixture(scope=scope)
    def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
        bootstrap, stop = start_test_broker(tmp_path_factory, base_port)
        try:
            yield bootstrap
        finally:
            stop()

    return kafka_broker


def restartable_broker(base_port: int) -> tuple[Any, Any]:
    """``(broker_settings, kafka_broker)`` fixtures of a module that stops and starts its own
    broker (``local_kafka.stop(broker_settings)`` / ``start``: the same data directory, so the
    log survives)::

        broker_settings, kafka_broker = restartable_broker(base_port=19200)
    """

    @pytest.fixture(scope="module")
    def broker_settings(tmp_path_factory: pytest.TempPathFactory,
                        ) -> Iterator[local_kafka.LocalBrokerSettings]:
        settings = local_kafka.LocalBrokerSettings(
            port=worker_port(base_port), state_root=tmp_path_factory.mktemp(f"kafka-{base_port}"),
            heap=os.environ.get("MODELEVENTS_TEST_KAFKA_HEAP", "256m"))
        local_kafka.start(settings, fresh=True)
        try:
            yield settings
        finally:
            local_kafka.stop(settings)

    @pytest.fixture(scope="module")
    def kafka_broker(broker_settings: local_kafka.LocalBrokerSettings) -> str:
        if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
            pytest.fail("this module stops the project's own broker; unset KAFKA_BOOTSTRAP_SERVERS")
        return broker_settings.local_bootstrap

    return broker_settings, kafka_broker


@pytest.fixture(scope="session", autouse=True)
def private_state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Default state directories (a gateway's frame journal, a worker's state) under this
    session's temp dir, never the user's: a gateway whose frames met a missing topic left its
    journal in ~/.local/state, where later gateways of that host found it."""
    before = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(tmp_path_factory.mktemp("xdg-state"))
    yield
    if before is None:
        del os.environ["XDG_STATE_HOME"]
    else:
        os.environ["XDG_STATE_HOME"] = before


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    bootstrap, stop = start_test_broker(tmp_path_factory, SHARED_BASE_PORT)
    try:
        yield bootstrap
    finally:
        stop()


def unique_settings(bootstrap: str, **overrides: object) -> PipelineSettings:
    """Settings with a topic prefix and app id no other test uses."""
    tag = uuid.uuid4().hex[:10]
    values: dict[str, object] = {"bootstrap_servers": bootstrap, "topic_prefix": f"t{tag}.",
                                 "app_id": f"app-{tag}"}
    values.update(overrides)
    return dataclasses.replace(PipelineSettings(bootstrap_servers=bootstrap), **values)  # type: ignore[arg-type]


@pytest.fixture
def make_settings(kafka_broker: str) -> Iterator[Callable[..., PipelineSettings]]:
    made: list[PipelineSettings] = []

    def make(create_topics: bool = True, **overrides: object) -> PipelineSettings:
        settings = unique_settings(kafka_broker, **overrides)
        if create_topics:
            asyncio.run(topics.ensure_topics(settings))
        made.append(settings)
        return settings

    yield make
    for settings in made:
        # Keep the broker light over a long session; a broker that is already gone is fine.
        try:
            asyncio.run(topics.delete_topics(settings))
        except Exception:
            pass


@pytest.fixture
def pipeline_settings(make_settings: Callable[..., PipelineSettings]) -> PipelineSettings:
    return make_settings()


@pytest.fixture
def settings(make_settings: Callable[..., PipelineSettings]) -> PipelineSettings:
    return make_settings(partitions=PARTITIONS)


@pytest.fixture
def start_worker(settings: PipelineSettings, tmp_path: Path) -> Iterator[Callable[..., Worker]]:
    workers: list[Worker] = []

    def start(name: str = "worker", wait: bool = True, extra: tuple[str, ...] = ()) -> Worker:
        worker = Worker(settings, tmp_path, f"{name}-{len(workers)}", extra)
        workers.append(worker)
        if wait:
            worker.wait_ready()
        return worker

    start.logs = lambda name: [line for w in workers if w.log_path.stem.startswith(name)
                               for line in w.log_text().splitlines()]
    yield start
    for worker in workers:
        worker.close()
