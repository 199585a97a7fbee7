"""The ``hosted:`` section of the policy file: what provider-hosted tools a tenant may use, where
they may reach, and how far their sources are trusted.

The tool executor's policy file (``consumers/tools/policy.py``) holds, per tenant, a
``hosted:`` section that the gateway (egress, before sending: ``services/gateway/calls/egress.py``)
and the worker (source trust, after the fact) read too::

    tenants:
      acme:
        hosted:
          tools: [web_search, web_fetch, code_execution, mcp]   # omitted or empty: none
          allowed_domains: [docs.python.org, example.com]        # omitted: any not blocked
          blocked_domains: [evil.example]
          mcp_servers: [{label: docs, url: "https://mcp.example.com/sse"}]  # the only ones
          code_network: false                 # may code execution reach the network (default no)
          sources:
            trusted: [docs.python.org, "file:file_abc123"]
            untrusted: [reddit.com]
            blocked: [evil.example]

A domain covers its subdomains; names are compared case-insensitively in their IDNA form
(``schemas/domains.py``). A tenant without a ``hosted:`` section may enable no hosted tool.
Where no policy file is configured there is no policy at all: everything is allowed, every
source's trust is ``unknown``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml

from modelevents.schemas.domains import covered, normalize_domain
from modelevents.schemas.errors import ConfigError
from modelevents.schemas.transcript import HOSTED_TOOLS

__all__ = ["HostedPolicy", "McpServer", "Trust", "domain_matches", "load_hosted_policies",
           "load_policy_file", "mcp_url_key", "trust_of"]

Trust = Literal["trusted", "untrusted", "blocked", "unknown"]

_KEYS = frozenset({"tools", "allowed_domains", "blocked_domains", "mcp_servers", "code_network",
                   "sources"})
_SOURCE_KEYS = frozenset({"trusted", "untrusted", "blocked"})


@dataclass(frozen=True)
class McpServer:
    label: str
    url: str


@dataclass(frozen=True)
class HostedPolicy:
    tools: tuple[str, ...] = ()
    allowed_domains: tuple[str, ...] = ()
    blocked_domains: tuple[str, ...] = ()
    mcp_servers: tuple[McpServer, ...] = ()
    code_network: bool = False
    trusted: tuple[str, ...] = ()
    untrusted: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()


def load_hosted_policies(raw: dict) -> dict[str, HostedPolicy]:
    """Tenant → its hosted policy, from a parsed policy file (``{"tenants": {...}}``). Every
    tenant the file names is in the result (without ``hosted:``: the empty policy). Raises
    ConfigError naming the tenant and the key at fault."""
    tenants = (raw or {}).get("tenants") or {}
    if not isinstance(tenants, Mapping):
        raise ConfigError("policy file: 'tenants' must map tenant names to their policies")
    return {str(name): _tenant(str(name), (spec or {}).get("hosted") or {})
            for name, spec in tenants.items()}


def load_policy_file(path: Path | str) -> dict[str, HostedPolicy]:
    """``load_hosted_policies`` of a YAML or JSON policy file."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        # One line: YAML's own message points at the spot over several.
        raise ConfigError(f"policy file {path}: {' '.join(str(exc).split())}") from None
    if not isinstance(raw, Mapping):
        raise ConfigError(f"policy file {path}: expected a mapping with 'tenants'")
    return load_hosted_policies(dict(raw))


def domain_matches(host: str, rules: Iterable[str]) -> bool:
    """Is ``host`` one of ``rules`` or a subdomain of one (case-insensitive, IDNA-normalized)?
    A host or rule that is no valid domain name matches nothing."""
    try:
        name = normalize_domain(host)
    except ValueError:
        return False
    return covered(name, [rule for rule in (_quiet_domain(r) for r in rules) if rule])


def trust_of(source: str, policy: HostedPolicy | None) -> Trust:
    """The trust of a source — a URL (its host is matched against the domain entries),
    ``file:ID``, ``mcp:LABEL`` or an MCP server's URL (as ``mcp:LABEL`` of the server the
    policy lists with that URL). The most cautious list that names it wins: blocked, then
    untrusted, then trusted; none: ``unknown`` (also without a policy). A URL whose host the
    egress rules block (``blocked_domains``) is a blocked source too."""
    if policy is None or not source:
        return "unknown"
    keys = _source_keys(source, policy)
    if keys[1] is not None and covered(keys[1], policy.blocked_domains):
        return "blocked"
    for verdict, entries in (("blocked", policy.blocked), ("untrusted", policy.untrusted),
                             ("trusted", policy.trusted)):
        if _names(keys, entries):
            return verdict  # type: ignore[return-value]
    return "unknown"


# --- parsing ----------------------------------------------------------------------------------


def _tenant(name: str, spec: Any) -> HostedPolicy:
    where = f"policy of tenant {name!r}, hosted"
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where}: expected a mapping of {', '.join(sorted(_KEYS))}")
    unknown = sorted(set(spec) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown keys {unknown}; known: {', '.join(sorted(_KEYS))}")
    tools = tuple(_strings(spec.get("tools"), f"{where}.tools"))
    bad = [t for t in tools if t not in HOSTED_TOOLS]
    if bad:
        raise ConfigError(f"{where}.tools: unknown hosted tools {bad}; known: "
                          f"{', '.join(HOSTED_TOOLS)}")
    sources = spec.get("sources") or {}
    if not isinstance(sources, Mapping) or set(sources) - _SOURCE_KEYS:
        raise ConfigError(f"{where}.sources: expected a mapping of trusted, untrusted, blocked")
    code_network = spec.get("code_network", False)
    if not isinstance(code_network, bool):
        raise ConfigError(f"{where}.code_network: expected true or false")
    return HostedPolicy(
        tools=tools,
        allowed_domains=_domain_list(spec.get("allowed_domains"), f"{where}.allowed_domains"),
        blocked_domains=_domain_list(spec.get("blocked_domains"), f"{where}.blocked_domains"),
        mcp_servers=tuple(_mcp(entry, f"{where}.mcp_servers[{index}]")
                          for index, entry in enumerate(spec.get("mcp_servers") or ())),
        code_network=code_network,
        **{key: tuple(_source(s, f"{where}.sources.{key}")
                      for s in _strings(sources.get(key), f"{where}.sources.{key}"))
           for key in ("trusted", "untrusted", "blocked")})


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of strings")
    return value


def _domain_list(value: Any, where: str) -> tuple[str, ...]:
    try:
        return tuple(dict.fromkeys(normalize_domain(v) for v in _strings(value, where)))
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _mcp(entry: Any, where: str) -> McpServer:
    if not isinstance(entry, Mapping) or set(entry) != {"label", "url"}:
        raise ConfigError(f"{where}: expected {{label: ..., url: https://...}}")
    label, url = entry["label"], entry["url"]
    if not isinstance(label, str) or not label:
        raise ConfigError(f"{where}.label: expected the server's label")
    if not isinstance(url, str) or urlsplit(url).scheme != "https" or not urlsplit(url).hostname:
        raise ConfigError(f"{where}.url: expected an https:// URL, got {url!r}")
    return McpServer(label, url)


def _source(entry: str, where: str) -> str:
    if entry.startswith(("file:", "mcp:")):
        return entry
    try:
        return normalize_domain(urlsplit(entry).hostname or "" if "://" in entry else entry)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc} (or give file:ID / mcp:LABEL)") from None


# --- matching ---------------------------------------------------------------------------------


def mcp_url_key(url: str) -> str:
    """An MCP URL as compared: scheme and host in lower case, no trailing slash."""
    parts = urlsplit(url)
    netloc = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return f"{parts.scheme.lower()}://{netloc}{parts.path.rstrip('/')}" + (
        f"?{parts.query}" if parts.query else "")


def _quiet_domain(value: str) -> str | None:
    try:
        return normalize_domain(value)
    except ValueError:
        return None


def _source_keys(source: str, policy: HostedPolicy) -> tuple[set[str], str | None]:
    """The exact names a source goes by (``file:…``, ``mcp:…``) and its host, if it has one."""
    if source.startswith(("file:", "mcp:")):
        return {source}, None
    names: set[str] = set()
    if "://" in source:
        key = mcp_url_key(source)
        names.update(f"mcp:{s.label}" for s in policy.mcp_servers if mcp_url_key(s.url) == key)
        host = urlsplit(source).hostname
    else:
        host = source
    return names, _quiet_domain(host or "")


def _names(keys: tuple[set[str], str | None], entries: tuple[str, ...]) -> bool:
    names, host = keys
    if names & set(entries):
        return True
    return host is not None and covered(host, [e for e in entries
                                               if not e.startswith(("file:", "mcp:"))])
