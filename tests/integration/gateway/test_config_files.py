"""The configuration of a real gateway process (issue #16): the config file named by
``MODELEVENTS_CONFIG`` and a secret mounted as a file (``MODELEVENTS_API_TOKEN_FILE``) reach the
running gateway, checked over real HTTP against the real broker's topics."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest

from modelevents.services.kafka.settings import PipelineSettings
from tests.helpers import free_port
from tests.integration.pipeline import start_gateway_process

pytestmark = pytest.mark.kafka


def test_a_token_file_and_the_config_file_authenticate_tenants_of_a_running_gateway(
        settings: PipelineSettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    token_file = tmp_path / "api-token"
    token_file.write_text("tok-default-from-a-file\n")  # as Kubernetes mounts it
    config = tmp_path / "config.yaml"
    config.write_text("api_tokens:\n  acme: [tok-acme-from-the-config]\n")
    monkeypatch.delenv("MODELEVENTS_API_TOKEN", raising=False)
    monkeypatch.setenv("MODELEVENTS_API_TOKEN_FILE", str(token_file))
    monkeypatch.setenv("MODELEVENTS_CONFIG", str(config))
    port = free_port()
    gateway = start_gateway_process(settings, port, tmp_path / "gateway.err")
    try:
        url = f"http://127.0.0.1:{port}/v1/runs/run-config-files-1"

        def status(token: str | None) -> int:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            return httpx.get(url, headers=headers, timeout=10).status_code

        assert status(None) == 401
        assert status("tok-wrong") == 401
        # The file's content less its newline is the default tenant's token; the config file's
        # is acme's: both are let through to the route (an unknown run there).
        assert status("tok-default-from-a-file") == 404
        assert status("tok-acme-from-the-config") == 404
    finally:
        os.killpg(gateway.pid, signal.SIGTERM)
        gateway.wait(timeout=60)
    log = (tmp_path / "gateway.err").read_text()
    assert "tok-default-from-a-file" not in log and "tok-acme-from-the-config" not in log
