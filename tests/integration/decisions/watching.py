"""``modelevents decisions watch`` as a user starts it (a process of its own, with metrics), for
the tests that watch decisions demoted: start it and wait until it watches, read its gauge, run
a ``modelevents`` command as a subprocess."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from modelevents.services.kafka.settings import PipelineSettings
from tests.helpers import free_port
from tests.integration.pipeline import HANG_GUARD_S, kafka_args


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "modelevents.services.cli", *args],
                          capture_output=True, text=True, timeout=HANG_GUARD_S)


def gauge(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        text = response.read().decode()
    return {s.labels["decision_id"]: s.value for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == "modelevents_decision_current"}


def wait_for(predicate: Callable[[], bool], what: str, log: Path,
             process: subprocess.Popen) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while not predicate():
        if time.monotonic() > deadline or process.poll() is not None:
            raise AssertionError(f"{what}:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


def start_watcher(settings: PipelineSettings, log: Path, *options: str) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "modelevents.services.cli", "decisions", "watch", *options,
             *kafka_args(settings)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))


@contextlib.contextmanager
def watching(settings: PipelineSettings, tmp_path: Path, *options: str
             ) -> Iterator[tuple[subprocess.Popen, int, Path]]:
    """``decisions watch`` with metrics, ready (it logged the decisions it watches); yields
    (process, metrics port, log) and stops it."""
    port = free_port()
    log = tmp_path / "watch.log"
    watcher = start_watcher(settings, log, "--metrics-port", str(port), *options)
    try:
        wait_for(lambda: "watching " in log.read_text(), "watcher not ready", log, watcher)
        yield watcher, port, log
    finally:
        os.killpg(watcher.pid, signal.SIGTERM)
        watcher.wait(timeout=30)
