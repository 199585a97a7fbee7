"""GatewayConfig: where the gateway listens, which Kafka it writes to, and the providers' secrets.

The ``gateway`` part of the settings tree (services/cli/settings_tree.py): defaults, then a YAML or
TOML file, then the environment, then explicit CLI options, each winning over the ones before.
Credentials are :class:`pydantic.SecretStr`: they print as ``**********`` in reprs, logs and
errors, and only the verifier and the fetch read their values.

More on this module (the file's keys, the providers, the environment): docs/operations.md,
``services/gateway/config.py``.
"""

from __future__ import annotations

import base64
import re
import socket
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from modelevents.adapters.registry import API_FACTS
from modelevents.schemas.errors import ConfigError, InvalidId
from modelevents.schemas.ids import check_id
from modelevents.schemas.limits import MAX_RECORD_BYTES
from modelevents.services.gateway.inputs.redaction import RedactionConfig
from modelevents.services.gateway.inputs.webhook_limits import WEBHOOK_BODY_FIT
from modelevents.services.gateway.upstreams import ProxyConfig
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.settings.sources import EnvVar

__all__ = ["GATEWAY_ENV", "GatewayConfig", "JournalConfig", "ProviderConfig", "PROVIDERS",
           "WEBHOOK_PROVIDERS", "gateway_defaults", "secret_key"]

# The providers the gateway talks to, with the environment variables and default base URL of
# each; ``secret`` only where the provider sends webhooks (both sign with Standard Webhooks).
PROVIDERS: dict[str, dict[str, Any]] = {
    "openai": {"api_key": ("OPENAI_API_KEY",), "base_url": "OPENAI_BASE_URL",
               "secret": "OPENAI_WEBHOOK_SECRET", "default_base_url": "https://api.openai.com"},
    "anthropic": {"api_key": ("ANTHROPIC_API_KEY",), "base_url": "ANTHROPIC_BASE_URL",
                  "secret": None, "default_base_url": "https://api.anthropic.com"},
    "gemini": {"api_key": ("GEMINI_API_KEY", "GOOGLE_API_KEY"), "base_url": "GEMINI_BASE_URL",
               "secret": "GEMINI_WEBHOOK_SECRET",
               "default_base_url": "https://generativelanguage.googleapis.com"},
}
WEBHOOK_PROVIDERS = tuple(name for name, entry in PROVIDERS.items() if entry["secret"])

# The gateway's variables and where they go in the tree (a secret may be NAME_FILE instead).
GATEWAY_ENV: tuple[EnvVar, ...] = (
    *(var for name, entry in PROVIDERS.items() for var in (
        EnvVar(entry["api_key"], ("gateway", "providers", name, "api_key"), secret=True),
        EnvVar((entry["base_url"],), ("gateway", "providers", name, "base_url")),
        *((EnvVar((entry["secret"],), ("gateway", "providers", name, "webhook_secrets"),
                  secret=True, form="tenant_list"),) if entry["secret"] else ()))),
    EnvVar(("MODELEVENTS_API_TOKEN",), ("gateway", "api_tokens"), secret=True, form="tenant_list"),
    # One variable per replica where the pods share one config file (a StatefulSet's pod name).
    EnvVar(("MODELEVENTS_GATEWAY_INSTANCE",), ("gateway", "instance_id")),
    EnvVar(("MODELEVENTS_POLICY",), ("gateway", "policy")),
    EnvVar(("MODELEVENTS_JOURNAL_DIR",), ("gateway", "journal", "directory")),
)


def gateway_defaults() -> dict[str, Any]:
    """The defaults layer of the gateway: every provider at its own base URL."""
    return {"providers": {name: {"base_url": entry["default_base_url"]}
                          for name, entry in PROVIDERS.items()}}
_DEFAULT_BASE_URLS = frozenset(entry["default_base_url"] for entry in PROVIDERS.values())
# Provider names of events and the capability manifest that differ from the config's (the APIs'
# facts name both).
_PROVIDER_ALIASES = {facts.provider: facts.config_provider for facts in API_FACTS.values()
                     if facts.provider != facts.config_provider}


def _check_tenant(tenant: str) -> str:
    # A tenant is stamped on frames and names a URL segment: an id (and so of bounded size).
    try:
        return check_id(tenant, "tenant")
    except InvalidId as exc:
        raise ValueError(str(exc)) from None


def _default_instance() -> str:
    # The default when neither the file, $MODELEVENTS_GATEWAY_INSTANCE nor --instance-id names
    # one (those are checked as ids: a bad one is an error, not silently changed). A host name
    # may hold characters an id may not (a Windows one): those become "-".
    name = socket.gethostname() or "gateway"
    return re.sub(r"[^A-Za-z0-9._:-]", "-", name)[:200]


def secret_key(secret: str) -> bytes:
    """The HMAC key of a Standard Webhooks secret (Standard Webhooks specification): ``whsec_<base64>``
    is base64-decoded; any other string is used as its UTF-8 bytes, as the OpenAI SDK does."""
    if secret.startswith("whsec_"):
        try:
            return base64.b64decode(secret.removeprefix("whsec_"), validate=True)
        except ValueError:
            raise ConfigError("a webhook secret starts with whsec_ but the rest is not base64; "
                              "copy the secret exactly as the provider's dashboard shows it") from None
    return secret.encode("utf-8")


_VERSION_SUFFIX = re.compile(r"/v1(?:beta|alpha)?$")


class ProviderConfig(BaseModel):
    """One provider: where to fetch objects a webhook names, with which key, and webhook secrets."""

    model_config = ConfigDict(extra="forbid")

    base_url: str
    api_key: SecretStr | None = None
    # tenant → secrets, newest first; any one verifying is enough (rotation).
    webhook_secrets: dict[str, list[SecretStr]] = Field(default_factory=dict)

    @field_validator("base_url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        if not re.match(r"^https?://", value):
            raise ValueError(f"base_url {value!r} must start with http:// or https://")
        # The SDKs' base URLs end with the API version (OpenAI's https://api.openai.com/v1, what
        # the simulator prints); the gateway's paths start with it (/v1/responses,
        # /v1beta/interactions/…), so a trailing version is dropped: both spellings work.
        return _VERSION_SUFFIX.sub("", value.rstrip("/"))

    @field_validator("webhook_secrets")
    @classmethod
    def _valid_secrets(cls, value: dict[str, list[SecretStr]]) -> dict[str, list[SecretStr]]:
        for tenant, secrets in value.items():
            _check_tenant(tenant)
            for secret in secrets:
                try:
                    secret_key(secret.get_secret_value())
                except ConfigError as exc:
                    raise ValueError(f"tenant {tenant!r}: {exc}") from None
        return value

    @property
    def takes_runs(self) -> bool:
        """Runs may go to this provider: it has an API key, or its base URL was pointed away
        from the provider's own (a local or compatible server that takes none)."""
        return self.api_key is not None or self.base_url not in _DEFAULT_BASE_URLS

    def keys_for(self, tenant: str) -> list[bytes]:
        """The HMAC keys of a tenant's secrets (empty: the tenant has no webhooks here)."""
        return [secret_key(s.get_secret_value()) for s in self.webhook_secrets.get(tenant, ())]


class JournalConfig(BaseModel):
    """``journal:`` in the gateway config: where teed frames wait while Kafka is away
    (services/gateway/spool/journal.py; docs/operations.md, "Kafka outages")."""

    model_config = ConfigDict(extra="forbid")

    # None: $XDG_STATE_HOME/modelevents/gateway-journal. The gateway keeps its journal in
    # <directory>/<instance_id>/<frames topic>: per instance, and for the topic it was meant for.
    directory: Path | None = None
    # The frames the journal may hold (their records' bytes); beyond, ``on_full`` applies.
    max_bytes: int = Field(default=1024 ** 3, ge=4096)
    # How long a batch of frames may wait for Kafka's acknowledgement before it goes to the
    # journal instead (and the frames after it, in order, until the journal is drained).
    deadline_s: float = Field(default=1.0, gt=0)
    # drop_newest: frames that do not fit are dropped (counted, logged with their run);
    # fail_closed: the same, and while the journal is full every tenant's new proxied calls
    # are refused (503) before the provider is called.
    on_full: Literal["drop_newest", "fail_closed"] = "drop_newest"
    # The frames offered and not yet written (to Kafka or the journal), in memory; beyond,
    # dropped (counted, logged).
    queue_bytes: int = Field(default=64 * 1024 * 1024, ge=1024)
    # How long the writer gathers offered frames before it sends them: frames of concurrent
    # streams then share produce requests (the proxy's clients never wait for it).
    linger_ms: float = Field(default=5.0, ge=0, le=1000)


class GatewayConfig(BaseModel):
    """Everything `modelevents gateway` needs. See the module docstring for the file format."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    # The tree's kafka section (services/cli/settings_tree.py sets it; not a key of the gateway's).
    kafka: PipelineSettings = Field(default_factory=PipelineSettings, exclude=True)
    default_tenant: str = "default"
    webhook_tolerance_s: int = Field(300, ge=1)
    # Bodies, per route (services/gateway/app.py refuses one over its limit with 413 before
    # reading it, or as soon as a chunked body grows past it). A webhook is one frame record, so
    # its limit can be at most WEBHOOK_BODY_FIT (checked below).
    max_body_bytes: int = Field(default_factory=lambda: WEBHOOK_BODY_FIT, ge=1)
    max_forward_bytes: int = Field(64 * 1024 * 1024, ge=1)
    max_run_request_bytes: int = Field(4 * 1024 * 1024, ge=1)
    max_other_body_bytes: int = Field(64 * 1024, ge=0)
    # A request whose body has not fully arrived this long after its headers is cut with 408 (a
    # client that trickles or stops would otherwise hold a connection and its buffer for ever).
    read_timeout_s: float = Field(60.0, gt=0)
    # A connection whose request line and headers are not complete this long after it opened
    # (or after its last response) is closed (services/gateway/connections.py); the headers of
    # one request may be at most max_header_bytes (larger: 400).
    header_timeout_s: float = Field(10.0, gt=0)
    max_header_bytes: int = Field(16 * 1024, ge=1024)
    # How long a request waits for Kafka's acknowledgement before answering 503 (the provider
    # retries; the record, if it is delivered after all, dedupes by frame_id).
    ack_timeout_s: float = Field(10.0, gt=0)
    # webhook-ids sent or acknowledged recently (services/gateway/inputs/deliveries.py): a redelivery
    # shares the first send, or is answered 200 without a second write, for dedupe_ttl_s (OpenAI
    # retries a delivery for up to 72 hours) and among the latest dedupe_cache_size.
    dedupe_cache_size: int = Field(100_000, ge=0)
    dedupe_ttl_s: float = Field(72 * 3600.0, gt=0)
    # The fetch of an object a webhook names: attempts and the first backoff (doubling, ≤ 60 s).
    fetch_attempts: int = Field(6, ge=1)
    fetch_backoff_s: float = Field(0.5, gt=0)
    fetch_timeout_s: float = Field(30.0, gt=0)
    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    # Runs the gateway starts (POST /v1/runs): the capability manifest (None: the shipped one),
    # the background polling schedule, and the provider calls' retries and timeout.
    capabilities: Path | None = None
    # The policy file whose tenants' hosted: sections govern hosted tools (services/policy/
    # hosted.py); the settings tree defaults it to tools.policy. None: no hosted-tool policy.
    policy: Path | None = None
    poll_initial_s: float = Field(0.5, gt=0)
    poll_max_s: float = Field(10.0, gt=0)
    terminal_timeout_s: float = Field(600.0, gt=0)
    call_attempts: int = Field(4, ge=1)
    call_backoff_s: float = Field(0.5, gt=0)
    call_timeout_s: float = Field(120.0, gt=0)
    # The runs this process started that it describes in GET /v1/runs/{id} (oldest forgotten).
    local_runs: int = Field(10_000, ge=1)
    # Provider calls in flight at once; beyond, POST /v1/runs answers 429 (Retry-After).
    max_calls_in_flight: int = Field(1000, ge=1)
    # Who this replica is in the calls records: unique among the live gateways, the same after a
    # restart (a StatefulSet's pod name), so that the next process with it takes up its calls.
    instance_id: str = Field(default_factory=lambda: _default_instance())
    # A gateway instance not heard of for this long (its heartbeat on the calls topic) has its
    # calls in flight taken up by another replica (services/gateway/calls/handover.py).
    call_lease_s: float = Field(60.0, gt=0)
    # Connections to the providers (all calls share one pool).
    max_provider_connections: int = Field(200, ge=1)
    # Followers of GET /v1/runs/{id}/events (services/gateway/events/followers.py): the events of a
    # followed run its one shared reader keeps for followers that join late, the events each
    # follower may have queued and not sent yet (at least the buffer: a joiner gets all of it),
    # and how long followers may send nothing while one's queue is full before that one (its
    # client stalled) ends after what it holds and resumes with Last-Event-ID.
    follower_buffer_events: int = Field(256, ge=0)
    follower_queue_events: int = Field(1024, ge=1)
    follower_patience_s: float = Field(2.0, gt=0)
    # tenant → bearer tokens for /v1/runs… (services/gateway/auth.py); empty: open API.
    api_tokens: dict[str, list[SecretStr]] = Field(default_factory=dict)
    # What is cut out of a run's input packet before it is written (services/gateway/
    # redaction.py): JSON fields and regular expressions; the secrets above are always cut.
    redaction: RedactionConfig = Field(default_factory=RedactionConfig)
    # Frames teed by the drop-in proxy: their way to Kafka, and their local journal meanwhile.
    journal: JournalConfig = Field(default_factory=JournalConfig)
    # The drop-in proxy (/proxy/{upstream}/…): its named upstreams, keys per tenant and the
    # tenants that fail closed (services/gateway/upstreams.py, docs/drop-in.md).
    proxy: ProxyConfig = Field(default_factory=ProxyConfig)

    @field_validator("max_body_bytes")
    @classmethod
    def _webhook_fits_a_record(cls, value: int) -> int:
        if value > WEBHOOK_BODY_FIT:
            raise ValueError(f"{value} is more than a webhook frame record holds; at most "
                             f"{WEBHOOK_BODY_FIT} (MAX_RECORD_BYTES {MAX_RECORD_BYTES} less the "
                             "frame's other fields)")
        return value

    @field_validator("default_tenant")
    @classmethod
    def _tenant_is_an_id(cls, value: str) -> str:
        return _check_tenant(value)

    @field_validator("instance_id")
    @classmethod
    def _instance_is_an_id(cls, value: str) -> str:
        try:
            return check_id(value, "instance_id")
        except InvalidId as exc:
            raise ValueError(str(exc)) from None

    @field_validator("providers")
    @classmethod
    def _known_providers(cls, value: dict[str, ProviderConfig]) -> dict[str, ProviderConfig]:
        unknown = sorted(set(value) - set(PROVIDERS))
        if unknown:
            raise ValueError(f"unknown provider(s) {', '.join(unknown)}; the gateway knows "
                             f"{', '.join(PROVIDERS)}")
        return value

    def provider(self, name: str) -> ProviderConfig | None:
        """A provider's settings by its config name or its event/manifest name (``google``)."""
        return self.providers.get(_PROVIDER_ALIASES.get(name, name))

    def held_secrets(self) -> list[str]:
        """Every credential of this config (API keys, webhook secrets, bearer tokens): what an
        input packet must never contain."""
        held = [t.get_secret_value() for tokens in self.api_tokens.values() for t in tokens]
        for entry in self.providers.values():
            if entry.api_key is not None:
                held.append(entry.api_key.get_secret_value())
            held += [s.get_secret_value() for secrets in entry.webhook_secrets.values()
                     for s in secrets]
        return held + self.proxy.secrets()

    def run_providers(self, names: list[str]) -> set[str]:
        """Which of ``names`` (manifest provider names) runs may go to (``takes_runs``)."""
        return {name for name in names
                if (entry := self.provider(name)) is not None and entry.takes_runs}
