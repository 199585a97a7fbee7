"""The broker a bench reads and writes: the one KAFKA_BOOTSTRAP_SERVERS names, else one of the
bench's own on ``port`` (the project's real Apache Kafka, ``services/local/kafka_broker.py``), fresh,
stopped and its data removed when the bench ends.

    with bench_broker(args.port, "audit") as bootstrap:
        settings = PipelineSettings(bootstrap_servers=bootstrap, ...)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from modelevents.services.kafka import topics
from modelevents.services.kafka.settings import PipelineSettings
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
    kafka = kafka_broker.LocalBrokerSettings(port=port, state_root=workdir / "kafka", heap="512m")
    started = kafka_broker.start(kafka, fresh=True, progress=_say)
    try:
        yield started.bootstrap_servers
    finally:
        if started.started:
            kafka_broker.stop(kafka)
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def bench_topics(port: int, name: str) -> Iterator[PipelineSettings]:
    """Settings on the bench's broker (:func:`bench_broker`) with a fresh topic prefix, the
    pipeline's topics created."""
    with bench_broker(port, name) as bootstrap:
        settings = PipelineSettings(bootstrap_servers=bootstrap,
                                    topic_prefix=f"bench{uuid.uuid4().hex[:6]}.")
        asyncio.run(topics.ensure_topics(settings))
        yield settings
