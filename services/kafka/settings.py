"""Pipeline settings: where Kafka is, what the topics are called, how many partitions they have.

The topics are :data:`TOPICS`: the pipeline's (``frames``, ``ingest``, ``events``, ``runs``,
``dlq``), the gateway's (``run-owners``: which tenant owns each run id, kept for ever;
``run-inputs``: the runs' input packets; ``calls``: the calls the replicas share), the tool
executor's ``receipts``, the audit archives' ``audit-heads`` and migration's ``bundles``,
``eval-results``, ``decisions`` and ``capability-probes``.

Every value has a default that works with the project's own local broker and can be set in the
``kafka:`` section of the config file (``$MODELEVENTS_CONFIG``) or, over it, from the
environment (for the worker, the CLI and the tests alike) — services/kafka/config.py lists the
keys and their variables:

    KAFKA_BOOTSTRAP_SERVERS     an existing cluster; unset → the local broker (services/local/kafka_broker.py)
    MODELEVENTS_TOPIC_PREFIX    default "modelevents."
    MODELEVENTS_PARTITIONS      partitions of every topic (and so of Faust's changelogs), default 4
    MODELEVENTS_APP_ID          Faust application id (consumer group, changelog names), default
                                "modelevents"
    MODELEVENTS_TENANT          default tenant of frames fed without one, default "default"
    MODELEVENTS_REPLICATION_FACTOR  replicas of every topic the pipeline creates (its own, Faust's
                                changelogs and internal topics), default 1; 3 on a real cluster
    MODELEVENTS_MIN_INSYNC_REPLICAS  ``min.insync.replicas`` of those topics: how many replicas
                                must have a record before an acks=all producer is answered;
                                default replication factor - 1 (at least 1), at most the factor

and the TLS / SASL settings of every client (``KAFKA_SECURITY_PROTOCOL`` …), whose names and
checks are services/kafka/security.py's. ``PipelineSettings()`` resolves them all at once (an
invalid value: ConfigProblems, one line per problem).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from modelevents.schemas.errors import ConfigError
from modelevents.services.kafka.security import KafkaSecurity

if TYPE_CHECKING:  # pydantic loads on the first PipelineSettings(), not with this module
    from modelevents.services.kafka.config import KafkaConfig

# The pipeline's topics (docs/architecture.md): name → whether the topic is compacted.
TOPICS: dict[str, bool] = {
    "frames": False,  # ProviderFrame, key run key; the source of truth, long retention
    "ingest": False,  # ModelEvent candidates, key run_id; duplicates and disorder allowed
    "events": False,  # ModelEvent, key run_id; deduped, ordered, contiguous seq from 0
    "runs": True,  # RunState, key run_id; latest state of each run
    "dlq": False,  # DeadLetter, key run key; what could not be decoded, translated or applied
    # Claims of run ids (JSON, key run_id; services/gateway/events/owners.py): the first claim of a key
    # is its owner for ever, so the topic is never compacted and never expires.
    "run-owners": False,
    # Input packets of runs (RunInput, key run_id; services/gateway/inputs/packets.py): the
    # latest packet of each run.
    "run-inputs": True,
    # The gateway's calls (JSON; services/gateway/calls/records.py): per run its latest call (key run_id)
    # and the idempotency keys' answers, shared by the replicas and kept over restarts.
    "calls": True,
    # ToolReceipts of the tool executor (consumers/tools/receipts.py, key run_id): every attempt
    # of every application tool call; what a restarted executor dedupes and reconciles against.
    "receipts": False,
    # The audit archives' signed heads (JSON, key archive id; consumers/audit/heads.py): the
    # anchor `audit verify --heads` compares an archive with, kept out of the archive's reach.
    "audit-heads": True,
    # Eval results (EvalResult, key result id; services/migration/eval/result.py): each result
    # once, for ever (compaction keeps a key's latest record, and a result id names its content).
    "eval-results": True,
    # Decision records (Decision, key decision id; schemas/decision_record.py): the
    # latest revision of each decision — current, or demoted to historical evidence.
    "decisions": True,
    # What `capabilities probe` observed of a target (CapabilityProbe, key probe id;
    # services/migration/probes/record.py): evidence for decision records.
    "capability-probes": True,
    # Bundles (schemas/bundle_record.py, key bundle id): immutable and content-addressed, so a
    # key's latest record is its only content; kept for ever, as compaction keeps it.
    "bundles": True,
}


ENV_REPLICATION_FACTOR = "MODELEVENTS_REPLICATION_FACTOR"
ENV_MIN_INSYNC_REPLICAS = "MODELEVENTS_MIN_INSYNC_REPLICAS"

_cache: dict[tuple[Any, ...], tuple[KafkaConfig, PipelineSettings]] = {}


def _environment() -> tuple[KafkaConfig, PipelineSettings]:
    # Resolved again only when one of the variables changed (tests change them, services not).
    # Imported here, not with this module: config.py loads pydantic, which a command loads when
    # it runs, not when the CLI builds its parser.
    from modelevents.services.kafka import config

    snapshot = tuple(map(os.environ.get, config.WATCHED))
    if (found := _cache.get(snapshot)) is None:
        kafka = config.resolve_kafka()
        found = (kafka, PipelineSettings.from_kafka(kafka))
        _cache.clear()  # only the latest
        _cache[snapshot] = found
    return found


def environment_kafka() -> KafkaConfig:
    """The kafka section as the environment (and ``$MODELEVENTS_CONFIG``) give it now."""
    return _environment()[0]


def _env_default(name: str) -> Any:
    return getattr(_environment()[1], name)


@dataclass(frozen=True)
class PipelineSettings:
    """What every Kafka client of the pipeline is built with; each value not given is the
    configuration's (:func:`environment_kafka`)."""

    bootstrap_servers: str = field(default_factory=lambda: _env_default("bootstrap_servers"))
    topic_prefix: str = field(default_factory=lambda: _env_default("topic_prefix"))
    partitions: int = field(default_factory=lambda: _env_default("partitions"))
    replication_factor: int = field(default_factory=lambda: _env_default("replication_factor"))
    # None: the default that follows the replication factor (see min_insync).
    min_insync_replicas: int | None = field(
        default_factory=lambda: _env_default("min_insync_replicas"))
    app_id: str = field(default_factory=lambda: _env_default("app_id"))
    tenant: str = field(default_factory=lambda: _env_default("tenant"))
    security: KafkaSecurity = field(default_factory=lambda: _env_default("security"))

    @classmethod
    def from_kafka(cls, kafka: KafkaConfig) -> PipelineSettings:
        """The settings of a resolved ``kafka`` section."""
        return cls(bootstrap_servers=kafka.bootstrap, topic_prefix=kafka.topic_prefix,
                   partitions=kafka.partitions, replication_factor=kafka.replication_factor,
                   min_insync_replicas=kafka.min_insync_replicas, app_id=kafka.app_id,
                   tenant=kafka.tenant, security=kafka.security)

    def __post_init__(self) -> None:
        if self.replication_factor < 1:
            raise ConfigError(f"{ENV_REPLICATION_FACTOR}={self.replication_factor}: a topic needs "
                              f"at least 1 replica")
        if self.min_insync_replicas is not None and not (
                1 <= self.min_insync_replicas <= self.replication_factor):
            raise ConfigError(
                f"{ENV_MIN_INSYNC_REPLICAS}={self.min_insync_replicas} must be between 1 and "
                f"{ENV_REPLICATION_FACTOR}={self.replication_factor}: no write could succeed "
                f"with more in-sync replicas required than there are replicas")

    @property
    def min_insync(self) -> int:
        """``min.insync.replicas`` of the topics: as set, else one less than the replication
        factor (at least 1) — a 3-replica topic stays writable with one broker down and never
        acknowledges a record that only one broker has."""
        if self.min_insync_replicas is not None:
            return self.min_insync_replicas
        return max(1, self.replication_factor - 1)

    def client_options(self) -> dict[str, Any]:
        """What every aiokafka client of the pipeline is built with: where Kafka is and how to
        connect to it (security protocol, TLS context, SASL credentials)."""
        return {"bootstrap_servers": self.bootstrap_servers, **self.security.client_options()}

    def topic(self, name: str) -> str:
        if name not in TOPICS:
            raise ConfigError(f"no topic {name!r}; the topics are {', '.join(TOPICS)}")
        return f"{self.topic_prefix}{name}"

    @property
    def topic_names(self) -> dict[str, str]:
        return {name: self.topic(name) for name in TOPICS}
