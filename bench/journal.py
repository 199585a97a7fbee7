"""The frame tee's figures (services/gateway/spool/journal.py), on a broker of its own, in one run.

    .venv/bin/python bench/journal.py                 # --frames 50000 --rounds 3 --chunk 8

- (a) direct: the gateway's producer, every frame sent (``send_frame``) and its ack awaited, as
  fast as it goes — the baseline;
- (b) tee: the same frames offered to ``Gateway.tee`` (``--chunk`` frames an offer, as a proxy
  offers a stream's pieces), until Kafka acknowledged the last; (b)/(a) of each round (they
  take turns, so a round's two share the machine's mood), and what one ``offer()`` call costs
  the proxy (p50/p99 per call);
- (c) spool: the broker stopped, the frames offered, until all are in the journal (on disk,
  fsynced), and (d) drain: the broker started again, from the first frame drained until the
  journal is empty.

(a) and (b) take turns ``--rounds`` times on topics of their own; medians are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson

from modelevents.schemas.frames import ProviderFrame
from modelevents.services.gateway.calls.capabilities import MANIFEST_PATH, load_manifest
from modelevents.services.gateway.config import GatewayConfig, JournalConfig
from modelevents.services.gateway.spool.journal import JournalTee, journal_directory
from modelevents.services.gateway.state import Gateway
from modelevents.services.kafka import topics
from modelevents.services.kafka.clients import await_acks, send_frame, start_producer
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local import kafka_broker


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def frames_of(count: int, runs: int = 100) -> list[ProviderFrame]:
    """``count`` frames of ``runs`` interleaved streams, each a Responses text delta (~190 B)."""
    frames = []
    for index in range(count):
        run_id, position = f"run-{index % runs}", index // runs
        body = orjson.dumps({"type": "response.output_text.delta", "item_id": f"msg_{run_id}",
                             "output_index": 0, "content_index": 0, "delta": " the next words",
                             "sequence_number": position})
        frames.append(ProviderFrame(
            frame_id=f"{run_id}:{position}", run_key=run_id, provider="openai",
            api="openai-responses", transport="sse", received_at=1_700_000_000_000,
            content_type="text/event-stream", body=body, stream_id=run_id, index=position,
            sse_event="response.output_text.delta"))
    return frames


def sample(gateway: Gateway, name: str) -> float:
    return gateway.metrics.registry.get_sample_value(name) or 0.0


async def until(holds: Any, poll: float = 0.001) -> float:
    while not holds():
        await asyncio.sleep(poll)
    return time.perf_counter()


async def direct(settings: PipelineSettings, frames: list[ProviderFrame]) -> tuple[float, float]:
    """(a): frames/s through the producer alone, and this process's CPU seconds a frame."""
    producer = await start_producer(settings)
    try:
        started, cpu = time.perf_counter(), time.process_time()
        futures = [await send_frame(producer, settings, frame) for frame in frames]
        await await_acks(settings, futures)
        return (len(frames) / (time.perf_counter() - started),
                (time.process_time() - cpu) / len(frames))
    finally:
        await producer.stop()


def make_tee(gateway: Gateway) -> JournalTee:
    config = gateway.config
    return JournalTee(config.journal, journal_directory(config),
                      lambda batch: gateway.publish_all(batch, within=config.journal.deadline_s),
                      gateway.kafka_answers, gateway.metrics)


async def with_tee(settings: PipelineSettings, journal_root: Path, work: Any) -> Any:
    config = GatewayConfig(kafka=settings, instance_id=f"bench-{uuid.uuid4().hex[:6]}",
                           journal=JournalConfig(directory=journal_root))
    producer = await start_producer(settings)
    gateway = Gateway(config, producer, manifest=load_manifest(MANIFEST_PATH))
    tee = make_tee(gateway)
    await tee.start()
    try:
        return await work(gateway, tee)
    finally:
        await tee.stop()
        await producer.stop()


def offer_all(tee: JournalTee, frames: list[ProviderFrame], chunk: int) -> list[float]:
    """Offer ``frames`` ``chunk`` at a time; the seconds each offer() took."""
    took = []
    for start in range(0, len(frames), chunk):
        began = time.perf_counter()
        tee.offer(frames[start:start + chunk], "default")
        took.append(time.perf_counter() - began)
    return took


async def teed(settings: PipelineSettings, journal_root: Path, frames: list[ProviderFrame],
               chunk: int) -> tuple[float, float, list[float]]:
    """(b): frames/s through offer() until Kafka acknowledged the last, CPU seconds a frame,
    and offer() call times."""

    async def work(gateway: Gateway, tee: JournalTee) -> tuple[float, float, list[float]]:
        written = "modelevents_gateway_frames_written_total"
        labels = {"provider": "openai", "api": "openai-responses", "transport": "sse"}
        started, cpu = time.perf_counter(), time.process_time()
        took: list[float] = []
        for start in range(0, len(frames), chunk * 100):
            took += offer_all(tee, frames[start:start + chunk * 100], chunk)
            await asyncio.sleep(0)  # a proxy's streams yield to the loop between pieces
        ended = await until(lambda: (gateway.metrics.registry.get_sample_value(written, labels)
                                     or 0) >= len(frames), poll=0.005)
        return (len(frames) / (ended - started), (time.process_time() - cpu) / len(frames),
                took)

    return await with_tee(settings, journal_root, work)


async def outage(settings: PipelineSettings, broker: kafka_broker.LocalBrokerSettings,
                 journal_root: Path, frames: list[ProviderFrame], chunk: int
                 ) -> tuple[float, float]:
    """(c) spool and (d) drain, frames/s."""

    async def work(gateway: Gateway, tee: JournalTee) -> tuple[float, float]:
        await asyncio.to_thread(kafka_broker.stop, broker)
        tee.offer(frames[:1], "default")  # the first batch waits out the deadline
        await until(lambda: sample(gateway, "modelevents_gateway_frames_spooled_total") >= 1,
                    poll=0.01)
        started = time.perf_counter()
        offer_all(tee, frames[1:], chunk)
        spooled = await until(lambda: sample(
            gateway, "modelevents_gateway_frames_spooled_total") >= len(frames))
        await asyncio.to_thread(kafka_broker.start, broker)
        drained = "modelevents_gateway_frames_drained_total"
        first = await until(lambda: sample(gateway, drained) > 0, poll=0.01)
        last = await until(lambda: sample(gateway, drained) >= len(frames))
        return (len(frames) - 1) / (spooled - started), len(frames) / (last - first)

    return await with_tee(settings, journal_root, work)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=8, help="frames per offer()")
    parser.add_argument("--port", type=int, default=19930, help="port of the bench's own broker")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="modelevents-bench-journal-"))
    broker = kafka_broker.LocalBrokerSettings(port=args.port, state_root=workdir / "kafka",
                                              heap="512m")
    started = kafka_broker.start(broker, fresh=True, progress=lambda line: say(f"  {line}"))
    frames = frames_of(args.frames)
    try:
        def fresh() -> PipelineSettings:
            settings = PipelineSettings(bootstrap_servers=started.bootstrap_servers,
                                        topic_prefix=f"bench{uuid.uuid4().hex[:6]}.")
            asyncio.run(topics.ensure_topics(settings))
            return settings

        rates: dict[str, list[float]] = {"direct": [], "tee": []}
        cpu: dict[str, list[float]] = {"direct": [], "tee": []}
        calls: list[float] = []
        for round_ in range(args.rounds):
            rate, per_frame = asyncio.run(direct(fresh(), frames))
            rates["direct"].append(rate)
            cpu["direct"].append(per_frame)
            rate, per_frame, took = asyncio.run(teed(fresh(), workdir / "journal", frames,
                                                     args.chunk))
            rates["tee"].append(rate)
            cpu["tee"].append(per_frame)
            calls += took
            say(f"round {round_ + 1}: direct {rates['direct'][-1]:,.0f} frames/s, "
                f"tee {rate:,.0f} frames/s")
        spool, drain = asyncio.run(outage(fresh(), broker, workdir / "journal", frames,
                                          args.chunk))
    finally:
        if started.started:
            kafka_broker.stop(broker)
        shutil.rmtree(workdir, ignore_errors=True)
    a, b = statistics.median(rates["direct"]), statistics.median(rates["tee"])
    calls.sort()
    per_call = [calls[len(calls) // 2], calls[int(len(calls) * 0.99)]]
    print(f"\n{args.frames:,} frames (~{len(frames[0].body)} B bodies, 100 runs), "
          f"{args.chunk} an offer, {args.rounds} rounds\n")
    print("| figure | value |\n|---|---:|")
    print(f"| (a) direct: producer send + ack, median ({min(rates['direct']):,.0f}–"
          f"{max(rates['direct']):,.0f}) | {a:,.0f} frames/s |")
    ratios = [tee / baseline for tee, baseline in zip(rates["tee"], rates["direct"])]
    print(f"| (b) offer() → Kafka acknowledged, median ({min(rates['tee']):,.0f}–"
          f"{max(rates['tee']):,.0f}) | {b:,.0f} frames/s |")
    print(f"| (b)/(a), each round's, median ({min(ratios):.0%}–{max(ratios):.0%}) | "
          f"{statistics.median(ratios):.0%} |")
    print(f"| this process's CPU a frame, median, (a) / (b) | "
          f"{statistics.median(cpu['direct']) * 1e6:.1f} µs / "
          f"{statistics.median(cpu['tee']) * 1e6:.1f} µs |")
    print(f"| one offer() of {args.chunk} frames, p50 / p99 | {per_call[0] * 1e6:.1f} µs / "
          f"{per_call[1] * 1e6:.1f} µs |")
    print(f"| (c) spool: broker stopped, offered → in the journal (fsynced) | {spool:,.0f} "
          f"frames/s |")
    print(f"| (d) drain: broker back, journal → Kafka acknowledged | {drain:,.0f} frames/s |")


if __name__ == "__main__":
    main()
