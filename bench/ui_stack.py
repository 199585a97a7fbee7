"""What bench/ui.py and bench/ui_screenshots.py share: a local pipeline to point Chromium at.

:class:`Stack` starts a broker of its own (services/local/kafka_broker.py, a throw-away state
dir), the pipeline's topics under a fresh prefix, optionally a worker, and the gateway
(``modelevents gateway``), each in its own process, as users start them; ``stop()`` ends them.
:func:`chromium` launches Debian's Chromium through Playwright (never a browser of Playwright's
own). :func:`write_records` writes contract records (events, run states) to a topic, acks=all.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from gateway import wait_ready  # bench/gateway.py, beside this script

ROOT = Path(__file__).resolve().parents[1]


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "modelevents.services.cli", *args]


def traced_cli(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).with_name("traced_gateway.py")), *args]


class Stack:
    def __init__(self, broker_port: int, gateway_port: int, worker: bool,
                 trace: Path | None = None) -> None:
        """``trace``: run the gateway through bench/traced_gateway.py, writing to this file."""
        from modelevents.services.kafka import topics
        from modelevents.services.kafka.settings import PipelineSettings
        from modelevents.services.local import kafka_broker

        self.trace = trace
        self.workdir = Path(tempfile.mkdtemp(prefix="modelevents-bench-ui-"))
        self.kafka = kafka_broker.LocalBrokerSettings(port=broker_port,
                                                state_root=self.workdir / "kafka", heap="512m")
        say(f"starting a broker on {broker_port} ...")
        broker = kafka_broker.start(self.kafka, fresh=True, progress=lambda line: say(f"  {line}"))
        prefix = f"benchui{uuid.uuid4().hex[:6]}."
        self.settings = PipelineSettings(bootstrap_servers=broker.bootstrap_servers,
                                         topic_prefix=prefix)
        kafka_args = ["--bootstrap-servers", broker.bootstrap_servers, "--prefix", prefix]
        self.processes: list[subprocess.Popen] = []
        self.gateway_port = gateway_port
        self.url = f"http://127.0.0.1:{gateway_port}"
        try:
            asyncio.run(topics.ensure_topics(self.settings))
            self.log = (self.workdir / "processes.log").open("wb")
            env = dict(os.environ, PYTHONUNBUFFERED="1")
            gateway_cli = cli
            if trace is not None:
                env["MODELEVENTS_BENCH_TRACE"] = str(trace)
                gateway_cli = traced_cli
            if worker:
                self.processes.append(subprocess.Popen(
                    cli("worker", *kafka_args, "--app-id", prefix, "--workdir",
                        str(self.workdir / "worker")),
                    stdout=self.log, stderr=subprocess.STDOUT, env=env))
            self.gateway = subprocess.Popen(
                gateway_cli("gateway", "--port", str(gateway_port), *kafka_args,
                            "--loglevel", "warning"),
                stdout=self.log, stderr=subprocess.STDOUT, env=env)
            self.processes.append(self.gateway)
            wait_ready(gateway_port, self.gateway, timeout=120.0)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        from modelevents.services.local import kafka_broker

        for process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
        kafka_broker.stop(self.kafka)


def chromium(playwright: Any) -> Any:
    path = shutil.which("chromium")
    if path is None:
        raise SystemExit("Debian's chromium is needed: scripts/bootstrap.sh installs it "
                         "(or: sudo apt-get install -y chromium)")
    return playwright.chromium.launch(executable_path=path, args=["--no-sandbox"])


async def write_records(settings: Any, topic: str, records: list[Any]) -> None:
    """Contract records (ModelEvents, RunStates) onto ``topic``, keyed by run id, acks=all."""
    from modelevents.services.kafka import clients

    producer = await clients.start_producer(settings)
    try:
        await clients.await_acks(settings, [
            await clients.send_record(producer, settings, topic, r.run_id, r) for r in records])
    finally:
        await producer.stop()


def run_off_loop(coroutine: Any) -> Any:
    """``asyncio.run(coroutine)`` in a thread of its own: Playwright's sync API keeps an event
    loop running in the main thread."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
