"""Frames and a gateway process for the journal's tests (test_journal.py).

``stream(run_id, start, count)`` makes a run's SSE frames as the proxy tees them (frame ids
``<stream id>:<index>``). Run as a module, this is a gateway — the app's lifespan as
``modelevents gateway`` runs it, with its journal — that tees frames on command: it prints
``ready``, waits for a line on stdin (the test has stopped the broker), offers the frames,
prints ``spooled`` once all are in its journal, and waits to be killed::

    python -m tests.integration.gateway.tee_process BOOTSTRAP PREFIX PARTITIONS JOURNAL_DIR \\
        INSTANCE_ID RUNS FRAMES_PER_RUN
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import orjson

from modelevents.schemas.frames import ProviderFrame
from modelevents.services.gateway.app import create_app
from modelevents.services.gateway.config import GatewayConfig, JournalConfig
from modelevents.services.kafka.settings import PipelineSettings

TENANT = "acme"


def stream(run_id: str, start: int, count: int) -> list[ProviderFrame]:
    """Frames ``start`` … ``start + count - 1`` of one run's stream."""
    return [ProviderFrame(
        frame_id=f"{run_id}-stream:{index}", run_key=run_id, provider="openai",
        api="openai-responses", transport="sse", received_at=1_700_000_000_000 + index,
        content_type="text/event-stream", tenant=TENANT, stream_id=f"{run_id}-stream",
        index=index, sse_event="response.output_text.delta",
        body=orjson.dumps({"type": "response.output_text.delta", "delta": f"word {index} ",
                           "sequence_number": index}))
        for index in range(start, start + count)]


def sample(gateway, name: str) -> float:
    return gateway.metrics.registry.get_sample_value(name) or 0.0


async def main(bootstrap: str, prefix: str, partitions: int, directory: Path, instance: str,
               runs: int, per_run: int) -> None:
    settings = PipelineSettings(bootstrap_servers=bootstrap, topic_prefix=prefix,
                                partitions=partitions)
    config = GatewayConfig(kafka=settings, instance_id=instance,
                           journal=JournalConfig(directory=directory, deadline_s=0.5))
    app = create_app(config)
    async with app.router.lifespan_context(app):
        gateway = app.state.gateway
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        for index in range(per_run):
            for run in range(runs):
                gateway.tee.offer(stream(f"killed-{run}", index, 1), TENANT)
            await asyncio.sleep(0.005)  # streams arrive over time
        while sample(gateway, "modelevents_gateway_frames_spooled_total") < runs * per_run:
            await asyncio.sleep(0.05)
        print("spooled", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    bootstrap, prefix, partitions, directory, instance, runs, per_run = sys.argv[1:]
    asyncio.run(main(bootstrap, prefix, int(partitions), Path(directory), instance, int(runs),
                     int(per_run)))
