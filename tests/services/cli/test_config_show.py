"""``modelevents config show`` as a user runs it (a subprocess of the installed command): the
effective configuration from the environment, a config file and the options, every secret
masked — the values never appear in the output —, and an invalid setting the same one-line
error, exit 2, that the gateway or the worker would stop with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
    assert kafka["security"] == {
        "protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_username": "svc",
        "sasl_password": "**********", "ssl_cafile": None, "ssl_certfile": None,
        "ssl_keyfile": None}
    gateway = document["gateway"]
    assert (gateway["port"], gateway["max_body_bytes"]) == (9191, 500000)  # the file's
    assert gateway["providers"]["openai"]["api_key"] == "**********"
    assert gateway["providers"]["openai"]["webhook_secrets"] == {"default": ["**********"]}
    assert gateway["api_tokens"] == {"default": ["**********"]}
    assert document["worker"]["run_retention_s"] == 120.0
    assert document["log_format"] == "text"
    yaml_out = show(env={k: v for k, v in SECRETS.items() if not k.startswith("KAFKA_")})
    assert yaml_out.returncode == 0 and "kafka:\n  bootstrap_servers:" in yaml_out.stdout
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
