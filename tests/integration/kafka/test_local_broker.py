"""The project's own Kafka broker manager against a real Apache Kafka 4.x JVM.

These tests start a broker on a non-default port (``MODELEVENTS_TEST_KAFKA_PORT``, default 19092,
plus ``MODELEVENTS_TEST_PORT_OFFSET`` as for every test broker; controller on port+1) with its
state in a temporary directory, so a developer's broker on 9092, and another test run on the
same machine, are left alone. The jars come from the shared cache (fetched with Maven on first use). Everything
talks to the broker over the network: an idempotent producer (acks=all) and a consumer group.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import UnknownTopicOrPartitionError

from modelevents.services.local import kafka_broker as local_kafka
from modelevents.services.local.kafka_broker import LocalBrokerSettings
from tests.helpers import free_port_pair
from tests.integration.conftest import worker_port

pytestmark = pytest.mark.kafka

# One broker per pytest-xdist worker (gw0 -> 19092, gw1 -> 19102, ...): no worker sees another's;
# shifted by MODELEVENTS_TEST_PORT_OFFSET, as conftest.worker_port shifts the other test brokers.
TEST_PORT = worker_port(int(os.environ.get("MODELEVENTS_TEST_KAFKA_PORT", "19092")))


def _pid_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBrokerSettings]:
    state_root = tmp_path_factory.mktemp("kafka-state")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)  # this suite is about the local broker
        yield LocalBrokerSettings(port=TEST_PORT, state_root=state_root)


@pytest.fixture(scope="module")
def broker(settings: LocalBrokerSettings) -> Iterator[local_kafka.StartResult]:
    result = local_kafka.start(settings)
    try:
        yield result
    finally:
        local_kafka.stop(settings)
        assert not _pid_alive(result.pid or -1), "broker left running after the tests"


def test_start_launches_a_real_broker(broker: local_kafka.StartResult, settings: LocalBrokerSettings) -> None:
    assert broker.started and not broker.external
    assert broker.bootstrap_servers == f"127.0.0.1:{TEST_PORT}"
    assert broker.pid is not None and _pid_alive(broker.pid)
    st = local_kafka.status(settings)
    assert st.running and st.pid == broker.pid and st.port == TEST_PORT
    assert (settings.data_dir / "meta.properties").is_file()
    props = settings.properties_file.read_text()
    assert "auto.create.topics.enable=false" in props
    # The SLF4J binding is on the classpath: the broker really logs (Kafka 4 POMs ship none).
    assert "Kafka Server started" in settings.log_file.read_text()


def test_idempotent_produce_and_consume_round_trip(broker: local_kafka.StartResult) -> None:
    topic = f"it-kafka-local-{uuid.uuid4().hex[:8]}"
    n = 300

    async def scenario() -> list[tuple[bytes, bytes]]:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await admin.start()
        try:
            await admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])
        finally:
            await admin.close()

        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap_servers, enable_idempotence=True, acks="all", linger_ms=5
        )
        await producer.start()
        try:
            futures = [
                await producer.send(topic, key=f"run-{i % 7}".encode(), value=f"{i}".encode()) for i in range(n)
            ]
            metas = await asyncio.gather(*futures)
        finally:
            await producer.stop()
        assert all(m.offset >= 0 for m in metas)
        assert {m.partition for m in metas} <= {0, 1, 2}

        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap_servers,
            group_id=f"it-{uuid.uuid4().hex[:8]}",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        got: list[tuple[bytes, bytes]] = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < n and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=1000)
                for records in batches.values():
                    got.extend((r.key, r.value) for r in records)
            await consumer.commit()  # the group coordinator (__consumer_offsets, RF 1) works too
        finally:
            await consumer.stop()
        return got

    got = asyncio.run(scenario())
    assert len(got) == n, f"consumed {len(got)} of {n} records"
    assert sorted(int(v) for _, v in got) == list(range(n))  # each exactly once
    by_key: dict[bytes, list[int]] = {}
    for k, v in got:
        by_key.setdefault(k, []).append(int(v))
    assert all(vals == sorted(vals) for vals in by_key.values())  # per-key order kept


def test_topics_are_not_auto_created(broker: local_kafka.StartResult) -> None:
    topic = f"it-never-created-{uuid.uuid4().hex[:8]}"

    async def scenario() -> list[str]:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=3000)
        await producer.start()
        try:
            with pytest.raises(UnknownTopicOrPartitionError):
                await producer.send_and_wait(topic, b"x")
        finally:
            await producer.stop()
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        await admin.start()
        try:
            return await admin.list_topics()
        finally:
            await admin.close()

    assert topic not in asyncio.run(scenario())


def test_start_again_is_a_noop(broker: local_kafka.StartResult, settings: LocalBrokerSettings) -> None:
    again = local_kafka.start(settings)
    assert not again.started
    assert again.pid == broker.pid
    assert again.bootstrap_servers == broker.bootstrap_servers
    assert again.seconds < 10


def test_bootstrap_servers_prefers_the_environment(settings: LocalBrokerSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    assert local_kafka.bootstrap_servers(settings) == f"127.0.0.1:{TEST_PORT}"
    monkeypatch.setenv("KAFKA_BOOTSTRAP_SERVERS", "kafka.example:9092")
    assert local_kafka.bootstrap_servers(settings) == "kafka.example:9092"
    result = local_kafka.start(local_kafka.replace(settings, port=free_port_pair()))
    assert result.external and not result.started and result.pid is None
    assert result.bootstrap_servers == "kafka.example:9092"


def test_taken_port_is_reported(settings: LocalBrokerSettings) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        taken = local_kafka.replace(settings, port=port)
        with pytest.raises(local_kafka.PortInUseError) as info:
            local_kafka.start(taken)
    assert info.value.port == port
    assert str(port) in str(info.value) and "--port" in str(info.value)
    assert not taken.pid_file.exists()


def test_jvm_that_cannot_start_reports_its_log(settings: LocalBrokerSettings) -> None:
    broken = local_kafka.replace(settings, port=free_port_pair(), jvm_opts=("-XX:+UseSerialGC", "-XX:+UseParallelGC"))
    with pytest.raises(local_kafka.BrokerStartError) as info:
        local_kafka.start(broken, timeout=30)
    assert "Multiple garbage collectors" in info.value.log_tail
    assert not local_kafka.status(broken).running
    assert not broken.pid_file.exists()


def test_stop_then_status_says_stopped(broker: local_kafka.StartResult, settings: LocalBrokerSettings) -> None:
    assert local_kafka.stop(settings) is True
    st = local_kafka.status(settings)
    assert st.state == "stopped" and st.pid is None and not st.running
    assert not _pid_alive(broker.pid or -1)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", TEST_PORT), timeout=1).close()
    assert local_kafka.stop(settings) is False  # stopping twice is harmless
