"""services/processor/faust/ is where the worker reaches into faust-streaming, and only there: the
rest of the processor imports Faust's public package alone (``import faust``, ``import mode``),
and each module of the package says in a short docstring what it does and why it reaches in."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import modelevents.services.processor as processor
import modelevents.services.processor.faust as package

PACKAGE_DIR = Path(package.__file__).parent
MODULES = sorted(info.name for info in pkgutil.iter_modules(package.__path__))


def _faust_imports(path: Path) -> list[str]:
    """Every import of a module of faust or mode below their top-level package."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        found += [name for name in names if name.split(".")[0] in ("faust", "mode") and "." in name]
    return found


def test_the_package_holds_one_module_per_concern() -> None:
    assert MODULES == ["monitor", "ordering", "recovery", "tables", "transport"]


def test_only_the_package_imports_faust_below_its_public_package() -> None:
    outside = {path.name: _faust_imports(path)
               for path in Path(processor.__file__).parent.glob("*.py")}
    assert not {name: found for name, found in outside.items() if found}
    inside = {name: _faust_imports(PACKAGE_DIR / f"{name}.py") for name in MODULES}
    assert inside["transport"] and inside["monitor"]  # the driver's classes, the Monitor


def test_each_module_says_what_it_does_and_why_it_reaches_into_faust_in_15_lines() -> None:
    for name in MODULES:
        doc = importlib.import_module(f"{package.__name__}.{name}").__doc__
        assert doc, name
        assert len(doc.strip().splitlines()) <= 15, name
        assert "0.15.3" in doc, f"{name}: which faust-streaming it reaches into"
        assert "the one place" not in doc.lower(), f"{name}: the package docstring says it"
    assert package.__doc__ and package.__doc__.lower().count("the one place that reaches into faust") == 1
