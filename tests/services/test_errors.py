"""What an unreachable Kafka's message tells the operator to do (services/errors.py): start the
project's local broker only where that can be the broker meant — a loopback address and no
cluster named in KAFKA_BOOTSTRAP_SERVERS — else look at the configured cluster."""

from __future__ import annotations

import pytest

from modelevents.services.errors import KafkaUnavailable, how_to_reach_kafka


@pytest.mark.parametrize("bootstrap", ["kafka-0.internal:9092,kafka-1.internal:9092",
                                       "10.1.2.3:9093", "127.0.0.1:9092,broker:9092"])
def test_a_configured_cluster_is_never_told_to_start_the_local_broker(monkeypatch, bootstrap):
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    message = str(KafkaUnavailable(bootstrap, "no acknowledgement within 10 s"))
    assert "kafka start" not in message
    assert f"the cluster at {bootstrap}" in message and "no acknowledgement" in message


def test_a_cluster_named_in_the_environment_is_never_told_either(monkeypatch):
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:29092")
    assert "kafka start" not in how_to_reach_kafka("127.0.0.1:29092")


@pytest.mark.parametrize("bootstrap", ["127.0.0.1:9092", "localhost:19092", "[::1]:9092"])
def test_the_local_address_is_told_how_to_start_the_local_broker(monkeypatch, bootstrap):
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    assert "modelevents kafka start" in how_to_reach_kafka(bootstrap)
