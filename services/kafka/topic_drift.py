"""Existing topics against the configured settings: every difference, and what fixes each.

``topics create`` (services/kafka/topics.py) creates missing topics with the configured
partitions, replication factor, ``min.insync.replicas`` and retention, but keeps existing
topics as they are: a topic an older version created (another retention, min ISR 1, fewer
replicas) stays so. This module is what ``modelevents topics check`` and ``topics apply`` run:

- :func:`differences` describes the pipeline's topics and the worker's own topics of the app id
  (its internal topics and table changelogs, created by the worker; those that do not exist yet
  are not a difference) and lists every :class:`Difference` — a missing pipeline topic, a
  partition count, a replication factor, a topic config (``retention.ms``, ``cleanup.policy``,
  ``min.insync.replicas``, ``retention.bytes``) — with the broker's value and the configured one;
- :func:`apply` fixes what a config can fix (IncrementalAlterConfigs: only the named configs
  change, services/kafka/incremental_configs.py), creates missing topics, adds partitions only
  when asked (it moves runs to other partitions: see :data:`ADD_PARTITIONS_WARNING`), and
  returns the reassignment plan of each replication difference, which no config changes
  (:func:`reassignment_steps` prints ``kafka-reassign-partitions.sh`` steps for it).

A ``min.insync.replicas`` above a topic's current replica count is not applied: every acks=all
write to the topic would fail until the replicas are added; it is left for after the
reassignment, and said so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from modelevents.schemas.errors import ConfigError
from modelevents.services.kafka.clients import make_admin, start_client
from modelevents.services.kafka.incremental_configs import set_topic_configs
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.kafka.topics import (
    changelog_topics,
    creation_error,
    internal_topics,
    replication_configs,
    topic_configs,
)

__all__ = ["ADD_PARTITIONS_WARNING", "Difference", "Applied", "expected_topics", "differences",
           "apply", "reassignment_plan", "reassignment_steps"]

ADD_PARTITIONS_WARNING = (
    "adding partitions changes where run keys land: Kafka's partitioner hashes a key modulo the "
    "partition count, so records of existing runs arriving from now on go to other partitions "
    "than their earlier records and the worker's table state of those runs. The worker's state "
    "must be rebuilt: stop every worker, then start them under a new app id "
    "(MODELEVENTS_APP_ID; its tables and internal topics are created with the new count and it "
    "re-reads every input from its start, re-publishing events under the same seq, which "
    "consumers drop as duplicates by (run_id, seq)) — or follow docs/operations.md \"The topics "
    "and their partitions\" (a new prefix and app id)")


@dataclass(frozen=True)
class Expected:
    """What a topic should look like: its partitions, replicas and topic-level configs."""
    name: str
    partitions: int
    replicas: int
    configs: dict[str, str]
    pipeline: bool  # one of settings.topic_names (created by `topics create`), else the worker's


@dataclass(frozen=True)
class Difference:
    topic: str
    what: str  # "missing", "partitions", "replication" or a config name
    actual: str
    expected: str
    # How it is fixed: "create", "alter" (a config), "add-partitions", "reassign", "manual"
    fix: str
    note: str = ""

    def line(self) -> str:
        if self.what == "missing":
            text = f"{self.topic}: missing"
        else:
            text = f"{self.topic}: {self.what} is {self.actual}, configured {self.expected}"
        return f"{text} ({self.note})" if self.note else text


@dataclass
class Applied:
    """What :func:`apply` did, and what is left."""
    created: list[str] = field(default_factory=list)
    altered: dict[str, dict[str, str]] = field(default_factory=dict)  # topic -> configs set
    partitions_added: dict[str, int] = field(default_factory=dict)  # topic -> new count
    left: list[Difference] = field(default_factory=list)  # not fixed here, with why
    # topic -> {partition: replica broker ids}: the assignment that gives the configured factor
    reassignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    brokers: list[int] = field(default_factory=list)


def expected_topics(settings: PipelineSettings) -> list[Expected]:
    """The pipeline's topics and the worker's own, as the settings configure them."""
    wanted = [Expected(full, settings.partitions, settings.replication_factor,
                       topic_configs(name, settings), True)
              for name, full in settings.topic_names.items()]
    # The worker creates these (services/processor/app.py, Faust for the changelogs) with the
    # same partitions, replicas and min.insync.replicas; their other configs are the worker's.
    worker_own = [*internal_topics(settings).values(), *changelog_topics(settings).values()]
    wanted += [Expected(full, settings.partitions, settings.replication_factor,
                        replication_configs(settings), False) for full in worker_own]
    return wanted


@dataclass(frozen=True)
class _Actual:
    partitions: dict[int, list[int]]  # partition -> replica broker ids
    configs: dict[str, str]


async def _describe(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, _Actual]:
    described = {d["topic"]: d for d in await admin.describe_topics(names)}
    present = [n for n in names if described.get(n, {}).get("error_code") == 0
               and described[n].get("partitions")]
    configs: dict[str, dict[str, str]] = {n: {} for n in present}
    if present:
        for response in await admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, n) for n in present]):
            for resource in response.resources:
                error, message, _type, name, entries = resource[:5]
                if error:
                    raise ConfigError(f"cannot read the configs of topic {name}: "
                                      f"{message or f'error code {error}'}")
                configs[name] = {entry[0]: entry[1] for entry in entries}
    return {n: _Actual({p["partition"]: list(p.get("replicas", ()))
                        for p in described[n]["partitions"]}, configs[n]) for n in present}


def _compare(want: Expected, actual: _Actual | None) -> list[Difference]:
    if actual is None:
        if not want.pipeline:
            return []  # the worker creates it when it starts
        return [Difference(want.name, "missing", "absent", "present", "create")]
    found: list[Difference] = []
    count = len(actual.partitions)
    if count < want.partitions:
        found.append(Difference(want.name, "partitions", str(count), str(want.partitions),
                                "add-partitions" if want.pipeline else "manual",
                                "" if want.pipeline else "a worker topic: use a new app id"))
    elif count > want.partitions:
        found.append(Difference(want.name, "partitions", str(count), str(want.partitions),
                                "manual", "Kafka cannot remove partitions: set "
                                f"MODELEVENTS_PARTITIONS={count}, or create the topics anew "
                                "under another prefix"))
    replicas = sorted({len(r) for r in actual.partitions.values()})
    if replicas != [want.replicas]:
        shown = "/".join(map(str, replicas))
        found.append(Difference(want.name, "replication", shown, str(want.replicas), "reassign"))
    for name, value in want.configs.items():
        have = actual.configs.get(name)
        if have != value:
            found.append(Difference(want.name, name, "unset" if have is None else have, value,
                                    "alter"))
    return found


async def _admin(settings: PipelineSettings) -> AIOKafkaAdminClient:
    return await start_client(make_admin(settings), settings)


async def differences(settings: PipelineSettings) -> list[Difference]:
    """Every difference between the broker's topics and the configured ones (empty: none)."""
    admin = await _admin(settings)
    try:
        return await _differences(admin, settings)
    finally:
        await admin.close()


async def _differences(admin: AIOKafkaAdminClient, settings: PipelineSettings) -> list[Difference]:
    wanted = expected_topics(settings)
    actual = await _describe(admin, [w.name for w in wanted])
    return [d for w in wanted for d in _compare(w, actual.get(w.name))]


async def apply(settings: PipelineSettings, *, add_partitions: bool = False) -> Applied:
    """Fix what can be fixed; returns what was done and the differences left (with why)."""
    admin = await _admin(settings)
    try:
        found = await _differences(admin, settings)
        wanted = {w.name: w for w in expected_topics(settings)}
        actual = await _describe(admin, list(wanted))
        done = Applied()
        await _create_missing(admin, settings, [d for d in found if d.fix == "create"], done)
        await _alter(admin, actual, [d for d in found if d.fix == "alter"], done)
        growing = [d for d in found if d.fix == "add-partitions"]
        if add_partitions and growing:
            await _grow(admin, growing, done)
        else:
            done.left += [Difference(d.topic, d.what, d.actual, d.expected, d.fix,
                                     "not added without --add-partitions") for d in growing]
        done.left += [d for d in found if d.fix == "manual"]
        moving = [d for d in found if d.fix == "reassign"]
        if moving:
            done.brokers = await _broker_ids(admin)
            for d in moving:
                done.reassignments[d.topic] = reassignment_plan(
                    actual[d.topic].partitions, wanted[d.topic].replicas, done.brokers)
            done.left += moving
        return done
    finally:
        await admin.close()


async def _create_missing(admin: AIOKafkaAdminClient, settings: PipelineSettings,
                          missing: list[Difference], done: Applied) -> None:
    if not missing:
        return
    wanted = {w.name: w for w in expected_topics(settings)}
    response = await admin.create_topics(
        [NewTopic(d.topic, wanted[d.topic].partitions, wanted[d.topic].replicas,
                  topic_configs=wanted[d.topic].configs) for d in missing])
    for topic, code, message in (e[:3] for e in response.topic_errors):
        if code:
            raise creation_error(settings, topic, code, message)
        done.created.append(topic)


async def _alter(admin: AIOKafkaAdminClient, actual: dict[str, _Actual],
                 alterations: list[Difference], done: Applied) -> None:
    configs: dict[str, dict[str, str]] = {}
    for d in alterations:
        fewest = min(len(r) for r in actual[d.topic].partitions.values())
        if d.what == "min.insync.replicas" and int(d.expected) > fewest:
            # Every acks=all write would fail with NotEnoughReplicas until replicas are added.
            done.left.append(Difference(
                d.topic, d.what, d.actual, d.expected, "reassign",
                f"not set while the topic has {fewest} replica(s): every acks=all write would "
                f"fail; add the replicas first, then run `topics apply` again"))
            continue
        configs.setdefault(d.topic, {})[d.what] = d.expected
    errors = await set_topic_configs(admin, configs)
    refused = {topic: message for topic, message in errors.items() if message}
    if refused:
        raise ConfigError("the broker refused to alter topic configs: " + "; ".join(
            f"{topic} {configs[topic]}: {message}" for topic, message in sorted(refused.items())))
    done.altered.update(configs)


async def _grow(admin: AIOKafkaAdminClient, growing: list[Difference], done: Applied) -> None:
    for d in growing:
        try:
            await admin.create_partitions({d.topic: NewPartitions(int(d.expected))})
        except Exception as exc:  # aiokafka raises the error class of the broker's code
            raise ConfigError(f"cannot add partitions to {d.topic} (to {d.expected}): {exc}"
                              ) from exc
        done.partitions_added[d.topic] = int(d.expected)


async def _broker_ids(admin: AIOKafkaAdminClient) -> list[int]:
    cluster: dict[str, Any] = await admin.describe_cluster()
    return sorted(broker["node_id"] for broker in cluster.get("brokers", ()))


def reassignment_plan(current: dict[int, list[int]], replicas: int, brokers: list[int],
                      ) -> dict[int, list[int]]:
    """Each partition's replicas with ``replicas`` of them: the current ones kept in order
    (the first stays the preferred leader), extra ones dropped from the end, missing ones added
    from the brokers that hold the fewest replicas of the topic so far. Empty when the cluster
    has fewer brokers than ``replicas`` (no assignment can reach it)."""
    if len(brokers) < replicas:
        return {}
    load = {b: 0 for b in brokers}
    for held in current.values():
        for b in held[:replicas]:
            load[b] = load.get(b, 0) + 1
    plan: dict[int, list[int]] = {}
    for partition in sorted(current):
        chosen = list(current[partition][:replicas])
        while len(chosen) < replicas:
            spare = min((b for b in brokers if b not in chosen), key=lambda b: (load[b], b))
            chosen.append(spare)
            load[spare] += 1
        plan[partition] = chosen
    return plan


def reassignment_steps(settings: PipelineSettings, done: Applied) -> list[str]:
    """The lines an operator runs to give the topics their configured replication factor."""
    if not done.reassignments:
        return []
    impossible = sorted(t for t, plan in done.reassignments.items() if not plan)
    if impossible:
        return [f"the replication factor cannot be reached: the cluster has {len(done.brokers)} "
                f"broker(s) ({', '.join(map(str, done.brokers)) or 'none'}) and "
                f"MODELEVENTS_REPLICATION_FACTOR={settings.replication_factor}; add brokers or "
                f"lower MODELEVENTS_REPLICATION_FACTOR ({', '.join(impossible)})"]
    document = {"version": 1, "partitions": [
        {"topic": topic, "partition": partition, "replicas": replicas}
        for topic, plan in sorted(done.reassignments.items())
        for partition, replicas in sorted(plan.items())]}
    secured = settings.security.protocol != "PLAINTEXT"
    config = " --command-config client.properties" if secured else ""
    where = f"--bootstrap-server {settings.bootstrap_servers}{config}"
    steps = [
        "the replication factor is not a topic config; change it with Kafka's own tool "
        "(it copies the partitions' data to the new replicas while the topics stay in use):",
        "  cat > reassignment.json <<'EOF'",
        *(f"  {line}" for line in json.dumps(document, indent=2).splitlines()),
        "  EOF",
        f"  kafka-reassign-partitions.sh {where} --reassignment-json-file reassignment.json "
        f"--execute",
        f"  kafka-reassign-partitions.sh {where} --reassignment-json-file reassignment.json "
        f"--verify   # repeat until every partition's reassignment is complete",
        "  modelevents topics apply   # then sets what waited for the replicas "
        "(min.insync.replicas)",
    ]
    if secured:
        steps.insert(1, "  (client.properties: security.protocol, sasl.mechanism, "
                        "sasl.jaas.config, ssl.truststore.* as for any Kafka CLI tool)")
    return steps
