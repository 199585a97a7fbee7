"""The ``kafka`` section of the settings tree: where Kafka is, the topics, TLS and SASL.

The same keys in a config file's ``kafka:`` section as in the environment (each key's variable
is in :data:`KAFKA_ENV`)::

    kafka:
      bootstrap_servers: broker-1:9093,broker-2:9093   # KAFKA_BOOTSTRAP_SERVERS; unset: the
                                                       # local broker, 127.0.0.1:local_port
      local_port: 9092                    # MODELEVENTS_KAFKA_PORT
      topic_prefix: modelevents.          # MODELEVENTS_TOPIC_PREFIX
      partitions: 4                       # MODELEVENTS_PARTITIONS
      replication_factor: 3               # MODELEVENTS_REPLICATION_FACTOR
      min_insync_replicas: 2              # MODELEVENTS_MIN_INSYNC_REPLICAS (default factor - 1)
      app_id: modelevents                 # MODELEVENTS_APP_ID
      tenant: default                     # MODELEVENTS_TENANT
      security_protocol: SASL_SSL         # KAFKA_SECURITY_PROTOCOL
      sasl_mechanism: SCRAM-SHA-512       # KAFKA_SASL_MECHANISM
      sasl_username: svc                  # KAFKA_SASL_USERNAME
      sasl_password: ...                  # KAFKA_SASL_PASSWORD or KAFKA_SASL_PASSWORD_FILE
      ssl_cafile: /etc/kafka/ca.pem       # KAFKA_SSL_CAFILE
      ssl_certfile: /etc/kafka/client.pem # KAFKA_SSL_CERTFILE
      ssl_keyfile: /etc/kafka/client.key  # KAFKA_SSL_KEYFILE
      ssl_password: ...                   # KAFKA_SSL_PASSWORD(_FILE): the key file's password

:class:`~modelevents.services.kafka.settings.PipelineSettings` is the value the clients are
built with; ``PipelineSettings.from_kafka`` makes it of a resolved section.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, model_validator

from modelevents.schemas.errors import ConfigError
from modelevents.services.kafka.local_broker_address import LOCAL_HOST, LOCAL_PORT
from modelevents.services.kafka.security import SECURITY_ENV, KafkaSecurity
from modelevents.services.settings.loader import ENV_CONFIG, LayeredSettings, resolve
from modelevents.services.settings.sources import EnvVar

__all__ = ["KAFKA_ENV", "KafkaConfig", "WATCHED", "resolve_kafka", "security_problems"]

# The security fields of KafkaSecurity under the names the kafka section gives them.
_SECURITY_KEYS = {"protocol": "security_protocol"}

KAFKA_ENV: tuple[EnvVar, ...] = (
    EnvVar(("KAFKA_BOOTSTRAP_SERVERS",), ("kafka", "bootstrap_servers")),
    EnvVar(("MODELEVENTS_KAFKA_PORT",), ("kafka", "local_port")),
    EnvVar(("MODELEVENTS_TOPIC_PREFIX",), ("kafka", "topic_prefix")),
    EnvVar(("MODELEVENTS_PARTITIONS",), ("kafka", "partitions")),
    EnvVar(("MODELEVENTS_REPLICATION_FACTOR",), ("kafka", "replication_factor")),
    EnvVar(("MODELEVENTS_MIN_INSYNC_REPLICAS",), ("kafka", "min_insync_replicas")),
    EnvVar(("MODELEVENTS_APP_ID",), ("kafka", "app_id")),
    EnvVar(("MODELEVENTS_TENANT",), ("kafka", "tenant")),
    *(EnvVar(var.names, ("kafka", _SECURITY_KEYS.get(var.key[0], var.key[0])), var.secret)
      for var in SECURITY_ENV),
)


class KafkaConfig(BaseModel):
    """The Kafka settings of every command; checked as a whole (TLS files loaded, SASL
    complete, min.insync.replicas within the replication factor) when it is made."""

    model_config = ConfigDict(extra="forbid")

    bootstrap_servers: str | None = None
    local_port: int = Field(LOCAL_PORT, ge=1, le=65535)
    topic_prefix: str = "modelevents."
    partitions: int = Field(4, ge=1)
    replication_factor: int = Field(1, ge=1)
    # None: one less than the replication factor (at least 1).
    min_insync_replicas: int | None = Field(None, ge=1)
    app_id: str = "modelevents"
    tenant: str = "default"
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: SecretStr | None = None
    _security: KafkaSecurity = PrivateAttr(default_factory=KafkaSecurity)

    @model_validator(mode="after")
    def _consistent(self) -> KafkaConfig:
        if self.min_insync_replicas is not None and self.min_insync_replicas > \
                self.replication_factor:
            # Lines under a heading, as the security checks': each names its variables.
            raise ValueError(
                "invalid Kafka settings:\n"
                f"MODELEVENTS_MIN_INSYNC_REPLICAS={self.min_insync_replicas} must be between 1 "
                f"and MODELEVENTS_REPLICATION_FACTOR={self.replication_factor}: no write could "
                "succeed with more in-sync replicas required than there are replicas")

        def secret(value: SecretStr | None) -> str | None:
            return None if value is None else value.get_secret_value()
        try:
            self._security = KafkaSecurity(
                protocol=self.security_protocol, sasl_mechanism=self.sasl_mechanism,
                sasl_username=self.sasl_username, sasl_password=secret(self.sasl_password),
                ssl_cafile=self.ssl_cafile, ssl_certfile=self.ssl_certfile,
                ssl_keyfile=self.ssl_keyfile, ssl_password=secret(self.ssl_password))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self

    @property
    def bootstrap(self) -> str:
        """Where Kafka is: as set, else the project's local broker (``modelevents kafka``)."""
        return self.bootstrap_servers or f"{LOCAL_HOST}:{self.local_port}"

    @property
    def security(self) -> KafkaSecurity:
        return self._security


def security_problems(section: Any) -> list[str]:
    """The TLS/SASL checks of a kafka section (a mapping of its raw values), one line each;
    none if the section or its security values are not even of the right type."""
    if not isinstance(section, Mapping):
        return []
    given: dict[str, Any] = {key: section.get(_SECURITY_KEYS.get(key, key)) for key in
             ("protocol", "sasl_mechanism", "sasl_username", "sasl_password", "ssl_cafile",
              "ssl_certfile", "ssl_keyfile", "ssl_password")}
    if not all(value is None or isinstance(value, str) for value in given.values()):
        return []
    try:
        KafkaSecurity(**{**given, "protocol": given["protocol"] or "PLAINTEXT"})
    except ConfigError as exc:
        return str(exc).splitlines()[1:]
    return []


class _KafkaOnly(LayeredSettings):
    # The kafka section of the configuration; the file's other sections are other commands'.
    model_config = LayeredSettings.model_config | {"extra": "ignore"}

    kafka: KafkaConfig = Field(default_factory=lambda: KafkaConfig.model_validate({}))

    @classmethod
    def cross_checks(cls, values: Mapping[str, Any]) -> list[str]:
        return security_problems(values.get("kafka"))


# Every variable the kafka section reads (secrets as NAME_FILE too) and the config file's.
WATCHED = (*(name for var in KAFKA_ENV for name in var.names),
           *(f"{name}_FILE" for var in KAFKA_ENV if var.secret for name in var.names), ENV_CONFIG)


def resolve_kafka() -> KafkaConfig:
    """The kafka section from defaults < ``$MODELEVENTS_CONFIG`` < the environment."""
    return resolve(_KafkaOnly, tables=KAFKA_ENV).settings.kafka
