"""Resolve a settings model from its layers: defaults < config file < environment < options.

A model is a pydantic-settings ``BaseSettings`` subclass of :class:`LayeredSettings`; its
sources are the layers of :mod:`~modelevents.services.settings.sources`, highest first, and
pydantic-settings merges them (mappings key by key). :func:`resolve` keeps the layers, so that
every value can say where it came from, and turns every problem — a secret file that cannot be
read, a value out of range, an unknown key — into one line of :class:`ConfigProblems`.

The config file is ``config`` if given (``--config``), else ``$MODELEVENTS_CONFIG``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from modelevents.schemas.errors import ConfigError
from modelevents.services.settings.problems import ConfigProblems, problem_lines
from modelevents.services.settings.sources import (
    DEFAULT,
    EnvVar,
    Layer,
    Origin,
    cli_layer,
    env_layer,
    file_layer,
    merge,
)

__all__ = ["ENV_CONFIG", "LayeredSettings", "Resolved", "config_path", "resolve"]

ENV_CONFIG = "MODELEVENTS_CONFIG"

# The layers of the model being resolved, highest first (pydantic-settings asks the model's
# class for its sources; a resolve call is what knows them).
_ACTIVE: ContextVar[tuple[Layer, ...]] = ContextVar("modelevents_settings_layers", default=())


class _LayerSource(PydanticBaseSettingsSource):
    def __init__(self, settings_cls: type[BaseSettings], layer: Layer) -> None:
        super().__init__(settings_cls)
        self.layer = layer

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.layer.values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return self.layer.values


class LayeredSettings(BaseSettings):
    """A settings tree read from the layers of :func:`resolve` only (no other source)."""

    model_config = SettingsConfigDict(extra="forbid")

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        return tuple(_LayerSource(settings_cls, layer) for layer in _ACTIVE.get())

    @classmethod
    def cross_checks(cls, values: Mapping[str, Any]) -> list[str]:
        """Checks of several values together that pydantic skips when a field of the same
        model failed (its after-validators do not run): run on the merged ``values`` then, so
        that every problem is reported at once."""
        return []


T = TypeVar("T", bound=LayeredSettings)


@dataclass
class Resolved(Generic[T]):
    """A resolved model and its layers (highest first): where each value came from."""

    settings: T
    layers: tuple[Layer, ...]
    config: Path | None

    def origin(self, key: tuple[str, ...]) -> Origin:
        return _origin(self.layers, key)


def _origin(layers: Iterable[Layer], key: tuple[str, ...]) -> Origin:
    for layer in layers:
        if (found := layer.origin_of(key)) is not None:
            return found
    return DEFAULT


def config_path(config: Path | str | None, env: Mapping[str, str]) -> Path | None:
    if config is not None:
        return Path(config)
    from_env = env.get(ENV_CONFIG, "").strip()
    return Path(from_env) if from_env else None


def _fields(model: type[BaseModel], key: tuple[str, ...]) -> str:
    # The keys a section allows, for "is not a setting" (the model of the section at key).
    for part in key:
        field = model.model_fields.get(part)
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return "(see docs/operations.md)"
        model = annotation
    return ", ".join(name for name, f in model.model_fields.items() if not f.exclude)


def resolve(model: type[T], *, config: Path | str | None = None,
            env: Mapping[str, str] | None = None, tables: Iterable[EnvVar] = (),
            cli: Mapping[str, tuple[Any, str]] | None = None,
            defaults: Mapping[str, Any] | None = None) -> Resolved[T]:
    """``model`` from defaults < the config file < the environment (``tables``) < ``cli``
    (``{"kafka.topic_prefix": (value, "--prefix")}``). Raises ConfigProblems: every problem."""
    env = os.environ if env is None else env
    tables = tuple(tables)
    path = config_path(config, env)
    try:
        file = file_layer(path)
    except ConfigError as exc:
        raise ConfigProblems([str(exc)]) from None
    options = cli_layer(cli or {})
    tenant = (options.values.get("gateway", {}).get("default_tenant")
              or file.values.get("gateway", {}).get("default_tenant") or "default")
    environment = env_layer(env, tables, tenant=str(tenant))
    base = Layer(values=dict(defaults or {}))
    layers = (options, environment, file, base)
    problems = [p for layer in layers for p in layer.problems]
    token = _ACTIVE.set(layers)
    try:
        settings = model()
    except ValidationError as exc:
        problems += problem_lines(exc, lambda key: _label(layers, key),
                                  lambda key: _fields(model, key))
        merged: dict[str, Any] = {}
        for layer in reversed(layers):
            merged = merge(merged, layer.values)
        problems += [p for p in model.cross_checks(merged) if p not in problems]
        raise ConfigProblems([_rename(p, layers, tables) for p in problems]) from None
    finally:
        _ACTIVE.reset(token)
    if problems:
        raise ConfigProblems(problems)
    return Resolved(settings, layers, path)


def _label(layers: Iterable[Layer], key: tuple[str, ...]) -> str:
    origin = _origin(layers, key)
    return origin.name if origin.kind != "default" else ".".join(key)


def _rename(line: str, layers: tuple[Layer, ...], tables: tuple[EnvVar, ...]) -> str:
    # A check of several values names them by their variables; a value that came from the file
    # or an option is named as it was given there instead.
    for var in tables:
        origin = _origin(layers, var.key)
        if origin.kind in ("file", "cli"):
            for name in var.names:
                line = re.sub(rf"\b{name}\b", origin.name, line)
    return line
