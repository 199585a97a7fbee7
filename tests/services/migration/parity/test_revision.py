"""Naming and loading a revision of the adapters beside the installed one, without shadowing it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

import modelevents.adapters.base
from modelevents.adapters import openai_chat
from modelevents.adapters.registry import ADAPTERS
from modelevents.schemas.errors import ConfigError
from modelevents.schemas.events import ModelEvent
from modelevents.services.migration.parity.revision import load_revision
from modelevents.services.run_logic.normalizer import RunNormalizer
from modelevents.services.run_logic.renormalize import renormalize
from tests.paths import FIXTURES
from tests.services.migration.parity.recorded import (
    BEFORE_CHAT_FIXES,
    adapters_copy,
    edit,
    recorded_frames,
)


def test_a_git_revision_loads_beside_the_installed_adapters_without_shadowing_them() -> None:
    installed_chat = sys.modules["modelevents.adapters.openai_chat"]
    before = load_revision(BEFORE_CHAT_FIXES)

    old_chat = before.adapters["openai-chat"]
    assert old_chat.revision == "3" and openai_chat.OpenAIChatAdapter.revision == "4"
    assert before.revisions()["openai-chat"] == "openai_chat@3"
    assert re.fullmatch(re.escape(BEFORE_CHAT_FIXES) + r" \([0-9a-f]{12}\)", before.label)
    # Its modules live under a private name and use each other, not the installed ones.
    assert old_chat.__module__ == f"{before.package}.openai_chat"
    assert before.package.startswith("_modelevents_adapters_")
    assert not issubclass(old_chat, modelevents.adapters.base.Adapter)
    assert sys.modules["modelevents.adapters.openai_chat"] is installed_chat
    assert ADAPTERS["openai-chat"] is openai_chat.OpenAIChatAdapter
    # The schemas stay shared: both make the same ModelEvent class.
    frames = recorded_frames(FIXTURES / "openai-chat" / "refusal.sse")
    assert frames is not None
    events = renormalize(frames, "r", before.normalizer).events
    assert events and all(type(e) is ModelEvent for e in events)
    assert {e.adapter for e in events} == {"openai_chat@3"}
    # Loading it again gives the same modules (content-addressed), no second copy.
    assert load_revision(BEFORE_CHAT_FIXES).package == before.package


def test_a_checkout_directory_or_its_adapters_package_is_a_revision(tmp_path: Path) -> None:
    checkout = adapters_copy(tmp_path)
    edit(checkout / "adapters" / "openai_chat.py", 'revision = "4"', 'revision = "5"')
    by_checkout = load_revision(str(checkout))
    by_package = load_revision(str(checkout / "adapters"))
    assert by_checkout.package == by_package.package
    assert by_checkout.revisions()["openai-chat"] == "openai_chat@5"
    assert openai_chat.OpenAIChatAdapter.revision == "4"
    # Compiling it wrote nothing beside its sources (no bytecode with renamed imports).
    assert not list(checkout.rglob("__pycache__"))


def test_installed_is_the_processor_normalizer_itself() -> None:
    installed = load_revision("installed")
    assert installed.normalizer is RunNormalizer and installed.adapters is ADAPTERS


@pytest.mark.parametrize("spec, message", [
    ("/nonexistent/checkout", "no such directory"),
    (str(FIXTURES), "neither a checkout holding adapters/ nor an adapters package"),
    ("git:no-such-revision-anywhere", "git rev-parse"),
    ("git:", "name a revision after git:"),
])
def test_a_revision_that_cannot_be_named_is_a_clear_error(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_revision(spec)


def test_a_revision_that_does_not_load_is_a_clear_error(tmp_path: Path) -> None:
    checkout = adapters_copy(tmp_path)
    edit(checkout / "adapters" / "openai_chat.py", "from modelevents.schemas.events import (",
         "from modelevents.schemas.no_such_module import (")
    with pytest.raises(ConfigError, match="do not load beside the installed schemas "
                                          "\\(ModuleNotFoundError"):
        load_revision(str(checkout))


def test_a_bare_import_of_the_adapters_is_refused_rather_than_shadowed(tmp_path: Path) -> None:
    checkout = adapters_copy(tmp_path)
    path = checkout / "adapters" / "encodings.py"
    path.write_text(path.read_text() + "\nimport modelevents.adapters.base\n")
    with pytest.raises(ConfigError, match="encodings.py:.*without `as`"):
        load_revision(str(checkout))
