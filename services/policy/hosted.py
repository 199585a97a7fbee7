"""The ``hosted:`` section of a tenant in the policy file: what provider-run tools may do.

The tool executor's policy file (consumers/tools/policy.py) names tenants; each may carry::

    tenants:
      acme:
        hosted:
          tools: [web_search, web_fetch, code_execution, mcp]  # omitted/empty: none
          allowed_domains: [docs.python.org]   # a domain covers its subdomains; omitted: any not blocked
          blocked_domains: [evil.example]
          mcp_servers: [{label: docs, url: "https://mcp.example.com/sse"}]
          code_network: false                  # may code execution reach the network
          sources: {trusted: [docs.python.org, "file:file_abc"], untrusted: [reddit.com],
                    blocked: [evil.example]}

The gateway reads it to refuse and restrict a request before it is sent; the worker reads it to
judge what came back (``trust_of``). A tenant without a ``hosted`` section has no policy here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml

from modelevents.schemas.errors import ConfigError

__all__ = ["HostedPolicy", "McpServer", "Trust", "domain_matches", "hosted_policies_from_file",
           "load_hosted_policies", "trust_of"]

Trust = Literal["trusted", "untrusted", "blocked", "unknown"]


@dataclass(frozen=True)
class McpServer:
    label: str
    url: str


@dataclass(frozen=True)
class HostedPolicy:
    tools: tuple[str, ...] = ()
    allowed_domains: tuple[str, ...] | None = None  # None: any domain not blocked
    blocked_domains: tuple[str, ...] = ()
    mcp_servers: tuple[McpServer, ...] = ()
    code_network: bool = False
    trusted: tuple[str, ...] = ()
    untrusted: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()


_KEYS = {"tools", "allowed_domains", "blocked_domains", "mcp_servers", "code_network", "sources"}
_SOURCE_KEYS = {"trusted", "untrusted", "blocked"}


def load_hosted_policies(raw: Mapping[str, Any]) -> dict[str, HostedPolicy]:
    """Tenant → its hosted policy, from the parsed policy file (tenants without one left out).
    Raises ConfigError naming the tenant and the key that is wrong."""
    out: dict[str, HostedPolicy] = {}
    for tenant, spec in ((raw or {}).get("tenants") or {}).items():
        hosted = (spec or {}).get("hosted")
        if hosted is not None:
            out[str(tenant)] = _policy(str(tenant), hosted)
    return out


def hosted_policies_from_file(path: Path) -> dict[str, HostedPolicy]:
    """:func:`load_hosted_policies` of a JSON or YAML policy file."""
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        # One line: YAML's own message points at the spot over several.
        raise ConfigError(f"policy file {path}: {' '.join(str(exc).split())}") from exc
    if not isinstance(raw, Mapping):
        raise ConfigError(f"policy file {path}: expected a mapping with `tenants:`")
    return load_hosted_policies(raw)


def _policy(tenant: str, spec: Any) -> HostedPolicy:
    where = f"policy of tenant {tenant!r}, hosted"
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(spec).__name__}")
    unknown = set(spec) - _KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(_KEYS)}")
    sources = spec.get("sources") or {}
    if not isinstance(sources, Mapping) or set(sources) - _SOURCE_KEYS:
        raise ConfigError(f"{where}.sources: expected a mapping of {sorted(_SOURCE_KEYS)}")
    allowed = spec.get("allowed_domains")
    return HostedPolicy(
        tools=_strings(spec.get("tools"), f"{where}.tools"),
        allowed_domains=None if allowed is None else _strings(allowed, f"{where}.allowed_domains"),
        blocked_domains=_strings(spec.get("blocked_domains"), f"{where}.blocked_domains"),
        mcp_servers=_servers(spec.get("mcp_servers"), f"{where}.mcp_servers"),
        code_network=_flag(spec.get("code_network", False), f"{where}.code_network"),
        **{key: _strings(sources.get(key), f"{where}.sources.{key}") for key in _SOURCE_KEYS})


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where}: expected a list of non-empty strings")
    return tuple(value)


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false")
    return value


def _servers(value: Any, where: str) -> tuple[McpServer, ...]:
    servers = []
    for item in value or ():
        if not (isinstance(item, Mapping) and isinstance(item.get("label"), str)
                and isinstance(item.get("url"), str) and set(item) <= {"label", "url"}):
            raise ConfigError(f"{where}: each server is {{label: NAME, url: URL}}")
        servers.append(McpServer(label=item["label"], url=item["url"]))
    return tuple(servers)


def _host(name: str) -> str:
    """A host name lower-cased and IDNA-encoded (so ``Bücher.example`` meets
    ``xn--bcher-kva.example``); a name IDNA refuses stays as it is, lower-cased."""
    name = name.strip().rstrip(".").lower()
    try:
        return name.encode("idna").decode("ascii")
    except UnicodeError:
        return name


def domain_matches(host: str, rules: Iterable[str]) -> bool:
    """True when ``host`` is one of ``rules`` or a subdomain of one (case-insensitive, IDNA)."""
    host = _host(host)
    if not host:
        return False
    for rule in rules:
        domain = _host(rule)
        if domain and (host == domain or host.endswith("." + domain)):
            return True
    return False


def _matches(source: str, host: str | None, rules: tuple[str, ...]) -> bool:
    """A rule names a domain, or a source itself (``file:ID``, ``mcp:LABEL``, a whole URL)."""
    exact = [r for r in rules if ":" in r]
    if source in exact:
        return True
    return host is not None and domain_matches(host, (r for r in rules if ":" not in r))


def trust_of(source: str, policy: HostedPolicy | None) -> Trust:
    """The verdict of the tenant's lists on one source: a URL (its host is matched against
    domains), ``file:ID``, ``mcp:LABEL`` or an MCP server's URL. Blocked wins over trusted; a
    blocked domain of the egress rules is a blocked source too. No policy: ``unknown``."""
    if policy is None or not source:
        return "unknown"
    host = urlsplit(source).hostname if "://" in source else None
    if _matches(source, host, policy.blocked) or (
            host is not None and domain_matches(host, policy.blocked_domains)):
        return "blocked"
    if _matches(source, host, policy.untrusted):
        return "untrusted"
    if _matches(source, host, policy.trusted):
        return "trusted"
    return "unknown"
