"""The broker stops and starts again in the middle of a feed: nothing fed is lost, nothing is
numbered twice, and the runs end as `modelevents normalize` says."""

from __future__ import annotations

import pytest

from modelevents.services.local import kafka_broker as local_kafka
from tests.integration.conftest import restartable_broker
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


broker_settings, kafka_broker = restartable_broker(base_port=19700)


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
