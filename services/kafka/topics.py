"""The pipeline's topics: create what is missing, refuse what does not match.

The topics of docs/architecture.md: frames, ingest, events, runs (compacted) and dlq, the tool
executor's receipts (never expired: consumers/tools/receipts.py), and the gateway's
run-owners (never expired nor compacted: services/gateway/events/owners.py), run-inputs and calls
(compacted: services/gateway/calls/records.py), the audit archives' audit-heads (compacted, the latest
head of each archive kept for ever: consumers/audit/heads.py) and capability-probes (compacted:
services/migration/probes/record.py), created explicitly because
the broker's auto-create is off. Every topic has ``settings.partitions`` partitions: Faust creates
its changelog and repartition topics with that same count and stops with PartitionsMismatch (an
agent crash loop) when a source topic differs — so a mismatch is refused here, with
the fix, before any worker starts.

Public API::

    await ensure_topics(settings)   # -> {full topic name: "created" | "verified"}
    await verify_topics(settings)   # -> {full topic name: "verified"}; raises ConfigError if not
    await delete_topics(settings)   # -> [deleted full topic names]
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import InvalidReplicationFactorError

from modelevents.schemas.errors import ConfigError
from modelevents.services.kafka.clients import make_admin, start_client
from modelevents.services.kafka.settings import TOPICS, PipelineSettings

__all__ = ["TopicInfo", "ensure_topics", "verify_topics", "delete_topics", "describe_topics", "topic_configs",
           "replication_configs", "creation_error", "durability_warnings", "internal_topics", "changelog_topics",
           "RETENTION_MS"]

_TOPIC_ALREADY_EXISTS = 36
_UNKNOWN_TOPIC = 3
# A topic just created may take a moment to appear in every broker's metadata.
_METADATA_WAIT_S = 10.0


# The worker app's tables (services/processor/app.py); Faust names each one's changelog.
TABLES = ("run", "aliases")


def internal_topics(settings: PipelineSettings) -> dict[str, str]:
    """The processor's own topics (besides Faust's changelogs): logical name → full name."""
    return {"rerouted": f"{settings.app_id}-frames-rerouted",
            "aliases": f"{settings.app_id}-run-aliases"}


def changelog_topics(settings: PipelineSettings) -> dict[str, str]:
    """Faust's changelog topic of each table (Faust names them ``<app id>-<table>-changelog``)."""
    return {name: f"{settings.app_id}-{name}-changelog" for name in TABLES}


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int
    cleanup_policy: str
    leaders_elected: bool = True  # every partition has a leader (a new topic needs a moment)
    replicas: int = 1  # the fewest replicas of any of its partitions
    min_insync: int = 1  # its min.insync.replicas


# How long each uncompacted topic keeps its records, in ms (-1: for ever), written on the topic
# when it is created so that no broker default decides it.
WEEK_MS = 7 * 24 * 3600 * 1000
RETENTION_MS: dict[str, int] = {
    # frames is the source of truth: replay re-normalizes it through fixed adapters.
    "frames": -1,
    # Candidate events are applied within seconds; a week covers a worker down for days.
    "ingest": WEEK_MS,
    # The public topic: re-derivable from frames (replay), kept a week for consumers that lag.
    "events": WEEK_MS,
    # Read and act on dead letters well within this.
    "dlq": WEEK_MS,
    # A run id's first claim is its owner for ever (services/gateway/events/owners.py): never expired
    # (a claim must outlive the run's retention).
    "run-owners": -1,
    # A receipt is the only proof that a side effect was attempted: a redelivered tool call of
    # any age must find it, so receipts never expire.
    "receipts": -1,
}


# What compacted topics keep besides each key's latest record.
COMPACTED_CONFIGS: dict[str, dict[str, str]] = {
    # The latest head of each archive is kept for ever; every head for a week before compaction
    # may drop it, so that a verifier sees the heads published recently, not only the last.
    "audit-heads": {"retention.ms": "-1", "min.compaction.lag.ms": str(WEEK_MS)},
    # An eval result is evidence a decision record names: never expired.
    "eval-results": {"retention.ms": "-1"},
    # A decision's latest revision is kept for ever: a demoted one is the historical evidence.
    "decisions": {"retention.ms": "-1"},
}


def replication_configs(settings: PipelineSettings) -> dict[str, str]:
    """The durability config of every topic the pipeline creates (its own, the worker's)."""
    return {"min.insync.replicas": str(settings.min_insync)}


def topic_configs(name: str, settings: PipelineSettings) -> dict[str, str]:
    """The topic-level configs a pipeline topic is created with."""
    configs = replication_configs(settings)
    if TOPICS[name]:
        # runs holds the latest RunState per run_id; older states are garbage once compacted.
        return {**configs, "cleanup.policy": "compact", **COMPACTED_CONFIGS.get(name, {})}
    configs.update({"cleanup.policy": "delete", "retention.ms": str(RETENTION_MS[name])})
    if name == "run-owners":
        # Never compacted either (compaction keeps the last claim of a key, which is not the
        # owner's when two gateways raced), and no size limit.
        configs["retention.bytes"] = "-1"
    return configs


def creation_error(settings: PipelineSettings, topic: str, code: int, message: str | None,
                   ) -> ConfigError:
    """The ConfigError for a topic the cluster refused to create, naming the setting to change."""
    detail = message or f"error code {code}"
    if code == InvalidReplicationFactorError.errno:
        return ConfigError(
            f"cannot create topic {topic} on {settings.bootstrap_servers} with "
            f"MODELEVENTS_REPLICATION_FACTOR={settings.replication_factor}: {detail}; set "
            f"MODELEVENTS_REPLICATION_FACTOR to at most the number of brokers of the cluster")
    return ConfigError(f"cannot create topic {topic} on {settings.bootstrap_servers}: {detail}")


async def _admin(settings: PipelineSettings) -> AIOKafkaAdminClient:
    return await start_client(make_admin(settings), settings)


async def describe_topics(settings: PipelineSettings, admin: AIOKafkaAdminClient | None = None,
                          ) -> dict[str, TopicInfo | None]:
    """Partition count and cleanup policy of each pipeline topic (None: the topic does not exist)."""
    own = admin is None
    admin = admin or await _admin(settings)
    try:
        return await _describe(admin, list(settings.topic_names.values()))
    finally:
        if own:
            await admin.close()


async def _describe(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, TopicInfo | None]:
    described = {d["topic"]: d for d in await admin.describe_topics(names)}
    present = [n for n in names if described.get(n, {}).get("error_code") == 0
               and described[n].get("partitions")]
    policies: dict[str, str] = {}
    min_insync: dict[str, int] = {}
    if present:
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, n) for n in present])
        for response in responses:
            for resource in response.resources:
                _error, _message, _type, name, entries = resource[:5]
                for entry in entries:
                    if entry[0] == "cleanup.policy":
                        policies[name] = entry[1]
                    elif entry[0] == "min.insync.replicas" and str(entry[1]).isdigit():
                        min_insync[name] = int(entry[1])
    return {n: (TopicInfo(n, len(described[n]["partitions"]), policies.get(n, "delete"),
                          all(p.get("leader", -1) >= 0 for p in described[n]["partitions"]),
                          min(len(p.get("replicas", ())) for p in described[n]["partitions"]),
                          min_insync.get(n, 1))
                if n in present else None) for n in names}


async def durability_warnings(settings: PipelineSettings) -> list[str]:
    """One line for each existing pipeline topic with fewer replicas or a lower
    min.insync.replicas than the settings ask for. Not an error: topics that exist are kept as
    they are by create (``topics check`` lists every difference, ``topics apply`` fixes them:
    services/kafka/topic_drift.py), and a worker runs on them."""
    warnings = []
    for name, info in (await describe_topics(settings)).items():
        if info is None:
            continue
        if info.replicas < settings.replication_factor:
            warnings.append(
                f"topic {name} has {info.replicas} replica(s), fewer than "
                f"MODELEVENTS_REPLICATION_FACTOR={settings.replication_factor}; existing topics "
                f"are kept as they are by create: `modelevents topics apply` prints the "
                f"kafka-reassign-partitions.sh steps that add the replicas")
        if info.min_insync < settings.min_insync:
            warnings.append(
                f"topic {name} has min.insync.replicas={info.min_insync}, below the "
                f"{settings.min_insync} the settings ask for (MODELEVENTS_MIN_INSYNC_REPLICAS); "
                f"`modelevents topics apply` raises it (once the topic has that many replicas)")
    return warnings


def _check(settings: PipelineSettings, name: str, info: TopicInfo) -> None:
    expected = settings.partitions
    if info.partitions != expected:
        raise ConfigError(
            f"topic {info.name} has {info.partitions} partitions, expected {expected} "
            f"(MODELEVENTS_PARTITIONS): Faust's changelogs get the configured count and a worker "
            f"refuses a source topic that differs. Either delete the pipeline's topics "
            f"(`modelevents topics delete --prefix {settings.topic_prefix} --yes`; this deletes "
            f"their records) and create them again, or set MODELEVENTS_PARTITIONS={info.partitions}")
    compacted = "compact" in info.cleanup_policy.split(",")
    if TOPICS[name] and not compacted:
        raise ConfigError(
            f"topic {info.name} has cleanup.policy={info.cleanup_policy}, expected compact (it holds "
            f"the latest state per run); delete it (`modelevents topics delete --prefix "
            f"{settings.topic_prefix} --yes`) and run `modelevents topics create`")
    if not TOPICS[name] and compacted:
        raise ConfigError(
            f"topic {info.name} has cleanup.policy={info.cleanup_policy}, but compaction would drop "
            f"all but the last record of each run; set cleanup.policy=delete or delete the topic "
            f"(`modelevents topics delete --prefix {settings.topic_prefix} --yes`) and create it again")


async def verify_topics(settings: PipelineSettings) -> dict[str, str]:
    """Check that every pipeline topic exists with the configured partitions and cleanup policy.

    Raises ConfigError naming the first topic that is missing or differs, and how to fix it.
    """
    infos = await describe_topics(settings)
    missing = [n for n, info in infos.items() if info is None]
    if missing:
        raise ConfigError(
            f"topics missing on {settings.bootstrap_servers}: {', '.join(missing)} (broker "
            f"auto-create is off); create them with `modelevents topics create --prefix "
            f"{settings.topic_prefix} --partitions {settings.partitions}`")
    for name, full in settings.topic_names.items():
        _check(settings, name, infos[full])  # type: ignore[arg-type]
    return {full: "verified" for full in infos}


async def ensure_topics(settings: PipelineSettings) -> dict[str, str]:
    """Create the pipeline topics that are missing, verify the ones that exist.

    Idempotent, and safe when several processes run it at once (a topic that another process
    created in between counts as existing and is verified). Returns {full name: "created" |
    "verified"}; raises ConfigError for an existing topic that does not match.
    """
    admin = await _admin(settings)
    try:
        names = settings.topic_names
        infos = await _describe(admin, list(names.values()))
        for name, full in names.items():
            if infos[full] is not None:
                _check(settings, name, infos[full])  # type: ignore[arg-type]
        wanted = [NewTopic(full, settings.partitions, settings.replication_factor,
                           topic_configs=topic_configs(name, settings))
                  for name, full in names.items() if infos[full] is None]
        result = {full: "verified" for full, info in infos.items() if info is not None}
        if wanted:
            response = await admin.create_topics(wanted)
            for full, code, message in (e[:3] for e in response.topic_errors):
                if code == 0:
                    result[full] = "created"
                elif code == _TOPIC_ALREADY_EXISTS:
                    result[full] = "verified"  # created concurrently; checked below
                else:
                    raise creation_error(settings, full, code, message)
            await _await_visible(admin, settings, result)
        return {full: result[full] for full in names.values()}
    finally:
        await admin.close()


async def _await_visible(admin: AIOKafkaAdminClient, settings: PipelineSettings,
                         result: dict[str, str]) -> None:
    # Producers and Faust look topics up in metadata right after this returns; wait until every
    # topic is there with all its partitions, and check the ones someone else created.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _METADATA_WAIT_S
    while True:
        infos = await _describe(admin, list(settings.topic_names.values()))
        if all(info is not None and info.partitions == settings.partitions and info.leaders_elected
               for info in infos.values()) or loop.time() > deadline:
            break
        await asyncio.sleep(0.1)
    for name, full in settings.topic_names.items():
        info = infos[full]
        if info is None:
            raise ConfigError(f"topic {full} was created but does not appear in the metadata of "
                              f"{settings.bootstrap_servers} after {_METADATA_WAIT_S:.0f} s; "
                              f"check the broker's log")
        _check(settings, name, info)


async def delete_topics(settings: PipelineSettings) -> list[str]:
    """Delete the pipeline topics of ``settings.topic_prefix`` that exist (their records too)."""
    admin = await _admin(settings)
    try:
        existing = set(await admin.list_topics())
        doomed = [full for full in settings.topic_names.values() if full in existing]
        if doomed:
            response: Any = await admin.delete_topics(doomed)
            for full, code, *_ in response.topic_error_codes:
                if code not in (0, _UNKNOWN_TOPIC):
                    raise ConfigError(f"cannot delete topic {full}: error code {code}")
        return doomed
    finally:
        await admin.close()
