"""The broker a bench reads and writes: the one KAFKA_BOOTSTRAP_SERVERS names, else one of the
bench's own on ``port`` (the project's real Apache Kafka, ``services/local/kafka_broker.py``), fresh,
stopped and its data removed when the bench ends.

    with bench_broker(args.port, "audit") as bootstrap:
        settings = PipelineSettings(bootstrap_servers=bootstrap, ...)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from modelevents.services.local import kafka_broker


def _say(line: str) -> None:
    print(f"  {line}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def bench_broker(port: int, name: str) -> Iterator[str]:
    """The bootstrap servers of the bench's broker (``name`` labels its temporary directory)."""
    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if external:
        yield external
        return
    workdir = Path(tempfile.mkdtemp(prefix=f"modelevents-bench-{name}-"))
    kafka = kafka_broker.KafkaSettings(port=port, state_root=workdir / "kafka", heap="512m")
    started = kafka_broker.start(kafka, fresh=True, progress=_say)
    try:
        yield started.bootstrap_servers
    finally:
        if started.started:
            kafka_broker.stop(kafka)
        shutil.rmtree(workdir, ignore_errors=True)
