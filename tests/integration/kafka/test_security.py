"""modelevents on a broker that asks clients to authenticate and encrypt (services/kafka/security.py).

One broker for the module (services/local/kafka_broker.py with its optional listeners): a
plaintext listener (the broker's own), a SASL_PLAINTEXT listener taking PLAIN for one user and
SCRAM-SHA-256/512 for another (credentials written when the storage is formatted), an SSL
listener presenting a certificate of a throw-away CA (tests/tls_certs.py) and requiring client
certificates of that CA (mutual TLS), and a SASL_SSL listener (the same users, the same
certificate). Every client here
connects as users configure it: through PipelineSettings and the KAFKA_* variables.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from modelevents.schemas import codec
from modelevents.schemas.events import ModelEvent
from modelevents.services.errors import KafkaAuthenticationFailed
from modelevents.services.kafka import clients, topics
from modelevents.services.kafka.security import KafkaSecurity
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local import kafka_broker as local_kafka
from tests.integration.conftest import unique_settings, worker_port
from tests.integration.pipeline import (
    HANG_GUARD_S,
    ONE_PER_API,
    PARTITIONS,
    Worker,
    assert_run_as_normalized,
    collect,
    feed,
    fixture_frames,
    run,
)
from tests.tls_certs import TLSFiles, make_tls_files

pytestmark = pytest.mark.kafka

BASE_PORT = 19350  # broker, controller + 1, SASL_PLAINTEXT + 2, SSL + 3, SASL_SSL + 4
PLAIN_USER, PLAIN_PASSWORD = "pipeline", "plain-Pa55word-of-the-pipeline"
SCRAM_USER, SCRAM_PASSWORD = "scrammer", "scram-Pa55word-of-the-pipeline"
CLI = [sys.executable, "-m", "modelevents.services.cli"]
SECURITY_VARS = ("KAFKA_SECURITY_PROTOCOL", "KAFKA_SASL_MECHANISM", "KAFKA_SASL_USERNAME",
                 "KAFKA_SASL_PASSWORD", "KAFKA_SASL_PASSWORD_FILE", "KAFKA_SSL_CAFILE",
                 "KAFKA_SSL_CERTFILE", "KAFKA_SSL_KEYFILE", "KAFKA_BOOTSTRAP_SERVERS")


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory, tls: TLSFiles,
                  ) -> Iterator[local_kafka.LocalBrokerSettings]:
    port = worker_port(BASE_PORT)
    broker = local_kafka.LocalBrokerSettings(
        port=port, sasl_port=port + 2, ssl_port=port + 3, sasl_ssl_port=port + 4,
        sasl_users={PLAIN_USER: PLAIN_PASSWORD}, scram_users={SCRAM_USER: SCRAM_PASSWORD},
        ssl_server_cert=tls.server_cert, ssl_server_key=tls.server_key, ssl_client_ca=tls.ca,
        state_root=tmp_path_factory.mktemp("kafka-secure"),
        heap=os.environ.get("MODELEVENTS_TEST_KAFKA_HEAP", "256m"))
    # This broker's listeners are what the module tests, so an external cluster is not used.
    with pytest.MonkeyPatch.context() as env:
        env.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
        local_kafka.start(broker, fresh=True)
    try:
        yield broker
    finally:
        local_kafka.stop(broker)


@pytest.fixture(autouse=True)
def no_security_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SECURITY_VARS:
        monkeypatch.delenv(name, raising=False)


def sasl(mechanism: str = "PLAIN", user: str = PLAIN_USER, password: str = PLAIN_PASSWORD,
         ) -> KafkaSecurity:
    return KafkaSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                         sasl_username=user, sasl_password=password)


@pytest.fixture
def made(secure_broker: local_kafka.LocalBrokerSettings) -> Iterator[list[PipelineSettings]]:
    """The settings a test made; their topics are deleted afterwards (over plaintext)."""
    settings: list[PipelineSettings] = []
    yield settings
    for one in settings:
        plain = dataclasses.replace(one, bootstrap_servers=secure_broker.local_bootstrap,
                                    security=KafkaSecurity())
        try:
            asyncio.run(topics.delete_topics(plain))
        except Exception:
            pass


def on(made: list[PipelineSettings], bootstrap: str | None, security: KafkaSecurity,
       ) -> PipelineSettings:
    assert bootstrap is not None
    settings = unique_settings(bootstrap, security=security, partitions=PARTITIONS)
    made.append(settings)
    return settings


async def round_trip(settings: PipelineSettings) -> list[ModelEvent]:
    """Create the topics, publish a recorded run's events with our producer, read them back with
    our consumer: what every part of the pipeline does with Kafka."""
    created = await topics.ensure_topics(settings)
    assert set(created.values()) == {"created"}
    assert set((await topics.verify_topics(settings)).values()) == {"verified"}
    run_id, frames = fixture_frames(ONE_PER_API[0])
    await feed(settings, frames)  # our producer (the feeder's), acks=all
    read = await frames_of(settings, run_id)
    assert read == frames
    return read


async def frames_of(settings: PipelineSettings, run_id: str) -> list:
    """The frames of a run on the frames topic, read with our consumer."""
    return [record.value async for record in clients.read_records(
        settings, "frames", run_id=run_id, timeout=30.0, to_end=True)]


def test_topics_producer_and_consumer_over_sasl_plain(secure_broker, made):
    run(round_trip(on(made, secure_broker.sasl_bootstrap, sasl())))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_topics_producer_and_consumer_over_sasl_scram(secure_broker, made, mechanism):
    run(round_trip(on(made, secure_broker.sasl_bootstrap,
                      sasl(mechanism, SCRAM_USER, SCRAM_PASSWORD))))


def test_topics_producer_and_consumer_over_mutual_tls(secure_broker, made, tls):
    security = KafkaSecurity(protocol="SSL", ssl_cafile=str(tls.ca),
                             ssl_certfile=str(tls.client_cert), ssl_keyfile=str(tls.client_key))
    run(round_trip(on(made, secure_broker.ssl_bootstrap, security)))


def test_topics_producer_and_consumer_over_sasl_ssl_scram(secure_broker, made, tls):
    security = dataclasses.replace(sasl("SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD),
                                   protocol="SASL_SSL", ssl_cafile=str(tls.ca))
    run(round_trip(on(made, secure_broker.sasl_ssl_bootstrap, security)))


@pytest.mark.parametrize("protocol, mechanism, user, password", [
    ("SASL_PLAINTEXT", "PLAIN", PLAIN_USER, PLAIN_PASSWORD),
    ("SASL_SSL", "SCRAM-SHA-512", SCRAM_USER, SCRAM_PASSWORD),
])
def test_a_worker_normalizes_a_run_over_sasl_and_librdkafka_reads_it_with_the_same_credentials(
        secure_broker, made, tls, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        protocol, mechanism, user, password):
    from confluent_kafka import Consumer

    over_tls = protocol == "SASL_SSL"
    security = dataclasses.replace(sasl(mechanism, user, password), protocol=protocol,
                                   ssl_cafile=str(tls.ca) if over_tls else None)
    settings = on(made, secure_broker.sasl_ssl_bootstrap if over_tls
                  else secure_broker.sasl_bootstrap, security)
    run(topics.ensure_topics(settings))
    # The worker gets its credentials as a deployment gives them: variables and a secret file.
    secret = tmp_path / "kafka-password"
    secret.write_text(password + "\n")
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", protocol)
    monkeypatch.setenv("KAFKA_SASL_MECHANISM", mechanism)
    monkeypatch.setenv("KAFKA_SASL_USERNAME", user)
    monkeypatch.setenv("KAFKA_SASL_PASSWORD_FILE", str(secret))
    if over_tls:
        monkeypatch.setenv("KAFKA_SSL_CAFILE", str(tls.ca))
    worker = Worker(settings, tmp_path, "worker")
    try:
        worker.wait_ready()
        path = ONE_PER_API[2]
        run_id, frames = fixture_frames(path)
        run(feed(settings, frames))
        expected = len(fixture_events(path))
        published = run(collect(settings, lambda p: p.complete(run_id, expected), worker.log_text))
        assert_run_as_normalized(published, path)
        assert published.dead == []
        assert worker.terminate() == 0
    finally:
        worker.close()
    assert password not in worker.log_text()

    theirs: list[ModelEvent] = []
    consumer = Consumer({"bootstrap.servers": settings.bootstrap_servers, "group.id": "librdkafka",
                         "security.protocol": protocol, "sasl.mechanism": mechanism,
                         "sasl.username": user, "sasl.password": password,
                         **({"ssl.ca.location": str(tls.ca)} if over_tls else {}),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([settings.topic("events")])
        deadline = time.monotonic() + HANG_GUARD_S  # a hang guard, not a timing assertion
        while len(theirs) < len(published.events[run_id]) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            theirs.append(codec.decode(msg.value()))
    finally:
        consumer.close()
    assert theirs and theirs == published.events[run_id]


def topics_create(settings: PipelineSettings, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`modelevents topics create` as a user runs it, with ``env`` added to the environment."""
    return subprocess.run(
        [*CLI, "topics", "create", "--bootstrap-servers", settings.bootstrap_servers,
         "--prefix", settings.topic_prefix, "--partitions", str(settings.partitions)],
        env=dict(os.environ, **env), capture_output=True, text=True, timeout=HANG_GUARD_S)


def fixture_events(path: Path) -> list[ModelEvent]:
    from modelevents.adapters.registry import normalize_file

    return normalize_file(path).events


def test_a_wrong_password_is_a_clear_error_not_a_hang(secure_broker, made, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch):
    wrong = "not-the-Pa55word"
    settings = on(made, secure_broker.sasl_bootstrap, sasl(password=wrong))
    message = refusal(settings)
    assert f"refused the connection (SASL_PLAINTEXT (PLAIN as {PLAIN_USER}))" in message
    assert "Authentication failed" in message
    assert "KAFKA_SASL_PASSWORD" in message
    assert wrong not in message

    # The same from the command line: one line, exit status 2, the password nowhere.
    env = {"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KAFKA_SASL_MECHANISM": "PLAIN",
           "KAFKA_SASL_USERNAME": PLAIN_USER, "KAFKA_SASL_PASSWORD": wrong}
    result = topics_create(settings, env)
    assert result.returncode == 2, result.stderr
    assert "refused the connection" in result.stderr and "KAFKA_SASL_PASSWORD" in result.stderr
    assert wrong not in result.stdout + result.stderr

    # A worker stops at start with that error instead of retrying for ever.
    for name in ("KAFKA_SECURITY_PROTOCOL", "KAFKA_SASL_MECHANISM", "KAFKA_SASL_USERNAME",
                 "KAFKA_SASL_PASSWORD"):
        monkeypatch.setenv(name, env[name])
    worker = Worker(settings, tmp_path, "worker")
    try:
        assert worker.process.wait(timeout=HANG_GUARD_S) == 2, worker.log_text()
    finally:
        worker.close()
    assert "refused the connection" in worker.log_text()
    assert wrong not in worker.log_text()


def test_a_scram_user_with_the_wrong_mechanism_is_refused(secure_broker, made):
    # PLAIN knows only its own users: SCRAM credentials do not log in through it.
    message = refusal(on(made, secure_broker.sasl_bootstrap,
                         sasl("PLAIN", SCRAM_USER, SCRAM_PASSWORD)))
    assert "KAFKA_SASL_MECHANISM" in message


def refusal(settings: PipelineSettings) -> str:
    """The message of the KafkaAuthenticationFailed that creating the topics gives (bounded by
    the hang guard: an error, not a retry loop)."""
    with pytest.raises(KafkaAuthenticationFailed) as caught:
        run(topics.ensure_topics(settings))
    return str(caught.value)


def test_a_broker_certificate_of_another_ca_fails_the_handshake_clearly(secure_broker, made,
                                                                       tmp_path: Path):
    other = make_tls_files(tmp_path / "other", ca_name="some other CA")
    message = refusal(on(made, secure_broker.ssl_bootstrap,
                         KafkaSecurity(protocol="SSL", ssl_cafile=str(other.ca))))
    assert "TLS handshake failed: CERTIFICATE_VERIFY_FAILED" in message
    assert "KAFKA_SSL_CAFILE" in message


def test_mutual_tls_without_a_client_certificate_is_refused_clearly(secure_broker, made, tls):
    message = refusal(on(made, secure_broker.ssl_bootstrap,
                         KafkaSecurity(protocol="SSL", ssl_cafile=str(tls.ca))))
    assert "TLS handshake failed" in message and "KAFKA_SSL_CERTFILE" in message


def test_replication_factor_beyond_the_brokers_is_refused_naming_the_setting(secure_broker):
    result = topics_create(unique_settings(secure_broker.local_bootstrap),
                           {"MODELEVENTS_REPLICATION_FACTOR": "2"})
    assert result.returncode == 2, result.stderr
    assert "MODELEVENTS_REPLICATION_FACTOR=2" in result.stderr
    assert "at most the number of brokers" in result.stderr


def test_existing_topics_with_less_replication_than_asked_are_reported_not_refused(
        secure_broker, made):
    settings = on(made, secure_broker.local_bootstrap, KafkaSecurity())
    run(topics.ensure_topics(settings))  # one replica, min.insync.replicas 1
    result = topics_create(settings, {"MODELEVENTS_REPLICATION_FACTOR": "3"})
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    # Each pipeline topic: one replica fewer than 3, min.insync.replicas 1 below the 2 asked.
    assert len(warnings) == 2 * len(settings.topic_names)
    assert f"warning: topic {settings.topic('events')} has 1 replica(s), fewer than " \
           f"MODELEVENTS_REPLICATION_FACTOR=3" in result.stderr
    assert f"warning: topic {settings.topic('events')} has min.insync.replicas=1, below the 2" \
           in result.stderr
    assert run(topics.durability_warnings(settings)) == []  # as asked for by default settings


def test_the_gateway_serves_and_publishes_over_sasl_ssl(secure_broker, made, tls, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    from tests.integration.gateway.test_frames import SSE_STREAM, GatewayProcess, forward

    security = dataclasses.replace(sasl("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD),
                                   protocol="SASL_SSL", ssl_cafile=str(tls.ca))
    settings = on(made, secure_broker.sasl_ssl_bootstrap, security)
    run(topics.ensure_topics(settings))
    for name, value in (("KAFKA_SECURITY_PROTOCOL", "SASL_SSL"),
                        ("KAFKA_SASL_MECHANISM", "SCRAM-SHA-256"),
                        ("KAFKA_SASL_USERNAME", SCRAM_USER), ("KAFKA_SASL_PASSWORD", SCRAM_PASSWORD),
                        ("KAFKA_SSL_CAFILE", str(tls.ca))):
        monkeypatch.setenv(name, value)
    # Ready (GatewayProcess waits for /readyz): the topics checked and run-owners and runs read
    # from their start, over SASL_SSL.
    gateway = GatewayProcess(settings, tmp_path)
    try:
        answer = forward(gateway, "run-over-sasl", SSE_STREAM.read_bytes(), "text/event-stream",
                         api="openai-responses")
        assert answer.status_code == 200, answer.text
        accepted = answer.json()["accepted"]
    finally:
        assert gateway.stop() == 0
    frames = run(frames_of(settings, "run-over-sasl"))
    # The forwarded frames and the end of the stream, acknowledged before the 200.
    assert len(frames) == accepted + 1
    assert SCRAM_PASSWORD not in gateway.log_text()
