"""The drop-in proxy's settings (``proxy:`` in the gateway config): its named upstreams.

An application points its SDK at ``http://<gateway>/proxy/<upstream>/…`` (docs/drop-in.md). The
upstream name picks where the request goes:

- ``openai``, ``anthropic``, ``gemini`` — the gateway's providers (``providers:``): their base
  URL and API key, unless ``proxy.upstreams`` names them with settings of their own;
- any other name configured under ``proxy.upstreams`` — an OpenAI-compatible server (vLLM,
  Ollama, LM Studio, OpenRouter, Groq, xAI, DeepSeek, Azure OpenAI's v1 API …) or another
  endpoint of a provider API::

      proxy:
        upstreams:
          groq: {base_url: https://api.groq.com/openai/v1, api_key: gsk_…}
          vllm: {base_url: http://vllm:8000/v1, provider: vllm}
          openai: {tenant_keys: {acme: sk-acme-…}}
        fail_closed: [acme]
        tenants:
          default: {requests_per_minute: 600, max_in_flight: 32}
          acme: {requests_per_minute: 120, max_in_flight: 8, tokens_per_day: 2_000_000}

The key sent upstream is the client's own (its ``Authorization``, ``x-api-key``,
``x-goog-api-key`` or ``api-key`` header) when it sends one, else the upstream's key for the
caller's tenant (``tenant_keys``), else its ``api_key``. ``provider`` is the provider name the
run's events carry (default: the API's own for the built-in upstreams, the upstream's name for
the others). ``fail_closed`` tenants are answered 503 before the provider is called while Kafka
is unreachable; the others are served and their frames kept as the frame tee keeps them.
``tenants`` are each tenant's limits (``default``: every tenant not named), enforced by
``proxy/limits.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationInfo, field_validator

from modelevents.schemas.errors import InvalidId
from modelevents.schemas.ids import check_id, check_provider

__all__ = ["DEFAULT_TENANT_LIMITS", "ProxyConfig", "TenantLimits", "Upstream", "BUILT_IN_UPSTREAMS", "strip_version"]

# The upstream names that stand for the gateway's own providers (GatewayConfig.providers).
BUILT_IN_UPSTREAMS = ("openai", "anthropic", "gemini")

_VERSION_SUFFIX = re.compile(r"/v1(?:beta|alpha)?$")


def strip_version(base_url: str) -> str:
    """A base URL without its trailing slash and API version: the SDKs' base URLs end with it
    (``https://api.openai.com/v1``) and the proxied paths start with it."""
    return _VERSION_SUFFIX.sub("", base_url.rstrip("/"))


def _check_tenants(tenants: Iterable[str], where: str) -> None:
    for tenant in tenants:
        try:
            check_id(tenant, "tenant")
        except InvalidId as exc:
            raise ValueError(f"{where}{exc}") from None


class Upstream(BaseModel):
    """One named upstream (see the module docstring)."""

    model_config = ConfigDict(extra="forbid")

    # None only for a built-in name: the provider's base URL.
    base_url: str | None = None
    api_key: SecretStr | None = None
    tenant_keys: dict[str, SecretStr] = Field(default_factory=dict)
    provider: str | None = None

    @field_validator("base_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is None:
            return None
        if not re.match(r"^https?://", value):
            raise ValueError(f"base_url {value!r} must start with http:// or https://")
        return strip_version(value)

    @field_validator("provider")
    @classmethod
    def _provider_name(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                check_provider(value)
            except InvalidId as exc:
                raise ValueError(str(exc)) from None
        return value

    @field_validator("tenant_keys")
    @classmethod
    def _tenants(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        _check_tenants(value, "")
        return value

    def secrets(self) -> list[str]:
        """Every key of this upstream (what an input packet must never contain)."""
        keys = [key.get_secret_value() for key in self.tenant_keys.values()]
        if self.api_key is not None:
            keys.append(self.api_key.get_secret_value())
        return keys


class TenantLimits(BaseModel):
    """One tenant's limits on its calls (proxied, and POST /v1/runs); a limit left out is no
    limit. An entry replaces
    ``default`` as a whole (it does not inherit the limits it leaves out)."""

    model_config = ConfigDict(extra="forbid")

    # Requests let through per minute (a token bucket of burst requests, refilled evenly),
    # counted by each gateway process: N replicas let through N times as many.
    requests_per_minute: int | None = Field(default=None, ge=1)
    # The bucket's size: requests let through at once after a quiet minute (default: the
    # requests of a minute).
    burst: int | None = Field(default=None, ge=1)
    # Calls of the tenant in flight at once on this process.
    max_in_flight: int | None = Field(default=None, ge=1)
    # Tokens the tenant's runs (proxied or started by POST /v1/runs) may use per UTC day,
    # summed from the runs' states on ``runs``: every process sees the same sum.
    tokens_per_day: int | None = Field(default=None, ge=1)

    @field_validator("burst")
    @classmethod
    def _burst_needs_rate(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and info.data.get("requests_per_minute") is None:
            raise ValueError("burst sizes the requests_per_minute bucket: set "
                             "requests_per_minute as well")
        return value


# The name under ``proxy.tenants`` whose limits every tenant not named there gets.
DEFAULT_TENANT_LIMITS = "default"


class ProxyConfig(BaseModel):
    """``proxy:`` in the gateway config."""

    model_config = ConfigDict(extra="forbid")

    upstreams: dict[str, Upstream] = Field(default_factory=dict)
    # Tenants answered 503 before the provider is called while Kafka is unreachable.
    fail_closed: list[str] = Field(default_factory=list)
    # The largest request body a proxied call may send (images and files travel inline).
    max_request_bytes: int = Field(default=32 * 1024 * 1024, ge=1)
    # Each tenant's limits (requests per minute, calls in flight, tokens per day); "default":
    # those of every tenant not named. No entry: no limit but max_calls_in_flight.
    tenants: dict[str, TenantLimits] = Field(default_factory=dict)

    @field_validator("upstreams")
    @classmethod
    def _names(cls, value: dict[str, Upstream]) -> dict[str, Upstream]:
        for name, upstream in value.items():
            try:
                check_provider(name)
            except InvalidId as exc:
                raise ValueError(f"upstream name: {exc}") from None
            if upstream.base_url is None and name not in BUILT_IN_UPSTREAMS:
                raise ValueError(f"upstream {name!r} needs a base_url (only "
                                 f"{', '.join(BUILT_IN_UPSTREAMS)} default to the gateway's "
                                 "providers)")
        return value

    @field_validator("tenants")
    @classmethod
    def _tenant_names(cls, value: dict[str, TenantLimits]) -> dict[str, TenantLimits]:
        _check_tenants(value, "proxy.tenants: ")
        return value

    def limits_of(self, tenant: str) -> TenantLimits | None:
        """The tenant's limits: its own entry, else ``default``'s, else None (no limit)."""
        return self.tenants.get(tenant) or self.tenants.get(DEFAULT_TENANT_LIMITS)

    def secrets(self) -> list[str]:
        return [key for upstream in self.upstreams.values() for key in upstream.secrets()]
