"""``modelevents config show`` as a user runs it (a subprocess of the installed command): the
effective configuration from the environment, a config file and the options, every secret
masked — the values never appear in the output —, and an invalid setting the same one-line
error, exit 2, that the gateway or the worker would stop with."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import yaml

SECRETS = {"OPENAI_API_KEY": "sk-very-secret-1", "KAFKA_SASL_PASSWORD": "pw-very-secret-2",
           "MODELEVENTS_API_TOKEN": "tok-very-secret-3",
           "OPENAI_WEBHOOK_SECRET": "whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0IQ=="}


def show(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("KAFKA_", "MODELEVENTS_", "OPENAI_", "ANTHROPIC_", "GEMINI_"))}
    return subprocess.run([sys.executable, "-m", "modelevents.services.cli", "config", "show",
                           *args], capture_output=True, text=True, timeout=60,
                          env={**clean, **(env or {})})


def test_the_effective_configuration_with_every_secret_masked(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text("port: 9191\nmax_body_bytes: 500000\n")
    done = show("--json", "--config", str(config), "--prefix", "acme.", env={
        **SECRETS, "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KAFKA_SASL_MECHANISM": "PLAIN",
        "KAFKA_SASL_USERNAME": "svc", "MODELEVENTS_REPLICATION_FACTOR": "3",
        "MODELEVENTS_RUN_RETENTION": "120"})
    assert done.returncode == 0, done.stderr
    for secret in SECRETS.values():
        assert secret not in done.stdout
    document = json.loads(done.stdout)
    kafka = document["kafka"]
    assert kafka["topic_prefix"] == "acme." and kafka["topics"]["events"] == "acme.events"
    assert (kafka["replication_factor"], kafka["min_insync_replicas"]) == (3, 2)
    assert {k: v for k, v in kafka.items() if k.startswith(("security", "sasl", "ssl"))} == {
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_username": "svc",
        "sasl_password": "**********", "ssl_cafile": None, "ssl_certfile": None,
        "ssl_keyfile": None, "ssl_password": None}
    sources = document["sources"]
    assert sources["kafka.sasl_password"] == "env KAFKA_SASL_PASSWORD"
    assert sources["kafka.topic_prefix"] == "cli --prefix"
    assert sources["gateway.port"] == f"file {config}: port"
    assert sources["gateway.host"] == "default"
    gateway = document["gateway"]
    assert (gateway["port"], gateway["max_body_bytes"]) == (9191, 500000)  # the file's
    assert gateway["providers"]["openai"]["api_key"] == "**********"
    assert gateway["providers"]["openai"]["webhook_secrets"] == {"default": ["**********"]}
    assert gateway["api_tokens"] == {"default": ["**********"]}
    assert document["worker"]["run_retention_s"] == 120.0
    assert document["log_format"] == "text"
    yaml_out = show(env={k: v for k, v in SECRETS.items() if not k.startswith("KAFKA_")})
    assert yaml_out.returncode == 0 and "kafka:\n  bootstrap_servers:" in yaml_out.stdout
    assert '  api_key: "**********"  # env OPENAI_API_KEY' in yaml_out.stdout
    parsed = yaml.safe_load(yaml_out.stdout)  # YAML, the origins as comments
    assert parsed["gateway"]["providers"]["openai"]["api_key"] == "**********"
    worker_only = show("--json", "--service", "worker")
    assert worker_only.returncode == 0, worker_only.stderr
    assert set(json.loads(worker_only.stdout)) == {"kafka", "worker", "log_format", "sources"}
    assert not any(secret in yaml_out.stdout for secret in SECRETS.values())


def test_an_invalid_setting_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad_protocol = show(env={"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"})
    assert bad_protocol.returncode == 2 and bad_protocol.stdout == ""
    assert "KAFKA_SASL_MECHANISM" in bad_protocol.stderr
    bad_number = show(env={"MODELEVENTS_PARTITIONS": "four"})
    assert bad_number.returncode == 2
    assert bad_number.stderr.strip().splitlines() == [
        "modelevents: error: MODELEVENTS_PARTITIONS='four' is not a whole number"]
    config = tmp_path / "gateway.yaml"
    config.write_text("port: -1\nno_such_setting: 1\n")
    bad_file = show("--config", str(config))
    assert bad_file.returncode == 2
    assert "port" in bad_file.stderr and "no_such_setting" in bad_file.stderr
    # A file that is not YAML, or not a mapping: one line naming it.
    config.write_text("port: [8080\n")
    not_yaml = show("--check", "--config", str(config))
    assert not_yaml.returncode == 2 and not_yaml.stderr.startswith(
        f"modelevents: error: {config} is not valid YAML")
    config.write_text("- port\n")
    assert show("--check", "--config", str(config)).stderr.strip() == (
        f"modelevents: error: {config}: the config must be a mapping of settings, not list")


def test_precedence_defaults_file_environment_options(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("kafka:\n  topic_prefix: file.\n  partitions: 6\n  app_id: from-file\n"
                      "providers:\n  openai: {base_url: 'https://file.example'}\n"
                      "worker:\n  run_retention_s: 30\n")

    def effective(*args: str, **env: str) -> dict:
        done = show("--json", *args, env={"MODELEVENTS_CONFIG": str(config), **env})
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    from_file = effective()
    assert (from_file["kafka"]["topic_prefix"], from_file["kafka"]["partitions"]) == ("file.", 6)
    assert from_file["sources"]["kafka.partitions"] == f"file {config}: kafka.partitions"
    assert from_file["worker"]["run_retention_s"] == 30
    assert from_file["kafka"]["replication_factor"] == 1  # nobody set it: the default
    # The environment wins over the file, for what it sets only; the SDK's /v1 is dropped.
    over = effective(MODELEVENTS_TOPIC_PREFIX="env.", OPENAI_BASE_URL="http://127.0.0.1:9/v1/")
    assert over["kafka"]["topic_prefix"] == "env." and over["kafka"]["partitions"] == 6
    assert over["gateway"]["providers"]["openai"]["base_url"] == "http://127.0.0.1:9"
    assert over["sources"]["gateway.providers.openai.base_url"] == "env OPENAI_BASE_URL"
    # The options win over both; --config wins over MODELEVENTS_CONFIG.
    cli = effective("--prefix", "cli.", MODELEVENTS_TOPIC_PREFIX="env.")
    assert cli["kafka"]["topic_prefix"] == "cli." and cli["sources"]["kafka.topic_prefix"] == \
        "cli --prefix"
    other = tmp_path / "other.toml"
    other.write_text('[kafka]\napp_id = "from-toml"\n')
    assert effective("--config", str(other))["kafka"]["app_id"] == "from-toml"


def test_secrets_from_files_and_their_problems(tmp_path: Path) -> None:
    key = tmp_path / "openai"
    key.write_text("sk-from-a-file-4\n")
    token = tmp_path / "token"
    token.write_text("tok-from-a-file-5\n")
    password = tmp_path / "password"
    password.write_text("pw-from-a-file-6\n")
    env = {"OPENAI_API_KEY_FILE": str(key), "MODELEVENTS_API_TOKEN_FILE": str(token),
           "KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "KAFKA_SASL_MECHANISM": "PLAIN",
           "KAFKA_SASL_USERNAME": "svc", "KAFKA_SASL_PASSWORD_FILE": str(password)}
    done = show("--json", env=env)
    assert done.returncode == 0, done.stderr
    assert not any(s in done.stdout for s in ("sk-from", "tok-from", "pw-from"))
    document = json.loads(done.stdout)
    assert document["gateway"]["providers"]["openai"]["api_key"] == "**********"
    assert document["sources"]["gateway.providers.openai.api_key"] == "env OPENAI_API_KEY_FILE"
    assert document["sources"]["kafka.sasl_password"] == "env KAFKA_SASL_PASSWORD_FILE"
    # The value is the file's content without its newline (what the clients are given).
    from modelevents.services.cli.settings_tree import load_settings
    settings = load_settings(None, env=env).settings
    assert settings.gateway.providers["openai"].api_key.get_secret_value() == "sk-from-a-file-4"
    assert settings.kafka.security.sasl_password == "pw-from-a-file-6"
    assert [t.get_secret_value() for t in settings.gateway.api_tokens["default"]] == [
        "tok-from-a-file-5"]
    # Both the variable and its file, and a file that cannot be read: each a line, exit 2,
    # and no secret in them.
    bad = show("--check", env={**env, "OPENAI_API_KEY": "sk-also-set-7",
                               "GEMINI_API_KEY_FILE": str(tmp_path / "gone")})
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "modelevents: error: OPENAI_API_KEY and OPENAI_API_KEY_FILE are both set: set one of "
        "them (the value, or the file that holds it)",
        f"modelevents: error: GEMINI_API_KEY_FILE={tmp_path / 'gone'}: cannot read it (No such "
        "file or directory)"]
    assert "sk-also-set-7" not in bad.stderr and "sk-from" not in bad.stderr


def test_kafka_tls_and_sasl_from_the_file_are_checked_and_named_by_their_keys(
        tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("kafka:\n  security_protocol: SASL_SSL\n  sasl_mechanism: PLAIN\n"
                      "  sasl_username: svc\n  sasl_password: pw-in-the-file-8\n"
                      f"  ssl_cafile: {tmp_path / 'no-ca.pem'}\n")
    done = show("--check", "--config", str(config))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"modelevents: error: {config}: kafka.ssl_cafile={tmp_path / 'no-ca.pem'}: no such file"]
    # Another value of the section wrong too: the security problems are still all reported.
    config.write_text("kafka:\n  partitions: 0\n  security_protocol: SASL_SSL\n"
                      "  sasl_username: svc\n")
    several = show("--check", "--config", str(config))
    assert several.returncode == 2
    assert several.stderr.strip().splitlines() == [
        f"modelevents: error: {config}: kafka.partitions=0 must be at least 1",
        f"modelevents: error: {config}: kafka.security_protocol=SASL_SSL needs "
        "KAFKA_SASL_MECHANISM (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)",
        f"modelevents: error: {config}: kafka.security_protocol=SASL_SSL needs "
        "KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE"]
    config.write_text("kafka:\n  security_protocol: SASL_PLAINTEXT\n  sasl_mechanism: PLAIN\n"
                      "  sasl_username: svc\n  sasl_password: pw-in-the-file-8\n")
    ok = show("--json", "--config", str(config))
    assert ok.returncode == 0, ok.stderr
    assert "pw-in-the-file-8" not in ok.stdout
    assert json.loads(ok.stdout)["sources"]["kafka.sasl_password"] == \
        f"file {config}: kafka.sasl_password"


def test_every_service_stops_at_start_with_one_line_per_problem(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("port: 70000\nkafka:\n  partitions: 0\nworker:\n  batch_size: none\n"
                      "tools:\n  no_such_key: 1\n")
    env = {"MODELEVENTS_REPLICATION_FACTOR": "three", "OPENAI_API_KEY": "sk-never-shown-9"}
    policy = tmp_path / "policy.yaml"
    policy.write_text("tenants: {}\n")
    expected = [
        f"{config}: kafka.partitions=0 must be at least 1",
        "MODELEVENTS_REPLICATION_FACTOR='three' is not a whole number",
        f"{config}: port=70000 must be at most 65535",
        f"{config}: worker.batch_size='none' is not a whole number",
        f"{config}: tools.no_such_key is not a setting here; the settings are policy, module, "
        "db, group, gateway_url, tenants, metrics_port, metrics_host, "
        "max_concurrent_calls"]
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("KAFKA_", "MODELEVENTS_", "OPENAI_", "ANTHROPIC_", "GEMINI_"))}
    for command in (["gateway"], ["worker"], ["tools", "run", "--policy", str(policy)], ["ui"],
                    ["config", "show", "--check"]):
        done = subprocess.run([sys.executable, "-m", "modelevents.services.cli", *command,
                               "--config", str(config)], capture_output=True, text=True,
                              timeout=60, env={**clean, **env})
        assert done.returncode == 2, (command, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert sorted(lines) == sorted(f"modelevents: error: {line}" for line in expected), command
        assert "sk-never-shown-9" not in done.stderr + done.stdout


def test_the_gateway_instance_id_from_the_file_the_environment_or_the_default(
        tmp_path: Path) -> None:
    # The handover's instance id is a setting of the tree like the others: config show prints
    # it and its origin, the variable wins over the file, and a bad one is the one-line error.
    def gateway(*args: str, **env: str) -> tuple[str, str]:
        done = show("--json", "--service", "gateway", *args, env=env)
        assert done.returncode == 0, done.stderr
        document = json.loads(done.stdout)
        return document["gateway"]["instance_id"], document["sources"]["gateway.instance_id"]

    default, origin = gateway()
    assert origin == "default" and default == socket.gethostname()[:200]
    assert gateway(MODELEVENTS_GATEWAY_INSTANCE="gw-env-7") == (
        "gw-env-7", "env MODELEVENTS_GATEWAY_INSTANCE")
    config = tmp_path / "gateway.yaml"
    config.write_text("instance_id: gw-file-3\n")
    assert gateway("--config", str(config)) == ("gw-file-3", f"file {config}: instance_id")
    assert gateway("--config", str(config), MODELEVENTS_GATEWAY_INSTANCE="gw-env-7") == (
        "gw-env-7", "env MODELEVENTS_GATEWAY_INSTANCE")
    bad = show("--check", env={"MODELEVENTS_GATEWAY_INSTANCE": "gw 1"})
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == [
        "modelevents: error: MODELEVENTS_GATEWAY_INSTANCE: instance_id 'gw 1' is not valid: use "
        "1 to 200 characters of ASCII letters, digits and . _ : -"]
