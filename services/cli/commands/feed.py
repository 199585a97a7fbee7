"""``modelevents feed``: publish a recorded provider stream on the frames topic, as the gateway would."""

from __future__ import annotations

import argparse
import sys

from modelevents.adapters.registry import CLI_CHOICES
from modelevents.schemas.end_of_input import with_end_markers
from modelevents.schemas.errors import ConfigError, InputError
from modelevents.services.cli.input_limits import (
    add_input_limit_options,
    limits_from_args,
)
from modelevents.services.cli.kafka_options import (
    ENV_HELP,
    add_kafka_options,
    positive_float,
    run_async,
    settings_from_args,
)
from modelevents.services.kafka import clients, topics
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.local import feeder

FORMATS = ("auto", "sse", "jsonl", "json-array", "json", "cassette")


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number between 0 and 1") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 1")
    return value



def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "feed",
        help="publish a recorded provider stream on the frames topic, as the gateway would",
        description="Cut a recorded provider stream (SSE, JSON lines, a streamed JSON array, one "
                    "JSON object such as a poll response or an error body, or a VCR cassette) into "
                    "ProviderFrames exactly as the gateway publishes them — API and provider "
                    "detected and stamped, keyed by the run key, deterministic frame ids, the same "
                    "run id as `modelevents normalize` — and publish them on the frames topic "
                    "with an idempotent producer (acks=all), each frame stamped with the time it is "
                    "sent as its received_at (the gateway stamps a frame when it receives it; "
                    "the run's times and duration come from these). Optionally duplicate frames "
                    "(the same "
                    "frame sent again, as a retried delivery) and pace the sends. Progress goes "
                    "to stderr; a summary (frames, duplicates, run id) to stdout at the end. The "
                    "whole input is read and checked against the input limits before the first "
                    "frame is sent: a hostile or broken input publishes nothing.",
        epilog=ENV_HELP + " The topics must exist: `modelevents topics create`.")
    p.add_argument("file", help="the recorded input, or - for standard input")
    p.add_argument("--provider", default="auto", choices=CLI_CHOICES, metavar="API",
                   help="provider API of the input (default: detect); one of "
                        + ", ".join(CLI_CHOICES))
    p.add_argument("--format", default="auto", choices=FORMATS,
                   help="framing of the input (default: detect)")
    p.add_argument("--run-id", help="run id / run key of the frames (default: as normalize "
                                    "derives it, file name + content hash)")
    p.add_argument("--tenant", default=None,
                   help="tenant stamped on the frames (default: $MODELEVENTS_TENANT or default)")
    p.add_argument("--duplicate", type=_fraction, default=0.0, metavar="RATE",
                   help="probability (0..1) that a frame is sent a second time, right after or a "
                        "few frames later, with the same frame id and bytes (default 0)")
    p.add_argument("--rate", type=positive_float, default=None, metavar="FRAMES_PER_S",
                   help="send at most this many records per second, duplicates included "
                        "(default: as fast as Kafka takes them)")
    p.add_argument("--seed", type=int, default=0, help="seed of the duplicate choice (default 0)")
    p.add_argument("--no-end-of-input", dest="end_of_input", action="store_false",
                   help="do not follow each stream and the run with an end-of-input marker (the "
                        "run then stays open, as a live stream that has not ended yet; by default "
                        "the markers tell the pipeline the recording ended, so a stream cut short "
                        "ends in stream_truncated as with `normalize`)")
    add_input_limit_options(p)
    add_kafka_options(p)
    p.set_defaults(run=run)


def _progress(stats: feeder.FeedStats) -> None:
    print(f"  {stats.sent} records sent ({stats.duplicates} duplicates), {stats.rate:,.0f}/s",
          file=sys.stderr, flush=True)


async def _frames_topic_exists(settings: PipelineSettings) -> None:
    # Fail fast: a producer would wait for metadata of a missing topic until its request timeout.
    infos = await topics.describe_topics(settings)
    if infos[settings.topic("frames")] is None:
        raise ConfigError(f"topic {settings.topic('frames')} does not exist on "
                          f"{settings.bootstrap_servers}; create the pipeline's topics with "
                          f"`modelevents topics create --prefix {settings.topic_prefix}`")


async def _feed(settings: PipelineSettings, fed: feeder.FeedInput, args: argparse.Namespace,
                ) -> feeder.FeedStats:
    await _frames_topic_exists(settings)
    producer = await clients.start_producer(settings)
    try:
        frames = with_end_markers(fed.frames) if args.end_of_input else fed.frames
        return await feeder.feed_frames(producer, settings, frames, duplicate=args.duplicate,
                                        rate=args.rate, seed=args.seed, progress=_progress,
                                        stamp=True)
    finally:
        await producer.stop()


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args, tenant=args.tenant)
    skipped: list[str] = []
    fed = feeder.frames_for_file(args.file, api=args.provider, framing=args.format,
                                 run_id=args.run_id, tenant=settings.tenant, on_skip=skipped.append,
                                 limits=limits_from_args(args))
    if not fed.frames:
        raise InputError(f"{args.file} holds no frames: nothing to feed")
    for line in skipped:
        print(f"  skipped {line}", file=sys.stderr)
    print(f"feeding {len(fed.frames)} frames of {fed.api} run {fed.run_id} to "
          f"{settings.topic('frames')} at {settings.bootstrap_servers}", file=sys.stderr, flush=True)
    stats = run_async(_feed(settings, fed, args))
    print(f"run        {fed.run_id}")
    print(f"api        {fed.api} ({fed.frames[0].provider}), tenant {settings.tenant}")
    print(f"topic      {settings.topic('frames')}")
    markers = stats.frames - len(fed.frames)
    print(f"frames     {len(fed.frames)}" + (f" (+{markers} end-of-input markers)" if markers else ""))
    print(f"duplicates {stats.duplicates}")
    print(f"sent       {stats.sent} records in {stats.seconds:.2f} s ({stats.rate:,.0f}/s)")
    return 0
