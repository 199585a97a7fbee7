"""Kafka plumbing shared by every part of the pipeline: producers, consumers, reading a topic.

One place decides how modelevents talks to Kafka, so the gateway, the feeder, the processor's
helpers and the CLI all get the same guarantees:

* producers are idempotent with ``acks="all"``: a retried send never writes a second copy, and
  an acknowledged record is on every in-sync replica (docs/design-notes.md: answer 2xx
  only after Kafka acknowledged the frame);
* keys are the UTF-8 bytes of the run key / run id, so all records of a run land on one partition
  (aiokafka's default partitioner is murmur2, the same as Java clients and Faust);
* values are the contract records in Avro single-object encoding (``schemas.codec``);
* every client connects as ``settings.security`` says (TLS, SASL: services/kafka/security.py);
* a broker that cannot be reached is a :class:`KafkaUnavailable` that names the address and says
  how to start the local broker, not a stack trace from aiokafka; credentials or certificates
  the brokers refuse are a :class:`KafkaAuthenticationFailed` that names the settings to check.

Public API::

    producer = await start_producer(settings)                  # started; call `await producer.stop()`
    consumer = make_consumer(settings, "events", group_id=None)  # not started
    admin = await start_client(make_admin(settings), settings)  # topic administration
    await start_client(consumer, settings)                     # start() with the clear error
    meta = await produce_frame(producer, settings, frame)      # waits for the broker's ack
    fut = await send_record(producer, settings, "events", run_id, event)  # pipelined
    metas = await await_acks(settings, [fut, ...])             # acks, with the clear errors
    async for rec in read_records(settings, "events", run_id=..., timeout=5.0, until=pred):
        rec.value                                              # the decoded record (or rec.error)
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.conn import create_conn
from aiokafka.errors import (
    AuthenticationFailedError,
    IllegalSaslStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    SaslAuthenticationFailed,
    UnknownTopicOrPartitionError,
    UnsupportedSaslMechanismError,
)
from aiokafka.partitioner import DefaultPartitioner

from modelevents.schemas import codec
from modelevents.schemas.errors import ConfigError, ModelEventsError, SchemaError
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.pieces import split_frame
from modelevents.services.errors import KafkaAuthenticationFailed, KafkaUnavailable
from modelevents.services.kafka.settings import TOPICS, PipelineSettings

__all__ = [
    "KafkaUnavailable",
    "KafkaAuthenticationFailed",
    "Record",
    "start_producer",
    "make_producer",
    "make_consumer",
    "make_admin",
    "start_client",
    "assign_partitions",
    "LIVE_FETCH_MAX_WAIT_MS",
    "run_key_bytes",
    "partition_for_key",
    "RunKeyPartitioner",
    "topic_name",
    "send_record",
    "produce_frame",
    "send_frame",
    "await_acks",
    "read_records",
]

# Throughput defaults for the producer. A few ms of linger lets the feeder and the gateway fill
# batches (aiokafka sends one request per batch and partition); 256 KiB batches hold a few hundred
# frames of a typical SSE stream. The broker's default message.max.bytes (1 MiB) still bounds a
# single record.
PRODUCER_LINGER_MS = 5
PRODUCER_BATCH_BYTES = 256 * 1024

# The fetch wait of a live reader of several partitions (the gateway's tail of ``events``,
# ``read_records`` of a whole topic). aiokafka leaves a partition whose fetched records still
# wait to be taken out of its next fetch, and the broker holds a fetch up to fetch_max_wait_ms
# (default 500) while its partitions have nothing new: on a busy machine, where the records
# wait a moment, a partition's next records waited for that fetch, up to half a second (a
# live reader's p99). The cost of a short wait: ten empty fetches a second idle.
LIVE_FETCH_MAX_WAIT_MS = 100

_HOW_TO_START = (
    "start the project's local broker with `modelevents kafka start` (its port is "
    "$MODELEVENTS_KAFKA_PORT, default 9092), or point KAFKA_BOOTSTRAP_SERVERS at a running cluster"
)


@dataclass(frozen=True, slots=True)
class Record:
    """One record read from a topic: where it is, its key, and its decoded contract record.

    ``value`` is a ModelEvent, ProviderFrame, RunState or DeadLetter; when the bytes cannot be
    decoded ``value`` is None and ``error`` says why (the raw bytes stay in ``raw``).
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    raw: bytes | None
    value: Any
    error: str | None = None

    @property
    def key_text(self) -> str | None:
        return None if self.key is None else self.key.decode("utf-8", "replace")


def run_key_bytes(key: str) -> bytes:
    """The Kafka key of a run: its run key (frames, dlq) or run id (ingest, events, runs) in UTF-8."""
    if not key:
        raise ConfigError("a run key must not be empty: every record of a run is keyed by it")
    return key.encode("utf-8")


_MURMUR_M = 0x5BD1E995
_WORDS = struct.Struct("<I").iter_unpack


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``org.apache.kafka.common.utils.Utils.murmur2``), equal to aiokafka's
    ``aiokafka.partitioner.murmur2`` (a property test says so) at about 2.5× its speed: whole
    words unpacked at once, and no masking where the value cannot exceed 32 bits."""
    length = len(data)
    h = 0x9747B28C ^ length
    whole = length & ~3
    m = _MURMUR_M
    for (k,) in _WORDS(data[:whole]):
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        h = ((h * m) & 0xFFFFFFFF) ^ ((k * m) & 0xFFFFFFFF)
    extra = length & 3
    if extra >= 3:
        h ^= data[whole + 2] << 16
    if extra >= 2:
        h ^= data[whole + 1] << 8
    if extra >= 1:
        h ^= data[whole]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    return h ^ (h >> 15)


@lru_cache(maxsize=1 << 16)
def _key_hash(key: bytes) -> int:
    # A pure-Python murmur2 costs microseconds a key (aiokafka's ~7 µs, this one ~3 µs), once
    # per run and output topic otherwise: a run's records all share one key, so it is cached.
    return murmur2(key) & 0x7FFFFFFF


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition aiokafka's (and Java's, and Faust's) default partitioner picks for ``key``."""
    return _key_hash(key) % partitions


class RunKeyPartitioner:
    """aiokafka's DefaultPartitioner (murmur2, as Java clients and Faust) with the key hash cached."""

    _default = DefaultPartitioner()

    def __call__(self, key: bytes | None, all_partitions: list[int], available: list[int]) -> int:
        if key is None:
            return self._default(key, all_partitions, available)
        return all_partitions[_key_hash(key) % len(all_partitions)]


def topic_name(settings: PipelineSettings, name: str) -> str:
    """A logical topic name (``events``) becomes its full name (``modelevents.events``); a name that
    is not one of the pipeline's topics is taken as a full topic name as it stands."""
    return settings.topic(name) if name in TOPICS else name


async def start_client(client: Any, settings: PipelineSettings) -> Any:
    """``await client.start()`` for a producer, consumer or admin client, turning an unreachable
    broker into :class:`KafkaUnavailable` and refused credentials or certificates into
    :class:`KafkaAuthenticationFailed`. The client is closed again when it cannot start."""
    try:
        await client.start()
    except (KafkaConnectionError, KafkaTimeoutError, OSError) as exc:
        await _close_quietly(client)
        if settings.security.protocol != "PLAINTEXT":
            await _diagnose(settings)
        raise KafkaUnavailable(settings.bootstrap_servers, str(exc) or type(exc).__name__) from exc
    return client


# What a broker answers to credentials it does not accept (aiokafka raises these from the SASL
# handshake; its bootstrap logs them and reports only "Unable to bootstrap").
_REFUSED_SASL = (SaslAuthenticationFailed, AuthenticationFailedError, UnsupportedSaslMechanismError,
                 IllegalSaslStateError)
_DIAGNOSE_TIMEOUT_S = 15.0


async def _diagnose(settings: PipelineSettings) -> None:
    """After a failed bootstrap with TLS or SASL: connect once to each bootstrap server as the
    clients do, and raise KafkaAuthenticationFailed if a server refused the credentials or the
    TLS handshake (bounded; a server that is merely down is left to KafkaUnavailable)."""
    security = settings.security
    for server in settings.bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        if not host or not port.isdigit():
            continue
        try:
            conn = await asyncio.wait_for(
                create_conn(host.strip("[]"), int(port), client_id=f"{settings.app_id}-check",
                            request_timeout_ms=int(_DIAGNOSE_TIMEOUT_S * 1000),
                            **security.client_options()),
                _DIAGNOSE_TIMEOUT_S)
        except _REFUSED_SASL as exc:
            raise KafkaAuthenticationFailed(
                settings.bootstrap_servers, security.describe(), _broker_message(exc),
                "check KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD (or KAFKA_SASL_PASSWORD_FILE) and "
                "KAFKA_SASL_MECHANISM against the user the cluster has") from None
        except (TimeoutError, KafkaError, OSError) as exc:
            # A broker that refuses the client's certificate (or its absence) does so after the
            # client's side of the handshake: aiokafka reports a closed connection, caused by
            # the TLS alert.
            refused = exc if isinstance(exc, ssl.SSLError) else exc.__cause__
            if not isinstance(refused, ssl.SSLError):
                continue
            raise KafkaAuthenticationFailed(
                settings.bootstrap_servers, security.describe(),
                f"TLS handshake failed: {refused.reason or refused}",
                "check KAFKA_SSL_CAFILE (the CA that signed the brokers' certificates; their "
                "names must match the bootstrap addresses) and, where the brokers require "
                "client certificates (mutual TLS), KAFKA_SSL_CERTFILE / KAFKA_SSL_KEYFILE") from None
        with contextlib.suppress(Exception):
            conn.close()


def _broker_message(exc: Exception) -> str:
    # aiokafka's text is "[Error 58] SaslAuthenticationFailed: <the broker's message>".
    text = str(exc).strip() or type(exc).__name__
    return text.split(": ", 1)[-1] if text.startswith("[Error") else text


async def _close_quietly(client: Any) -> None:
    close = getattr(client, "stop", None) or client.close
    try:
        await close()
    except Exception:
        pass


async def start_producer(settings: PipelineSettings, **overrides: Any) -> AIOKafkaProducer:
    """A started idempotent producer (``acks="all"``) with batching for throughput.

    ``overrides`` go to :class:`AIOKafkaProducer` (e.g. ``linger_ms=0`` for lowest latency).
    """
    return await start_client(make_producer(settings, **overrides), settings)


def make_producer(settings: PipelineSettings, **overrides: Any) -> AIOKafkaProducer:
    """The producer :func:`start_producer` starts, not started."""
    options: dict[str, Any] = {
        **settings.client_options(),
        "client_id": f"{settings.app_id}-producer",
        "acks": "all",
        "enable_idempotence": True,
        "linger_ms": PRODUCER_LINGER_MS,
        "max_batch_size": PRODUCER_BATCH_BYTES,
        "partitioner": RunKeyPartitioner(),
    }
    options.update(overrides)
    if options.get("enable_idempotence") and options.get("acks") != "all":
        raise ConfigError("an idempotent producer needs acks='all'; drop the acks override")
    return AIOKafkaProducer(**options)


def make_admin(settings: PipelineSettings) -> AIOKafkaAdminClient:
    """An admin client (topic administration) of the pipeline's cluster; not started."""
    return AIOKafkaAdminClient(**settings.client_options(), client_id=f"{settings.app_id}-admin")


def make_consumer(settings: PipelineSettings, *topics: str, group_id: str | None = None,
                  from_beginning: bool = True, **kw: Any) -> AIOKafkaConsumer:
    """A consumer of ``topics`` (logical names such as ``"events"`` or full names); not started.

    Without ``group_id`` the consumer joins no group: it reads every partition and commits nothing
    (what tail, tests and one-off readers want). ``from_beginning`` picks where a consumer without
    committed offsets starts. ``kw`` go to :class:`AIOKafkaConsumer`. Start it with
    :func:`start_client` to get the clear error when the broker is down.
    """
    options: dict[str, Any] = {
        **settings.client_options(),
        "group_id": group_id,
        "auto_offset_reset": "earliest" if from_beginning else "latest",
        # A group member commits explicitly after it has processed a batch (at-least-once);
        # auto-commit could commit records that were fetched but not yet processed.
        "enable_auto_commit": False,
    }
    options.update(kw)
    return AIOKafkaConsumer(*(topic_name(settings, t) for t in topics), **options)


async def assign_partitions(consumer: AIOKafkaConsumer, settings: PipelineSettings, topic: str,
                            *, key: bytes | None = None) -> list[TopicPartition]:
    """Assign ``consumer`` (started, no group) every partition of ``topic`` (logical or full
    name), or only the one ``key`` maps to; the partitions assigned. ConfigError when the topic
    does not exist."""
    full = topic_name(settings, topic)
    # consumer.topics() would drop the partition map; read the cluster metadata it fetched.
    cluster = await consumer._client.fetch_all_metadata()
    partitions = cluster.partitions_for_topic(full)
    if not partitions:
        raise _unknown_topic(settings, full)
    if key is not None:
        partitions = {partition_for_key(key, len(partitions))}
    assigned = [TopicPartition(full, p) for p in sorted(partitions)]
    consumer.assign(assigned)
    return assigned


def _unknown_topic(settings: PipelineSettings, topic: str) -> ConfigError:
    return ConfigError(
        f"topic {topic} does not exist on {settings.bootstrap_servers} (broker auto-create is off); "
        f"create the pipeline's topics with `modelevents topics create --prefix {settings.topic_prefix}`")


async def send_record(producer: AIOKafkaProducer, settings: PipelineSettings, topic: str, key: str,
                      obj: Any) -> asyncio.Future:
    """Queue one contract record on ``topic`` keyed by ``key``; returns the delivery future.

    Await the future for the broker's acknowledgement. Queueing many records before awaiting their
    futures is what makes a producer fast (one request per batch, not per record).
    """
    full = topic_name(settings, topic)
    try:
        return await producer.send(full, key=run_key_bytes(key), value=codec.encode(obj))
    except UnknownTopicOrPartitionError as exc:
        raise _unknown_topic(settings, full) from exc
    except KafkaConnectionError as exc:
        raise KafkaUnavailable(settings.bootstrap_servers, str(exc)) from exc


async def send_frame(producer: AIOKafkaProducer, settings: PipelineSettings,
                     frame: ProviderFrame) -> asyncio.Future:
    """Queue a ProviderFrame on the frames topic, keyed by its run key; returns the delivery future.

    A delivery too large for one record goes as its pieces (``schemas/pieces.py``), queued one
    after the other on the run's partition; the future is done when all are acknowledged."""
    pieces = split_frame(frame)
    if len(pieces) == 1:
        return await send_record(producer, settings, "frames", frame.run_key, frame)
    futures = [await send_record(producer, settings, "frames", frame.run_key, piece)
               for piece in pieces]
    last = asyncio.get_running_loop().create_future()

    def done(gathered: asyncio.Future) -> None:
        if gathered.cancelled():
            last.cancel()
        elif (error := gathered.exception()) is not None:
            last.set_exception(error)
        else:
            last.set_result(gathered.result()[-1])  # the last piece's RecordMetadata

    asyncio.gather(*futures).add_done_callback(done)
    return last


async def produce_frame(producer: AIOKafkaProducer, settings: PipelineSettings, frame: ProviderFrame):
    """Publish a ProviderFrame and wait until the broker acknowledged it (acks=all).

    Returns aiokafka's RecordMetadata (topic, partition, offset). This is what the gateway needs
    before it answers 2xx; bulk publishers use :func:`send_frame` and await the futures later.
    """
    future = await send_frame(producer, settings, frame)
    try:
        return await future
    except UnknownTopicOrPartitionError as exc:
        raise _unknown_topic(settings, topic_name(settings, "frames")) from exc
    except KafkaTimeoutError as exc:
        raise KafkaUnavailable(settings.bootstrap_servers, f"no acknowledgement: {exc}") from exc


async def await_acks(settings: PipelineSettings, futures: list[asyncio.Future]) -> list[Any]:
    """Wait for the delivery futures of :func:`send_record` / :func:`send_frame`; RecordMetadata
    of each. Failures become the package's errors (unreachable broker, missing topic)."""
    try:
        return await asyncio.gather(*futures)
    except UnknownTopicOrPartitionError as exc:
        raise ConfigError(f"a topic disappeared or does not exist on {settings.bootstrap_servers}; "
                          f"run `modelevents topics create --prefix {settings.topic_prefix}`") from exc
    except (KafkaConnectionError, KafkaTimeoutError) as exc:
        raise KafkaUnavailable(settings.bootstrap_servers, f"no acknowledgement: {exc}") from exc
    except KafkaError as exc:
        raise ModelEventsError(f"Kafka at {settings.bootstrap_servers} refused a record: {exc!r}") from exc


def decode_record(msg: Any) -> Record:
    """A consumed aiokafka message as a Record, its value decoded (or ``error`` set)."""
    value: Any = None
    error: str | None = None
    if msg.value is None:
        error = "tombstone (null value)"
    else:
        try:
            value = codec.decode(msg.value)
        except SchemaError as exc:
            error = str(exc)
    return Record(msg.topic, msg.partition, msg.offset, msg.timestamp, msg.key, msg.value, value, error)


async def read_records(settings: PipelineSettings, topic: str, *, run_id: str | None = None,
                       timeout: float = 10.0, until: Callable[[Any], bool] | None = None,
                       from_beginning: bool = True, poll_ms: int = 200,
                       idle_tick: float | None = None,
                       to_end: bool = False,
                       keys: Callable[[bytes | None], bool] | None = None,
                       ) -> AsyncIterator[Record | None]:
    """Read ``topic`` (logical or full name) without a consumer group and yield decoded records.

    * ``run_id``: only records whose key is this run key / run id; only the partition the default
      partitioner maps it to is read.
    * ``keys``: with ``run_id``, which keys of that partition to yield instead of the run id
      alone (the pieces of an input packet have keys of their own: ``run_input_pieces.py``).
    * ``timeout``: stop after this many seconds without a (matching) record — an idle timeout.
    * ``until(value)``: stop right after yielding the first record for which it returns True
      (e.g. the run's terminal RunState). Records that cannot be decoded are yielded with
      ``value=None`` and ``error`` set, and are not passed to ``until``.
    * ``from_beginning``: start at the earliest offset (default) or only read what arrives next.
    * ``idle_tick``: yield ``None`` after each this many seconds without a matching record (a
      follower that keeps a connection alive meanwhile); without it only records are yielded.
    * ``to_end``: stop once every partition read reached the end offset it had when reading
      began (what the topic holds now), rather than waiting for more.

    Raises :class:`KafkaUnavailable` when the broker cannot be reached and ConfigError when the
    topic does not exist.
    """
    wanted = run_key_bytes(run_id) if run_id is not None else None
    # Reading every partition, a short fetch wait (LIVE_FETCH_MAX_WAIT_MS says why).
    tuning: dict[str, Any] = {} if wanted is not None else {
        "fetch_max_wait_ms": LIVE_FETCH_MAX_WAIT_MS}
    consumer = make_consumer(settings, from_beginning=from_beginning, **tuning)
    await start_client(consumer, settings)
    try:
        assigned = await assign_partitions(consumer, settings, topic, key=wanted)
        if from_beginning:
            await consumer.seek_to_beginning(*assigned)
        else:
            await consumer.seek_to_end(*assigned)
        ends = await consumer.end_offsets(assigned) if to_end else {}
        idle_since = ticked = time.monotonic()
        while True:
            # Compaction can leave an end offset beyond the last record: compare positions.
            if to_end and all([await consumer.position(tp) >= end for tp, end in ends.items()]):
                return
            now = time.monotonic()
            remaining = timeout - (now - idle_since)
            if remaining <= 0:
                return
            if idle_tick is not None and now - max(idle_since, ticked) >= idle_tick:
                ticked = now
                yield None
            try:
                batches = await consumer.getmany(*assigned, timeout_ms=int(min(remaining * 1000, poll_ms)) or 1)
            except KafkaError as exc:
                raise KafkaUnavailable(settings.bootstrap_servers, str(exc)) from exc
            # Per partition the records are in offset order; across partitions no order exists.
            for messages in batches.values():
                for msg in messages:
                    if wanted is not None and (msg.key != wanted if keys is None
                                               else not keys(msg.key)):
                        continue
                    idle_since = time.monotonic()
                    record = decode_record(msg)
                    yield record
                    if until is not None and record.error is None and until(record.value):
                        return
    finally:
        await consumer.stop()
