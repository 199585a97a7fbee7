"""The broker stops and starts again in the middle of a feed: nothing fed is lost, nothing is
numbered twice, and the runs end as `modelevents normalize` says."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from modelevents.services.local import kafka_broker as local_kafka
from tests.integration.conftest import worker_port
from tests.integration.pipeline import (
    ONE_PER_API,
    assert_run_as_normalized,
    collect,
    expected_counts,
    feed,
    halves,
    run,
)

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def broker_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[local_kafka.LocalBrokerSettings]:
    settings = local_kafka.LocalBrokerSettings(
        port=worker_port(19700), state_root=tmp_path_factory.mktemp("kafka-restart"),
        heap=os.environ.get("MODELEVENTS_TEST_KAFKA_HEAP", "256m"))
    local_kafka.start(settings, fresh=True)
    try:
        yield settings
    finally:
        local_kafka.stop(settings)


@pytest.fixture(scope="module")
def kafka_broker(broker_settings: local_kafka.LocalBrokerSettings) -> str:
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        pytest.fail("this test restarts the project's own broker; unset KAFKA_BOOTSTRAP_SERVERS")
    return broker_settings.local_bootstrap


def test_broker_restart_during_a_feed_loses_nothing(broker_settings, settings, start_worker):
    worker = start_worker()
    first, second = halves(ONE_PER_API)
    run(feed(settings, first, duplicate=0.2, seed=5))
    local_kafka.stop(broker_settings)
    assert not local_kafka.status(broker_settings).running
    local_kafka.start(broker_settings)  # same data directory: the log survives
    run(feed(settings, second, duplicate=0.2, seed=6))
    counts = expected_counts(ONE_PER_API)
    published = run(collect(settings, lambda p: all(p.complete(r, n) for r, n in counts.items()),
                            worker.log_text))
    for path in ONE_PER_API:
        assert_run_as_normalized(published, path)
    assert worker.process.poll() is None, "the worker survives the broker's restart"
