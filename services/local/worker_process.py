"""A worker as a child process, started the way users start it (`modelevents worker`).

For the commands and tools that run the pipeline end to end on one machine (`modelevents demo`,
bench/pipeline.py): the worker runs in its own process group so that stopping it also stops
anything it started, and its log goes to a file the caller names.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from modelevents.services.kafka.settings import PipelineSettings


def start_worker_process(settings: PipelineSettings, workdir: Path, log_file: Path,
                         loglevel: str = "warning") -> subprocess.Popen:
    log = log_file.open("ab")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "modelevents.services.cli", "worker",
             "--bootstrap-servers", settings.bootstrap_servers, "--prefix", settings.topic_prefix,
             "--partitions", str(settings.partitions), "--app-id", settings.app_id,
             "--workdir", str(workdir), "--loglevel", loglevel],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        log.close()  # the child holds its own descriptor


def stop_worker_process(worker: subprocess.Popen, timeout: float = 30.0) -> None:
    """SIGTERM (the worker finishes its batch and commits), SIGKILL after ``timeout``."""
    if worker.poll() is None:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
