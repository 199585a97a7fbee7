"""The layers of the configuration and where each value came from.

Three readers, each giving a nested mapping of the settings tree (``{"kafka": {"partitions":
"8"}}``) and, for every value it gives, an :class:`Origin` (what ``config show`` prints and
what an error names):

- :func:`file_layer`: the config file, YAML or TOML by its suffix. The gateway's keys sit at the
  top of the file, as they always did (``port: 8080``); ``kafka:``, ``worker:`` and ``tools:``
  are sections of their own.
- :func:`env_layer`: the environment, by a table of :class:`EnvVar` (the names users already
  set: ``KAFKA_BOOTSTRAP_SERVERS``, ``OPENAI_API_KEY`` …). A secret ``NAME`` may instead be
  given as ``NAME_FILE=/run/secrets/x`` (a mounted Docker or Kubernetes secret): its content,
  less the trailing newline. Both set, or a file that cannot be read, is a problem naming them.
- :func:`cli_layer`: the options a command was given.

An empty variable counts as unset (``KAFKA_BOOTSTRAP_SERVERS=`` in a compose file means "the
default"), as before.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from modelevents.schemas.errors import ConfigError

__all__ = ["EXAMPLE_TOOLS", "EnvVar", "Layer", "Origin", "SECTIONS", "SERVICES", "cli_layer", "env_layer", "file_layer",
           "merge", "read_config_file", "split_secrets"]

Key = tuple[str, ...]

# The sections of the tree that a config file names; every other top-level key is the gateway's.
SECTIONS = ("kafka", "worker", "tools")
# The sections each service reads (`config show --service`).
SERVICES: dict[str, tuple[str, ...]] = {
    "gateway": ("kafka", "gateway"), "ui": ("kafka", "gateway"), "worker": ("kafka", "worker"),
    "tools": ("kafka", "tools"), "audit": ("kafka",), "replay": ("kafka",), "feed": ("kafka",),
    "tail": ("kafka",), "topics": ("kafka",), "otel": ("kafka",),
}
# `tools run`'s registry when none is named: the SQLite examples.
EXAMPLE_TOOLS = "modelevents.consumers.tools.sqlite_tools"


@dataclass(frozen=True)
class Origin:
    """Where a value came from: ``kind`` default|file|env|cli, ``name`` the variable, the
    option or ``FILE: key``."""

    kind: Literal["default", "file", "env", "cli"]
    name: str = ""

    def __str__(self) -> str:
        return f"{self.kind} {self.name}" if self.name else self.kind


DEFAULT = Origin("default")


@dataclass
class Layer:
    """One layer's values (nested, as the tree is) and the origin of each leaf it sets."""

    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[Key, Origin] = field(default_factory=dict)
    # What could not be read (a secret file, a variable set twice): one line each.
    problems: list[str] = field(default_factory=list)

    def set(self, key: Key, value: Any, origin: Origin) -> None:
        node = self.values
        for part in key[:-1]:
            node = node.setdefault(part, {})
        node[key[-1]] = value
        self.origins[key] = origin

    def origin_of(self, key: Key) -> Origin | None:
        """The origin of ``key`` or of the nearest value above it this layer set."""
        for end in range(len(key), 0, -1):
            if (found := self.origins.get(key[:end])) is not None:
                return found
        return None


def merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` on top of ``base``, mappings merged key by key (a list or a scalar replaces)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


# --- the config file ------------------------------------------------------------------------

def read_config_file(path: Path) -> dict[str, Any]:
    """The file's mapping; a file that cannot be read or parsed is a ConfigError saying so."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the config file {path}: {exc.strerror or exc}") from exc
    kind = "TOML" if path.suffix == ".toml" else "YAML"
    try:
        data = tomllib.loads(text) if kind == "TOML" else yaml.safe_load(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path} is not valid {kind}: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the config must be a mapping of settings, not "
                          f"{type(data).__name__}")
    return data


def _leaves(prefix: Key, value: Any) -> Iterable[Key]:
    if isinstance(value, Mapping) and value:
        for key, inner in value.items():
            yield from _leaves((*prefix, str(key)), inner)
    else:
        yield prefix


def file_layer(path: Path | None) -> Layer:
    layer = Layer()
    if path is None:
        return layer
    for key, value in read_config_file(path).items():
        tree_key: Key = (key,) if key in SECTIONS else ("gateway", key)
        layer.set(tree_key, value, Origin("file", f"{path}: {key}"))
        if isinstance(value, Mapping) and value:
            del layer.origins[tree_key]  # a section: its leaves have origins, not the section
        for leaf in _leaves((), value):
            if leaf:
                layer.origins[(*tree_key, *leaf)] = Origin(
                    "file", f"{path}: {'.'.join((key, *leaf))}")
    return layer


# --- the environment ------------------------------------------------------------------------

@dataclass(frozen=True)
class EnvVar:
    """A variable (or its aliases, the first one set winning) and where its value goes.

    ``form``: ``value`` as it is; ``list`` several secrets separated by commas or spaces;
    ``tenant_list`` the same, as the default tenant's (``{tenant: [...]}``).
    """

    names: tuple[str, ...]
    key: Key
    secret: bool = False
    form: Literal["value", "list", "tenant_list"] = "value"


def split_secrets(raw: str) -> list[str]:
    return [s for s in re.split(r"[,\s]+", raw) if s]


def _read_secret(env: Mapping[str, str], name: str) -> tuple[str | None, str, str | None]:
    """(value, the variable it came from, problem) of a secret given as NAME or NAME_FILE."""
    given = env.get(name, "")
    path = env.get(f"{name}_FILE", "").strip()
    if given and path:
        return None, name, (f"{name} and {name}_FILE are both set: set one of them (the value, "
                            "or the file that holds it)")
    if not path:
        return given or None, name, None
    try:
        with open(path, encoding="utf-8") as fh:
            # A secret mounted from Kubernetes or written by `echo` ends with a newline that is
            # not part of the secret.
            return fh.read().rstrip("\r\n") or None, f"{name}_FILE", None
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or type(exc).__name__
        return None, f"{name}_FILE", f"{name}_FILE={path}: cannot read it ({reason})"


def env_layer(env: Mapping[str, str], table: Iterable[EnvVar], *, tenant: str = "default") -> Layer:
    layer = Layer()
    for var in table:
        for name in var.names:
            if var.secret:
                raw, source, problem = _read_secret(env, name)
                if problem:
                    layer.problems.append(problem)
                    break
            else:
                raw, source = env.get(name, "").strip() or None, name
            if raw is None:
                continue
            value: Any = raw if var.form == "value" else split_secrets(raw)
            key = var.key
            if var.form == "tenant_list":
                value, key = {tenant: value}, (*var.key, tenant)
            layer.set(var.key, value, Origin("env", source))
            layer.origins[key] = Origin("env", source)
            break
    return layer


# --- the options ----------------------------------------------------------------------------

def cli_layer(options: Mapping[str, tuple[Any, str]]) -> Layer:
    """``{"kafka.topic_prefix": (value, "--prefix")}``; None values are options not given."""
    layer = Layer()
    for dotted, (value, option) in options.items():
        if value is not None:
            layer.set(tuple(dotted.split(".")), value, Origin("cli", option))
    return layer
