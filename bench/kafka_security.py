"""What TLS and SASL cost the pipeline's clients: feed and read throughput per security protocol,
as ratios to plaintext measured in the same run on the same broker.

    .venv/bin/python bench/kafka_security.py [--frames 30000] [--port 19490] [--rounds 3]

Starts one broker of its own (services/local/kafka_broker.py) with a plaintext, a
SASL_PLAINTEXT, an SSL and a SASL_SSL listener (a throw-away CA: tests/tls_certs.py), and for
each client configuration — PLAINTEXT, SASL_PLAINTEXT with PLAIN and with SCRAM-SHA-512, SSL,
SASL_SSL with SCRAM-SHA-512 — feeds the same ProviderFrames into fresh topics
(feeder.feed_frames: Avro + idempotent producer, acks=all, every ack awaited) and reads them
back (clients.read_records). The configurations take turns, ``--rounds`` times, and the best
round of each counts, so that a busy moment of a shared machine does not decide a ratio. Prints
frames/s and the ratio to PLAINTEXT for feed and read.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests/tls_certs.py, the tests' throw-away CA

from feed import build_frames, feed_and_read  # noqa: E402  (bench/feed.py, beside this file)

from modelevents.services.kafka.security import KafkaSecurity  # noqa: E402
from modelevents.services.kafka.settings import PipelineSettings  # noqa: E402
from modelevents.services.local import kafka_broker  # noqa: E402
from tests.tls_certs import make_tls_files  # noqa: E402

USER, PASSWORD = "bench", "bench-Pa55word"


def configurations(broker: kafka_broker.LocalBrokerSettings, ca: Path) -> dict[str, tuple[str, KafkaSecurity]]:
    def sasl(protocol: str, mechanism: str) -> KafkaSecurity:
        return KafkaSecurity(protocol=protocol, sasl_mechanism=mechanism, sasl_username=USER,
                             sasl_password=PASSWORD,
                             ssl_cafile=str(ca) if protocol == "SASL_SSL" else None)

    assert broker.sasl_bootstrap and broker.ssl_bootstrap and broker.sasl_ssl_bootstrap
    return {
        "PLAINTEXT": (broker.local_bootstrap, KafkaSecurity()),
        "SASL_PLAINTEXT PLAIN": (broker.sasl_bootstrap, sasl("SASL_PLAINTEXT", "PLAIN")),
        "SASL_PLAINTEXT SCRAM-SHA-512": (broker.sasl_bootstrap, sasl("SASL_PLAINTEXT", "SCRAM-SHA-512")),
        "SSL": (broker.ssl_bootstrap, KafkaSecurity(protocol="SSL", ssl_cafile=str(ca))),
        "SASL_SSL SCRAM-SHA-512": (broker.sasl_ssl_bootstrap, sasl("SASL_SSL", "SCRAM-SHA-512")),
    }


async def measure(settings: PipelineSettings, frames: list) -> tuple[float, float]:
    """(feed frames/s, read frames/s) on fresh topics, deleted afterwards."""
    stats, read, read_s = await feed_and_read(settings, frames, read_timeout=5.0)
    assert read == len(frames), f"read {read} of {len(frames)} frames"
    return stats.rate, read / read_s


async def main(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="modelevents-bench-security-"))
    tls = make_tls_files(workdir / "tls")
    broker = kafka_broker.LocalBrokerSettings(
        port=args.port, sasl_port=args.port + 2, ssl_port=args.port + 3, sasl_ssl_port=args.port + 4,
        sasl_users={USER: PASSWORD}, scram_users={USER: PASSWORD},
        ssl_server_cert=tls.server_cert, ssl_server_key=tls.server_key,
        state_root=workdir / "kafka", heap="512m")
    kafka_broker.start(broker, fresh=True, progress=lambda line: print(f"  {line}", file=sys.stderr))
    try:
        frames = build_frames(args.frames)
        print(f"{len(frames)} frames, {args.partitions} partitions, best of {args.rounds} rounds",
              file=sys.stderr)
        best: dict[str, tuple[float, float]] = {}
        for _ in range(args.rounds):
            for name, (bootstrap, security) in configurations(broker, tls.ca).items():
                settings = PipelineSettings(bootstrap_servers=bootstrap, security=security,
                                            topic_prefix=f"bench-{uuid.uuid4().hex[:8]}.",
                                            partitions=args.partitions)
                feed_rate, read_rate = await measure(settings, frames)
                previous = best.get(name, (0.0, 0.0))
                best[name] = (max(previous[0], feed_rate), max(previous[1], read_rate))
        base_feed, base_read = best["PLAINTEXT"]
        print(f"{'client':<30} {'feed/s':>10} {'× plain':>8} {'read/s':>10} {'× plain':>8}")
        for name, (feed_rate, read_rate) in best.items():
            print(f"{name:<30} {feed_rate:>10,.0f} {feed_rate / base_feed:>8.2f} "
                  f"{read_rate:>10,.0f} {read_rate / base_read:>8.2f}")
    finally:
        kafka_broker.stop(broker)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=30_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=19490)
    asyncio.run(main(parser.parse_args()))
