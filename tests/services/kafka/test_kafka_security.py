"""services/kafka/security.py and how every client gets it: the TLS / SASL settings from the
environment, their checks at start, the TLS context built from the files and handed to the
producers, consumers, admin clients and the Faust worker, and a password that never shows."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from modelevents.schemas.errors import ConfigError
from modelevents.services.errors import KafkaAuthenticationFailed
from modelevents.services.kafka import clients
from modelevents.services.kafka.security import KafkaSecurity
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.processor.app import broker_credentials, create_app
from tests.tls_certs import TLSFiles, make_tls_files

PASSWORD = "s3cr3t-Pa55word-never-shown"
SECURITY_VARS = ("KAFKA_SECURITY_PROTOCOL", "KAFKA_SASL_MECHANISM", "KAFKA_SASL_USERNAME",
                 "KAFKA_SASL_PASSWORD", "KAFKA_SASL_PASSWORD_FILE", "KAFKA_SSL_CAFILE",
                 "KAFKA_SSL_CERTFILE", "KAFKA_SSL_KEYFILE")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in SECURITY_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def problems(env: dict[str, str]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        KafkaSecurity.from_env(env)
    lines = str(caught.value).splitlines()
    assert lines[0] == "invalid Kafka security settings:"
    return lines[1:]


def test_without_settings_clients_connect_in_plaintext():
    security = KafkaSecurity.from_env({})
    assert security.client_options() == {"security_protocol": "PLAINTEXT"}
    assert broker_credentials(PipelineSettings(security=security)) is None


def test_sasl_protocol_without_mechanism_or_credentials_names_each_missing_setting():
    lines = problems({"KAFKA_SECURITY_PROTOCOL": "SASL_SSL"})
    assert len(lines) == 3
    assert "KAFKA_SASL_MECHANISM" in lines[0]
    assert "KAFKA_SASL_USERNAME" in lines[1]
    assert "KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE" in lines[2]


def test_unknown_protocol_and_unknown_mechanism_are_refused_with_the_choices():
    assert problems({"KAFKA_SECURITY_PROTOCOL": "TLS"}) == [
        "KAFKA_SECURITY_PROTOCOL=TLS: not a protocol; use one of PLAINTEXT, SSL, SASL_PLAINTEXT, "
        "SASL_SSL"]
    lines = problems({"KAFKA_SECURITY_PROTOCOL": "sasl_plaintext", "KAFKA_SASL_MECHANISM": "gssapi",
                      "KAFKA_SASL_USERNAME": "alice", "KAFKA_SASL_PASSWORD": PASSWORD})
    assert lines == ["KAFKA_SASL_MECHANISM=GSSAPI: not supported; use one of PLAIN, "
                     "SCRAM-SHA-256, SCRAM-SHA-512"]


def test_credentials_without_a_sasl_protocol_are_refused_rather_than_ignored():
    lines = problems({"KAFKA_SASL_USERNAME": "alice", "KAFKA_SASL_PASSWORD": PASSWORD})
    assert lines == ["KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD set but KAFKA_SECURITY_PROTOCOL="
                     "PLAINTEXT: use SASL_SSL (or SASL_PLAINTEXT) to authenticate"]
    assert PASSWORD not in "".join(lines)


def test_tls_files_without_tls_and_missing_files_are_refused(tmp_path: Path, tls: TLSFiles):
    assert problems({"KAFKA_SSL_CAFILE": str(tls.ca)}) == [
        "KAFKA_SSL_CAFILE set but KAFKA_SECURITY_PROTOCOL=PLAINTEXT does not use TLS: use SSL or "
        "SASL_SSL"]
    missing = tmp_path / "nowhere.pem"
    assert problems({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CAFILE": str(missing),
                     "KAFKA_SSL_KEYFILE": str(tls.client_key)}) == [
        f"KAFKA_SSL_CAFILE={missing}: no such file",
        "KAFKA_SSL_KEYFILE set without KAFKA_SSL_CERTFILE (the client certificate it belongs to)"]


def test_a_file_that_is_not_pem_is_refused_at_start(tmp_path: Path):
    bogus = tmp_path / "ca.pem"
    bogus.write_text("not a certificate\n")
    [line] = problems({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CAFILE": str(bogus)})
    assert line.startswith("KAFKA_SSL_*: the TLS files cannot be loaded")


def test_password_file_is_read_without_its_newline_and_not_beside_the_variable(tmp_path: Path):
    secret = tmp_path / "password"
    secret.write_text(PASSWORD + "\n")
    env = {"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
           "KAFKA_SASL_USERNAME": "alice", "KAFKA_SASL_PASSWORD_FILE": str(secret)}
    assert KafkaSecurity.from_env(env).client_options() == {
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice", "sasl_plain_password": PASSWORD}
    with pytest.raises(ConfigError, match=r"^KAFKA_SASL_PASSWORD and KAFKA_SASL_PASSWORD_FILE "
                                          r"are both set"):
        KafkaSecurity.from_env({**env, "KAFKA_SASL_PASSWORD": "other"})
    with pytest.raises(ConfigError, match=r"^KAFKA_SASL_PASSWORD_FILE=.*/gone: cannot read it"):
        KafkaSecurity.from_env({**env, "KAFKA_SASL_PASSWORD_FILE": str(tmp_path / "gone")})


def test_the_password_never_appears_in_reprs_descriptions_or_errors(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("KAFKA_SASL_MECHANISM", "PLAIN")
    monkeypatch.setenv("KAFKA_SASL_USERNAME", "alice")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", PASSWORD)
    settings = PipelineSettings()
    assert settings.security.sasl_password == PASSWORD
    shown = [repr(settings), str(settings), repr(settings.security), settings.security.describe(),
             repr(broker_credentials(settings))]
    assert "alice" in settings.security.describe()
    error = KafkaAuthenticationFailed(settings.bootstrap_servers, settings.security.describe(),
                                      "Authentication failed", "check KAFKA_SASL_PASSWORD")
    shown.append(str(error))
    monkeypatch.setenv("KAFKA_SASL_MECHANISM", "NOPE")
    with pytest.raises(ConfigError) as caught:
        PipelineSettings()
    shown.append(str(caught.value))
    assert not [text for text in shown if PASSWORD in text]


def test_tls_context_is_built_from_the_files(tls: TLSFiles):
    security = KafkaSecurity.from_env({
        "KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CAFILE": str(tls.ca),
        "KAFKA_SSL_CERTFILE": str(tls.client_cert), "KAFKA_SSL_KEYFILE": str(tls.client_key)})
    context = security.ssl_context()
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    # Only the given CA is trusted (not the system's), so a broker certificate it did not sign
    # is refused.
    assert [dict(entry[0] for entry in ca["subject"])["commonName"]
            for ca in context.get_ca_certs()] == [tls.ca_name]
    assert security.client_options() == {"security_protocol": "SSL", "ssl_context": context}


def test_an_encrypted_key_opens_with_its_password_from_a_file(tls: TLSFiles, tmp_path: Path):
    from cryptography.hazmat.primitives import serialization

    key = serialization.load_pem_private_key(tls.client_key.read_bytes(), password=None)
    locked = tmp_path / "client-locked.key"
    locked.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(PASSWORD.encode())))
    password = tmp_path / "key-password"
    password.write_text(PASSWORD + "\n")
    env = {"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CAFILE": str(tls.ca),
           "KAFKA_SSL_CERTFILE": str(tls.client_cert), "KAFKA_SSL_KEYFILE": str(locked)}
    security = KafkaSecurity.from_env({**env, "KAFKA_SSL_PASSWORD_FILE": str(password)})
    assert isinstance(security.ssl_context(), ssl.SSLContext)
    assert PASSWORD not in repr(security)
    # Without its password (or with a wrong one) the key does not load: refused at start.
    for given in ({}, {"KAFKA_SSL_PASSWORD": "wrong"}):
        [line] = problems({**env, **given})
        assert line.startswith("KAFKA_SSL_*: the TLS files cannot be loaded")
        assert PASSWORD not in line


def test_a_key_that_does_not_match_the_certificate_is_refused(tls: TLSFiles):
    [line] = problems({"KAFKA_SECURITY_PROTOCOL": "SSL", "KAFKA_SSL_CAFILE": str(tls.ca),
                       "KAFKA_SSL_CERTFILE": str(tls.client_cert),
                       "KAFKA_SSL_KEYFILE": str(tls.server_key)})
    assert line.startswith("KAFKA_SSL_*: the TLS files cannot be loaded")


def test_every_client_and_the_faust_worker_get_the_settings(tls: TLSFiles, tmp_path: Path):
    security = KafkaSecurity.from_env({
        "KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
        "KAFKA_SASL_USERNAME": "alice", "KAFKA_SASL_PASSWORD": PASSWORD,
        "KAFKA_SSL_CAFILE": str(tls.ca)})
    settings = PipelineSettings(bootstrap_servers="127.0.0.1:1", security=security)
    context = security.ssl_context()
    assert context is not None

    async def made() -> list:
        # Made, never started: nothing connects.
        producer, consumer = clients.make_producer(settings), clients.make_consumer(settings)
        admin = clients.make_admin(settings)
        made = [producer.client, consumer._client, admin._client]
        await producer.stop()
        await consumer.stop()
        await admin.close()
        return made

    for client in asyncio.run(made()):
        assert client._security_protocol == "SASL_SSL"
        assert client._ssl_context is context
        assert client._sasl_mechanism == "SCRAM-SHA-256"
        assert client._sasl_plain_username == "alice"
        assert client._sasl_plain_password == PASSWORD
    app = create_app(settings, workdir=tmp_path)
    credentials = app.conf.broker_credentials
    assert credentials.protocol.value == "SASL_SSL"
    assert credentials.mechanism.value == "SCRAM-SHA-256"
    assert (credentials.username, credentials.password) == ("alice", PASSWORD)
    assert credentials.ssl_context is context
    tls_only = PipelineSettings(security=KafkaSecurity(protocol="SSL", ssl_cafile=str(tls.ca)))
    assert broker_credentials(tls_only).context is tls_only.security.ssl_context()
