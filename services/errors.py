"""The services' errors: the Kafka clients', the local broker's, the gateway's, the simulator's
and the demo's, each under the branch of the one error tree it belongs to. The tree is drawn in
docs/errors.md (checked against these classes by tests/schemas/test_error_tree.py), with what
raises each.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol

from modelevents.schemas.errors import ConfigError, InputError, ModelEventsError, SchemaError

__all__ = ["how_to_reach_kafka", "KafkaUnavailable", "KafkaAuthenticationFailed", "KafkaSetupError", "MissingToolError", "JarDownloadError",
           "PortInUseError", "StorageFormatError", "BrokerStartError", "BrokerStartTimeout",
           "ProviderHTTPError", "FollowUpFailed", "RequestRefused", "Unauthorized",
           "WebhookRejected", "DemoError", "UnreadableState", "CapabilityRejected",
           "UnknownScenario", "ManifestError", "MissingSDKError", "MissingExtra", "Rejection",
           "ProbeError"]

# --- Kafka -------------------------------------------------------------------------------------

_HOW_TO_START = (
    "start the project's local broker with `modelevents kafka start` (its port is "
    "$MODELEVENTS_KAFKA_PORT, default 9092), or point KAFKA_BOOTSTRAP_SERVERS at a running cluster"
)


def _is_local(bootstrap_servers: str) -> bool:
    """Whether the address can be the project's local broker: loopback only, and no cluster
    named in KAFKA_BOOTSTRAP_SERVERS."""
    if os.environ.get("KAFKA_BOOTSTRAP_SERVERS"):
        return False
    hosts = [server.strip().rsplit(":", 1)[0].strip("[]") for server in bootstrap_servers.split(",")]
    return all(host == "localhost" or host.startswith("127.") or host == "::1" for host in hosts)


def how_to_reach_kafka(bootstrap_servers: str) -> str:
    """What an operator does when Kafka at ``bootstrap_servers`` does not answer: start the local
    broker only where that can be the one meant, else look at the configured cluster."""
    if _is_local(bootstrap_servers):
        return _HOW_TO_START
    return (f"check that the cluster at {bootstrap_servers} (KAFKA_BOOTSTRAP_SERVERS, "
            "kafka.bootstrap_servers) is up and reachable from this host, and its brokers healthy")


class KafkaUnavailable(ModelEventsError):
    """The Kafka broker at the configured bootstrap address cannot be reached (or did not
    acknowledge in time: ``detail`` says which)."""

    def __init__(self, bootstrap_servers: str, detail: str = "") -> None:
        self.bootstrap_servers = bootstrap_servers
        self.detail = detail
        reason = f" ({detail})" if detail else ""
        super().__init__(f"cannot reach Kafka at {bootstrap_servers}{reason}; "
                         f"{how_to_reach_kafka(bootstrap_servers)}")


class KafkaAuthenticationFailed(ConfigError):
    """The brokers refused the client's SASL credentials, or the TLS handshake failed: a setting
    (named in the message) is wrong; retrying does not help. Never carries the password."""

    def __init__(self, bootstrap_servers: str, security: str, detail: str, fix: str) -> None:
        self.bootstrap_servers = bootstrap_servers
        super().__init__(f"Kafka at {bootstrap_servers} refused the connection ({security}): "
                         f"{detail}; {fix}")


class KafkaSetupError(ModelEventsError):
    """Base class: the local Kafka broker could not be set up. The message says what to do."""


class MissingToolError(KafkaSetupError):
    """``java`` (>= 17) or ``mvn`` is not installed."""


class JarDownloadError(KafkaSetupError):
    """Maven could not download the broker's jars."""


class PortInUseError(KafkaSetupError):
    """The configured port is taken by a process that is not this project's broker."""

    def __init__(self, message: str, port: int) -> None:
        super().__init__(message)
        self.port = port


class StorageFormatError(KafkaSetupError):
    """``kafka.tools.StorageTool format`` failed."""


class BrokerStartError(KafkaSetupError):
    """The broker JVM exited before it accepted clients."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message + (f"\n--- last lines of server.log ---\n{log_tail}" if log_tail else ""))
        self.log_tail = log_tail


class BrokerStartTimeout(BrokerStartError):
    """The broker did not accept clients within the start timeout."""


# --- providers and requests --------------------------------------------------------------------


class ProviderHTTPError(ModelEventsError):
    """A provider answered with an error that retrying did not fix (or cannot fix)."""

    def __init__(self, provider: str, status: int, body: bytes, url: str) -> None:
        self.provider, self.status, self.body = provider, status, body
        text = body[:300].decode("utf-8", "replace")
        super().__init__(f"{provider} answered {status} for {url}: {text}")


class FollowUpFailed(ModelEventsError):
    """A resume, poll, read-back or cancel the provider refused (after the retries)."""


class RequestRefused(ModelEventsError):
    """An HTTP request refused before anything was written: the status to answer and why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class Unauthorized(RequestRefused):
    """No valid bearer token: the 401's reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(401, reason)


class WebhookRejected(RequestRefused):
    """A webhook delivery refused before anything was written: HTTP status and the reason."""


class Rejection(Protocol):
    """Why one candidate target cannot take a request (``services/gateway/calls/router.py``)."""

    @property
    def refused(self) -> tuple[Any, ...]: ...

    def describe(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


class CapabilityRejected(InputError):
    """No candidate target offers every capability the request requires — or, code
    ``egress_rejected``, some were refused by the hosted-tool egress rules (the tenant's policy,
    or domain rules the target cannot enforce)."""

    def __init__(self, rejections: Sequence[Rejection]) -> None:
        self.rejections = list(rejections)
        lines = "\n  ".join(r.describe() for r in rejections)
        super().__init__("no target can take this request; change the target or preferences, "
                         f"or drop what the request requires:\n  {lines}")

    def details(self) -> list[dict[str, Any]]:
        """One object per candidate: provider, api, model, and ``missing`` or ``reason``."""
        return [r.to_dict() for r in self.rejections]

    @property
    def egress(self) -> bool:
        """Whether egress rules refused some candidate (the gateway's code ``egress_rejected``)."""
        return any(r.refused for r in self.rejections)

    def to_dict(self) -> dict[str, Any]:
        """What the gateway's 422 says (its problem adds the RFC 9457 members)."""
        code = "egress_rejected" if self.egress else "capability_rejected"
        return {"error": str(self), "code": code, "candidates": self.details()}


class ManifestError(ConfigError):
    """The capability manifest cannot be read or does not fit its schema."""


# --- the processor, the simulator, the demo ----------------------------------------------------


class UnreadableState(SchemaError):
    """A stored state this version cannot rebuild: not plain data of this format, a class it
    does not know, or a field it lacks with no default. The message names what."""


class UnknownScenario(InputError, LookupError):
    """No simulator scenario of that name; the message lists where names come from."""


class MissingSDKError(ConfigError):
    """An official provider SDK needed for request validation is not installed."""


class MissingExtra(ConfigError):
    """What was asked needs packages of an extra that is not installed; the message names the
    extra and the ``pip install`` line."""

    def __init__(self, what: str, extra: str, missing: str) -> None:
        super().__init__(f"{what} needs the {extra!r} extra: pip install 'modelevents[{extra}]' "
                         f"({missing} is not installed)")
        self.extra = extra
        self.missing = missing


class DemoError(ModelEventsError):
    """The demo could not finish (the worker died, or runs did not settle in time)."""


class ProbeError(ModelEventsError):
    """A capability probe cannot be made: the target is malformed or not in the manifest, or
    the gateway cannot be reached (``modelevents capabilities probe`` exits 2)."""
