"""Writing a forwarded body's frames, and a truthful answer when not all of them were written.

A body is cut into many records, sent pipelined: when Kafka refuses one or does not acknowledge
all of them in ``ack_timeout_s``, the records before (and sometimes after) it are written
already. So the answer counts what Kafka acknowledged — ``kept`` of ``frames``, the index of
the first frame not kept — names the cause, and says what to do:

    a record larger than the frames topic takes (its ``max.message.bytes``, or the broker's
    ``message.max.bytes``, below the 1,000,000 bytes a record of this project may have)
                                                   413  record_too_large: the operator raises it
    no acknowledgement in time, a broker not reachable, a topic missing
                                                   503  kafka_unavailable: send the same body
                                                        again; frame ids are {stream}:{index},
                                                        so the worker drops the copies
    a frame the gateway could not encode           500  internal (its error id in the log)

A frame not acknowledged in time may still be written afterwards; the retry is safe either way.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from aiokafka.errors import (
    KafkaError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    UnknownTopicOrPartitionError,
)

from modelevents.schemas import codec
from modelevents.schemas.errors import ModelEventsError
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.limits import MAX_RECORD_BYTES
from modelevents.services.errors import how_to_reach_kafka
from modelevents.services.gateway.errors import internal
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode
from modelevents.services.kafka.clients import PRODUCER_BATCH_BYTES, send_frame
from modelevents.services.kafka.settings import PipelineSettings

if TYPE_CHECKING:
    from aiokafka import AIOKafkaProducer

__all__ = ["Unkept", "Writer", "publish_body"]

log = logging.getLogger("modelevents.gateway")

_TOO_LARGE = (MessageSizeTooLargeError, RecordListTooLargeError)


class _Deadlines(Protocol):
    @property
    def ack_timeout_s(self) -> float: ...


class Writer(Protocol):
    """What a body's writing needs of the gateway (``state.Gateway`` is one)."""

    producer: AIOKafkaProducer

    @property
    def config(self) -> _Deadlines: ...

    @property
    def settings(self) -> PipelineSettings: ...

    def count_written(self, frames: list[ProviderFrame]) -> None: ...


@dataclass
class Unkept:
    """What of a body Kafka did not acknowledge, and why."""

    frames: list[ProviderFrame]  # the body's frames, then its end marker if it has one
    acked: list[bool]
    too_large: ProviderFrame | None = None
    causes: list[str] = field(default_factory=list)
    failed: ModelEventsError | None = None  # the gateway's own failure while queueing

    def problem(self, gateway: Writer, body_frames: int) -> GatewayProblem:
        """What to answer the client."""
        kept = sum(self.acked[:body_frames])
        first = next(f for f, ok in zip(self.frames, self.acked, strict=True) if not ok)
        counted = (f"{kept} of the body's {body_frames} frames were written"
                   + ("" if kept == body_frames else f" (the first not written: index "
                                                     f"{first.index})"))
        facts: dict[str, Any] = {"kept": kept, "frames": body_frames,
                                 "first_not_kept_index": first.index}
        topic = gateway.settings.topic("frames")
        if self.failed is not None:
            return internal(self.failed, f"forwarded body, frame {first.index}",
                            f"the gateway could not write frame {first.index}; {counted}",
                            **facts)
        if self.too_large is not None:
            size = len(codec.encode(self.too_large))
            return GatewayProblem(ProblemCode.record_too_large, (
                f"Kafka refused frame {self.too_large.index} ({size} bytes as a record) as too "
                f"large for {topic}: the topic's max.message.bytes (or the broker's "
                f"message.max.bytes) is below what the gateway writes — records up to "
                f"{MAX_RECORD_BYTES} bytes, in batches up to {PRODUCER_BATCH_BYTES} bytes; "
                f"{counted}. The gateway's operator raises that limit; sending this body again "
                "fails the same way until then"), **facts)
        cause = "; ".join(dict.fromkeys(self.causes)) or "no acknowledgement"
        log.warning("forwarded body: %s; %s; %s", cause, counted,
                    how_to_reach_kafka(gateway.settings.bootstrap_servers))
        return GatewayProblem(ProblemCode.kafka_unavailable, (
            f"Kafka behind the gateway did not acknowledge every frame ({cause}); {counted}"),
            **facts, retry="send the same body again: each frame's id is {stream}:{index}, so "
                           "the frames written already are dropped as copies")


def _cause(exc: BaseException, timeout_s: float) -> str:
    if isinstance(exc, UnknownTopicOrPartitionError):
        return "the frames topic does not exist: run `modelevents topics create`"
    if isinstance(exc, (TimeoutError, asyncio.CancelledError)):
        return f"no acknowledgement within ack_timeout_s ({timeout_s:g} s)"
    return f"Kafka answered {exc.__class__.__name__}: {exc}"


async def publish_body(gateway: Writer, frames: list[ProviderFrame]) -> Unkept | None:
    """Write ``frames`` (pipelined) and wait up to ``ack_timeout_s`` for every acknowledgement:
    None when Kafka acknowledged them all, else what it did not."""
    timeout_s = gateway.config.ack_timeout_s
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    futures: list[asyncio.Future[Any]] = []
    causes: list[str] = []
    failed: ModelEventsError | None = None
    try:
        async with asyncio.timeout_at(deadline):
            for frame in frames:
                futures.append(await send_frame(gateway.producer, gateway.settings, frame))
    except (TimeoutError, KafkaError) as exc:  # queueing stopped half-way
        causes.append(_cause(exc, timeout_s))
    except ModelEventsError as exc:  # a frame the gateway could not encode: its own failure
        failed = exc
    if futures:
        await asyncio.wait(futures, timeout=max(0.0, deadline - loop.time()))
    acked = [f.done() and not f.cancelled() and f.exception() is None for f in futures]
    acked += [False] * (len(frames) - len(futures))
    gateway.count_written([f for f, ok in zip(frames, acked, strict=True) if ok])
    if all(acked):
        return None
    unkept = Unkept(frames, acked, causes=causes, failed=failed)
    for frame, future in zip(frames, futures, strict=False):
        if not future.done():
            # Still on its way: it may be written yet; its outcome is nobody's to read.
            future.add_done_callback(lambda f: f.cancelled() or f.exception())
            unkept.causes.append(_cause(TimeoutError(), timeout_s))
        elif not future.cancelled() and (refused := future.exception()) is not None:
            if isinstance(refused, _TOO_LARGE) and unkept.too_large is None:
                unkept.too_large = frame
            unkept.causes.append(_cause(refused, timeout_s))
    return unkept
