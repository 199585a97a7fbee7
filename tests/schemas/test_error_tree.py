"""The error tree is drawn once, in docs/errors.md, and the drawing is the classes' own tree:
every subclass of ModelEventsError in the package, under its parent, with the file that defines
it — a new error, a moved one or a renamed one fails here until the drawing says so."""

from __future__ import annotations

import importlib
import pkgutil
import re

import modelevents.adapters
import modelevents.consumers
import modelevents.schemas
import modelevents.services
from modelevents.schemas.errors import ModelEventsError
from tests.paths import REPO_ROOT

DRAWING = re.compile(r"<!-- error-tree -->\n```text\n(.*?)\n```\n<!-- /error-tree -->", re.S)


def _import_every_module() -> None:
    for package in (modelevents.schemas, modelevents.adapters, modelevents.services,
                    modelevents.consumers):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if not info.name.endswith("__main__"):  # running it is the CLI
                importlib.import_module(info.name)


def _file_of(cls: type) -> str:
    return cls.__module__.removeprefix("modelevents.").replace(".", "/") + ".py"


def _draw(root: type) -> str:
    lines = [f"{root.__name__:<36}{_file_of(root)}"]

    def walk(cls: type, prefix: str) -> None:
        children = sorted((c for c in cls.__subclasses__()
                           if c.__module__.startswith("modelevents.")),
                          key=lambda c: c.__name__)
        for index, child in enumerate(children):
            last = index == len(children) - 1
            lines.append(f"{prefix + ('└── ' if last else '├── ') + child.__name__:<36}"
                         f"{_file_of(child)}")
            walk(child, prefix + ("    " if last else "│   "))

    walk(root, "")
    return "\n".join(lines)


def test_the_drawn_error_tree_is_the_live_one() -> None:
    _import_every_module()
    found = DRAWING.search((REPO_ROOT / "docs" / "errors.md").read_text())
    assert found is not None, "docs/errors.md: no ```text block between the error-tree markers"
    live = _draw(ModelEventsError)
    assert found.group(1) == live, f"docs/errors.md's tree differs; the classes say:\n{live}"


def test_every_error_of_the_tree_is_described() -> None:
    _import_every_module()
    text = (REPO_ROOT / "docs" / "errors.md").read_text()
    names = re.findall(r"[├└]── (\w+)", _draw(ModelEventsError))
    undescribed = [name for name in names if f"| `{name}` |" not in text]
    assert not undescribed, f"docs/errors.md has no row for {undescribed}"
