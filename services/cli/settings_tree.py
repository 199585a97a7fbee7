"""The settings tree every command reads: ``kafka``, ``gateway``, ``worker``, ``tools``.

One model per concern — :class:`~modelevents.services.kafka.config.KafkaConfig`,
:class:`~modelevents.services.gateway.config.GatewayConfig`, :class:`WorkerConfig`,
:class:`ToolsConfig` — composed into :class:`Settings`, resolved by :func:`load_settings` from
defaults < the config file (``--config`` or ``$MODELEVENTS_CONFIG``) < the environment < the
command's options. The gateway, the worker, the tool executor, the UI and the commands that
read or write topics (audit, replay, feed, tail, topics, otel) all go through it, and
``modelevents config show`` prints it with every value's origin.

It lives with the commands, the composition root: it imports every service's section, so a
service that imported it back would close an import cycle (the `acyclic_siblings` contract).

More on this module: docs/operations.md, ``services/cli/settings_tree.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from modelevents.services.gateway.config import GATEWAY_ENV, GatewayConfig, gateway_defaults
from modelevents.services.kafka.config import KAFKA_ENV, KafkaConfig, security_problems
from modelevents.services.kafka.security import KafkaSecurity
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.settings.loader import LayeredSettings, Resolved, resolve
from modelevents.services.settings.sources import EXAMPLE_TOOLS, EnvVar
from modelevents.services.settings.xdg import cache_dir, state_dir

__all__ = ["ENV", "Settings", "ToolsConfig", "WorkerConfig", "cache_dir", "load_gateway_config",
           "load_settings", "state_dir"]


class WorkerConfig(BaseModel):
    """``modelevents worker``: its state directory and its processing (services/processor)."""

    model_config = ConfigDict(extra="forbid")

    # None: $XDG_STATE_HOME/modelevents/worker (~/.local/state/modelevents/worker).
    state_dir: Path | None = None
    run_retention_s: float = Field(3600.0, gt=0)
    batch_size: int | None = Field(None, ge=1)
    stream_buffer: int | None = Field(None, ge=2)
    session_timeout_s: float | None = Field(None, ge=6)
    # The policy file (the tool executor's, tools.policy): its tenants' ``hosted`` sections.
    policy: Path | None = None

    @property
    def workdir(self) -> Path:
        return self.state_dir if self.state_dir is not None else state_dir("worker")


class ToolsConfig(BaseModel):
    """``modelevents tools run``: which tools, under which policy (consumers/tools)."""

    model_config = ConfigDict(extra="forbid")

    policy: Path | None = None
    module: str = EXAMPLE_TOOLS
    db: Path | None = None
    group: str = "modelevents-tools"
    gateway_url: str | None = None
    tenants: list[str] | None = None
    metrics_port: int | None = Field(None, ge=0, le=65535)
    metrics_host: str = Field("127.0.0.1", min_length=1)
    # Calls of different runs handled at once (consumers/tools/dispatch.py).
    max_concurrent_calls: int = Field(16, ge=1, le=4096)


# The environment of the whole tree.
ENV: tuple[EnvVar, ...] = (
    *KAFKA_ENV, *GATEWAY_ENV,
    EnvVar(("MODELEVENTS_STATE_DIR",), ("worker", "state_dir")),
    EnvVar(("MODELEVENTS_RUN_RETENTION",), ("worker", "run_retention_s")),
)

# A stand-in for the gateway's Kafka settings while the tree is validated (it must not read the
# environment itself); replaced by the tree's own kafka section once that is valid.
_PLACEHOLDER = PipelineSettings(bootstrap_servers="", topic_prefix="", partitions=1,
                                replication_factor=1, min_insync_replicas=None, app_id="",
                                tenant="", security=KafkaSecurity())


class Settings(LayeredSettings):
    """The whole configuration; ``gateway.kafka`` is the ``kafka`` section's PipelineSettings."""

    kafka: KafkaConfig = Field(default_factory=lambda: KafkaConfig.model_validate({}))
    gateway: GatewayConfig = Field(
        default_factory=lambda: GatewayConfig.model_validate({"kafka": _PLACEHOLDER}))
    worker: WorkerConfig = Field(default_factory=lambda: WorkerConfig.model_validate({}))
    tools: ToolsConfig = Field(default_factory=lambda: ToolsConfig.model_validate({}))

    @model_validator(mode="before")
    @classmethod
    def _gateway_kafka(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and isinstance(data.get("gateway"), Mapping):
            data = {**data, "gateway": {**data["gateway"], "kafka": _PLACEHOLDER}}
        return data

    @classmethod
    def cross_checks(cls, values: Mapping[str, Any]) -> list[str]:
        return security_problems(values.get("kafka"))

    @model_validator(mode="after")
    def _share_kafka(self) -> Settings:
        self.gateway.kafka = PipelineSettings.from_kafka(self.kafka)
        return self

    @model_validator(mode="after")
    def _one_policy_file(self) -> Settings:
        # One file holds every tenant's policy: the gateway reads the tool executor's hosted:
        # sections unless gateway.policy names another file.
        if self.gateway.policy is None:
            self.gateway.policy = self.tools.policy
        return self


def load_settings(config: Path | str | None = None, *, env: Mapping[str, str] | None = None,
                  cli: Mapping[str, tuple[Any, str]] | None = None) -> Resolved[Settings]:
    """The tree from defaults < ``config`` (else ``$MODELEVENTS_CONFIG``) < ``env`` (default
    the process's) < ``cli`` (``{"gateway.port": (9000, "--port")}``, None: not given).
    Raises ConfigProblems with every problem, one line each."""
    return resolve(Settings, config=config, env=env, tables=ENV, cli=cli,
                   defaults={"gateway": gateway_defaults()})


def load_gateway_config(path: str | Path | None = None, *, env: Mapping[str, str] | None = None,
                        kafka: PipelineSettings | None = None, **overrides: Any) -> GatewayConfig:
    """The gateway's part of the tree: defaults < the file (YAML, or TOML by its suffix) < the
    environment < ``overrides`` (CLI options; None values are ignored), with ``kafka`` instead
    of the tree's Kafka settings if given. Raises ConfigProblems (one line per problem)."""
    cli = {f"gateway.{key}": (value, f"--{key.replace('_', '-')}")
           for key, value in overrides.items()}
    config = load_settings(path, env=env, cli=cli).settings.gateway
    if kafka is not None:
        config.kafka = kafka
    return config
