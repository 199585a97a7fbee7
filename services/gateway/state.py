"""What the gateway's routes share while it runs: its config, the Kafka producer, the recently
acknowledged webhook deliveries, the fetcher, and for runs the capability manifest, the HTTP
client to the providers, the calls in flight, the view of run states, the owners of run ids
(:meth:`Gateway.owner_of`, :meth:`Gateway.claim_run`: services/gateway/events/owners.py), the calls
records every replica shares (:attr:`Gateway.calls`: services/gateway/calls/records.py; this process is
``instance`` / ``incarnation`` in them) and the followers of runs' events
(services/gateway/events/followers.py).

One :class:`Gateway` lives in ``app.state.gateway`` from the app's startup to its shutdown
(``services/gateway/app.py``); routes are given it by ``Depends``
(``services/gateway/dependencies.py``). Publishing goes through
:meth:`Gateway.publish` / :meth:`Gateway.publish_all`, which wait for the broker's
acknowledgement (acks=all, idempotent producer: docs/architecture.md) but never longer than
``ack_timeout_s``: an unreachable broker is :class:`KafkaUnavailable`, which the app answers
with 503 so that the sender retries.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiokafka.errors import KafkaError

from modelevents.schemas.events import ModelEvent
from modelevents.schemas.frames import ProviderFrame
from modelevents.schemas.run_input import RunInput
from modelevents.schemas.run_input_pieces import packet_records
from modelevents.services.errors import KafkaUnavailable
from modelevents.services.gateway.config import GatewayConfig
from modelevents.services.gateway.events.topic_view import TopicView
from modelevents.services.gateway.metrics import GatewayMetrics
from modelevents.services.kafka.clients import (
    await_acks,
    partition_for_key,
    produce_frame,
    run_key_bytes,
    send_frame,
    send_record,
)
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.policy.hosted import HostedPolicy

if TYPE_CHECKING:
    import httpx
    from aiokafka import AIOKafkaProducer

    from modelevents.services.gateway.calls.capabilities import Manifest
    from modelevents.services.gateway.calls.fetch import Fetcher
    from modelevents.services.gateway.calls.in_flight import LocalRuns
    from modelevents.services.gateway.calls.records import CallsView
    from modelevents.services.gateway.events.bundles import BundleView
    from modelevents.services.gateway.events.decisions import DecisionRecords
    from modelevents.services.gateway.events.eval_results import EvalResults
    from modelevents.services.gateway.events.followers import RunFollowers
    from modelevents.services.gateway.events.owners import RunOwners
    from modelevents.services.gateway.events.run_states import RunStates
    from modelevents.services.gateway.inputs.deliveries import Deliveries
    from modelevents.services.gateway.inputs.packets import InputPackets
    from modelevents.services.gateway.spool.tee import FrameTee

__all__ = ["AckedDeliveries", "Gateway"]

# Frames encoded and queued for the producer between two yields to the event loop (about a
# millisecond's work).
_FRAMES_PER_STEP = 32


class AckedDeliveries:
    """An LRU of webhook deliveries Kafka acknowledged: ``(provider, tenant, webhook-id)``.

    A redelivery found here is answered 200 without a second write. It is an optimisation only:
    after a restart (or eviction) the delivery is written again with the same frame_id, and the
    processor's adapters drop it (dedupe by frame_id), so the guarantee does not depend on it.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._keys: OrderedDict[tuple[str, str, str], None] = OrderedDict()

    def __contains__(self, key: tuple[str, str, str]) -> bool:
        if key in self._keys:
            self._keys.move_to_end(key)
            return True
        return False

    def add(self, key: tuple[str, str, str]) -> None:
        if self.size <= 0:
            return
        self._keys[key] = None
        self._keys.move_to_end(key)
        while len(self._keys) > self.size:
            self._keys.popitem(last=False)


@dataclass
class Gateway:
    config: GatewayConfig
    producer: AIOKafkaProducer
    # Runs (POST /v1/runs): the capability manifest the router uses.
    manifest: Manifest
    # tenant → hosted-tool policy, from config.policy; None: no policy file (all allowed).
    hosted_policies: dict[str, HostedPolicy] | None = None
    # Set by the app's lifespan before any request is served (they need the gateway or the
    # running loop to be built); nothing reads them earlier.
    fetcher: Fetcher = field(init=False)
    deliveries: Deliveries = field(init=False)
    http: httpx.AsyncClient = field(init=False)
    runs: LocalRuns = field(init=False)
    run_states: RunStates = field(init=False)
    owners: RunOwners = field(init=False)
    calls: CallsView = field(init=False)
    bundles: BundleView = field(init=False)  # started by the first request naming a bundle
    incarnation: str = field(init=False)  # this process among those of its instance id
    followers: RunFollowers = field(init=False)
    # The eval results (GET /v1/evals): a view of its own, not one /readyz waits for.
    eval_results: EvalResults = field(init=False)
    # The decision records (GET /v1/decisions): a view of its own too.
    decisions: DecisionRecords = field(init=False)
    packets: InputPackets = field(init=False)
    acked: AckedDeliveries = field(init=False)
    # The drop-in proxy's frames go here: to Kafka, to the local journal while it is away
    # (services/gateway/spool/journal.py).
    tee: FrameTee = field(init=False)
    # /readyz: (monotonic time, HTTP status, body) of the last check, reused for a moment.
    ready: tuple[float, int, dict[str, str]] | None = None
    metrics: GatewayMetrics = field(default_factory=GatewayMetrics)  # the app's (GET /metrics)

    def __post_init__(self) -> None:
        self.acked = AckedDeliveries(self.config.dedupe_cache_size)
        self._keys: dict[tuple[str, str], list[bytes]] = {}

    def webhook_keys(self, provider: str, tenant: str) -> list[bytes]:
        """HMAC keys of a tenant's webhook secrets for a provider, decoded once. Only tenants
        that have secrets are remembered: a URL cannot grow this by naming tenants."""
        keys = self._keys.get((provider, tenant))
        if keys is None:
            settings = self.config.provider(provider)
            keys = settings.keys_for(tenant) if settings is not None else []
            if keys:
                self._keys[(provider, tenant)] = keys
        return keys

    def run_of_object(self, object_id: str, tenant: str) -> str | None:
        """The run of ``tenant`` a provider object belongs to, as far as this gateway knows: a
        call it made (known the moment the call names its object), else a run whose state on
        ``runs`` announced it (any gateway's). None: the processor resolves the object id."""
        run_id = self.runs.run_of_object(object_id, tenant)
        if run_id is not None:
            return run_id
        return self.run_states.run_of_object(object_id, tenant)

    def hosted_policy(self, tenant: str) -> HostedPolicy | None:
        """The tenant's hosted-tool policy: None without a policy file; a tenant the file
        does not name gets the empty policy (no hosted tool), as the tool executor's does."""
        if self.hosted_policies is None:
            return None
        return self.hosted_policies.get(tenant, HostedPolicy())

    @property
    def settings(self) -> PipelineSettings:
        return self.config.kafka

    @property
    def instance(self) -> str:
        """The instance id the calls records name (services/gateway/calls/handover.py)."""
        return self.config.instance_id

    # --- run ids and their owners (services/gateway/events/owners.py) --------------------------------

    def owner_of(self, run_id: str) -> str | None:
        """The tenant that owns ``run_id``: its first claim on ``run-owners``; for a run from
        before the claims, its state's tenant on ``runs``; None: nobody's (as far as the views
        have read)."""
        owner = self.owners.owner(run_id)
        if owner is None:
            state = self.run_states.get(run_id)
            owner = state.tenant if state is not None else None
        return owner

    @property
    def views(self) -> tuple[TopicView, ...]:
        """The views of whole topics the gateway keeps (started by the app's lifespan)."""
        return (self.owners, self.run_states, self.calls)

    def views_caught_up(self) -> bool:
        """Whether an owner not found is really nobody's (the views read their topics to the
        end they had when the gateway started)."""
        return all(view.caught_up.is_set() for view in self.views)

    async def claim_run(self, run_id: str, tenant: str, *, fresh: bool = False) -> bool:
        """Whether ``run_id`` is ``tenant``'s, claiming it when nobody owns it yet (a claim
        written, acknowledged and read back: the first claim of the id is its owner, whichever
        gateway wrote it). Nothing is written when another tenant owns it already. ``fresh``:
        the gateway made the id up just now, so no run from before the claims can have it.
        KafkaUnavailable (503) when the claim or the views cannot be read in time."""
        owners = self.owners
        if not fresh:
            # An id someone owns is found without writing anything once the views were read.
            await self._caught_up(owners)
            known = self.owner_of(run_id)
            if known is not None and known != tenant:
                return False
        owner = await owners.claim(run_id, tenant, self._publish_claim, self.config.ack_timeout_s)
        if owner is None:
            raise KafkaUnavailable(self.settings.bootstrap_servers,
                                   f"the claim of run id {run_id!r} was not read back within "
                                   f"{self.config.ack_timeout_s:g} s")
        return owner == tenant

    async def _caught_up(self, owners: RunOwners) -> None:
        views: tuple[TopicView, ...] = (owners, self.run_states)
        for view in views:  # a run from before the claims: its state
            if not await view.wait_until(view.caught_up.is_set, self.config.ack_timeout_s):
                raise KafkaUnavailable(self.settings.bootstrap_servers,
                                       f"{view.topic} not read to its end yet")

    async def _publish_claim(self, run_id: str, value: bytes) -> Any:
        topic = self.settings.topic("run-owners")
        return await self._bounded(self.producer.send_and_wait(
            topic, key=run_key_bytes(run_id), value=value))

    async def publish_call(self, key: bytes, value: bytes) -> Any:
        """Write one calls record (services/gateway/calls/records.py) and wait for its
        acknowledgement; RecordMetadata."""
        return await self._bounded(self.producer.send_and_wait(
            self.settings.topic("calls"), key=key, value=value))

    async def publish_input(self, packet: RunInput) -> Any:
        """Write one input packet (``run-inputs``, key run_id; one too large for a record as its
        pieces, on the run's partition: ``schemas/run_input_pieces.py``) and wait for its
        acknowledgement; RecordMetadata of its first record."""
        topic = self.settings.topic("run-inputs")
        records = packet_records(packet)

        async def send_and_wait() -> Any:
            if len(records) == 1:
                return await self.producer.send_and_wait(
                    topic, key=run_key_bytes(packet.run_id), value=records[0][1])
            # The pieces' keys differ (compaction keeps one record a key): the partition is
            # the run id's, given, not the keys' hash.
            partitions = sorted(await self.producer.partitions_for(topic))
            partition = partitions[partition_for_key(run_key_bytes(packet.run_id),
                                                     len(partitions))]
            futures = [await self.producer.send(topic, key=run_key_bytes(key), value=value,
                                                partition=partition)
                       for key, value in records]
            return (await asyncio.gather(*futures))[0]

        return await self._bounded(send_and_wait())

    async def publish(self, frame: ProviderFrame) -> Any:
        """Write one frame and wait for the broker's acknowledgement; RecordMetadata."""
        written = await self._bounded(produce_frame(self.producer, self.settings, frame))
        self.count_written([frame])
        return written

    async def publish_all(self, frames: list[ProviderFrame], *,
                          within: float | None = None) -> list[Any]:
        """Write frames (pipelined: one request per batch) and wait for every acknowledgement,
        ``within`` seconds at most (default ``ack_timeout_s``)."""

        async def send_and_wait() -> list[Any]:
            futures = []
            for index, frame in enumerate(frames, 1):
                futures.append(await send_frame(self.producer, self.settings, frame))
                if index % _FRAMES_PER_STEP == 0:
                    # Encoding and queueing a frame does not yield: thousands at once would
                    # hold the event loop for tens of ms, and the proxied streams with it.
                    await asyncio.sleep(0)
            return await await_acks(self.settings, futures)

        written = await self._bounded(send_and_wait(), within)
        self.count_written(frames)
        return written

    async def publish_ingest(self, event: ModelEvent) -> Any:
        """Write one event of the application's side (an approval decision) to ``ingest``,
        keyed by its run id, and wait for the broker's acknowledgement; RecordMetadata."""

        async def send_and_wait() -> list[Any]:
            future = await send_record(self.producer, self.settings, "ingest", event.run_id,
                                       event)
            return await await_acks(self.settings, [future])

        return (await self._bounded(send_and_wait()))[0]

    def count_written(self, frames: list[ProviderFrame]) -> None:
        """Frames Kafka acknowledged, for GET /metrics."""
        counter = self.metrics.frames_written
        for frame in frames:
            counter.labels(frame.provider, frame.api, frame.transport).inc()

    async def kafka_answers(self) -> bool:
        """Whether a broker answers the producer's metadata request (not bounded: the caller
        bounds it)."""
        return bool(await self.producer.client.force_metadata_update())

    async def _bounded(self, work: Any, within: float | None = None) -> Any:
        # asyncio.timeout, not wait_for: wait_for wraps the work in a task of its own, a cost
        # that showed in profiles at thousands of deliveries per second.
        limit = self.config.ack_timeout_s if within is None else within
        try:
            async with asyncio.timeout(limit):
                return await work
        except TimeoutError:
            raise KafkaUnavailable(
                self.settings.bootstrap_servers,
                f"no acknowledgement within {limit:g} s") from None
        except KafkaUnavailable:
            raise
        except KafkaError as exc:  # e.g. a request timeout surfacing as another aiokafka error
            raise KafkaUnavailable(self.settings.bootstrap_servers, repr(exc)) from exc



