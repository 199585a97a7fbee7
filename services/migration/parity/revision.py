"""Name a revision of the adapters and load it beside the installed one.

A revision is named by what the user has at hand (``eval parity --adapters``):

- ``installed`` — the adapters this process imports (``modelevents.adapters``);
- ``DIR`` — another checkout (a directory holding ``adapters/``), or an ``adapters/`` package
  itself (it holds ``registry.py``), e.g. an installed ``site-packages/modelevents``;
- ``git:REV`` — a git revision of the repository in the current directory: its ``adapters/``
  is extracted with ``git archive`` into a temporary directory.

Loading never shadows the installed adapters: the revision's package is imported under a
private name (``_modelevents_adapters_<digest of its sources>``) by a finder of its own, and
its imports of ``modelevents.adapters…`` are rewritten to that name while it compiles, so its
modules use each other and nothing else of ``adapters``. The schemas (``modelevents.schemas``)
stay shared: both revisions make the same ModelEvent objects, which is what makes their events
comparable. No bytecode is written beside the revision's sources.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

from modelevents.adapters.base import Adapter
from modelevents.schemas.errors import ConfigError
from modelevents.services.run_logic.normalizer import RunNormalizer

INSTALLED = "installed"
GIT = "git:"
_SHARED = "modelevents.adapters"
_PRIVATE = "_modelevents_adapters_"
# Temporary directories of extracted git revisions: kept while the process runs (a revision's
# module may import another of its modules late), removed at exit.
_EXTRACTED: list[tempfile.TemporaryDirectory[str]] = []


@dataclass(frozen=True)
class AdapterRevision:
    """One revision of the adapters, loaded: provider API → its adapter class."""

    spec: str  # as the user named it
    label: str  # what reports print: installed, git:REV (commit), or the directory
    package: str  # the module name it is loaded under
    adapters: Mapping[str, type[Adapter]]
    normalizer: type[RunNormalizer]  # the processor's per-run normalizer over these adapters

    def revisions(self) -> dict[str, str]:
        """Provider API → ``name@revision`` of its adapter."""
        return {api: f"{cls.name}@{cls.revision}" for api, cls in self.adapters.items()}


# --- loading a package under a private name ----------------------------------------------------


class _Rewriter(ast.NodeTransformer):
    def __init__(self, package: str, path: str) -> None:
        self.package = package
        self.path = path

    def _renamed(self, name: str) -> str:
        return self.package + name[len(_SHARED):]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.ImportFrom:
        module = node.module or ""
        if node.level == 0 and (module == _SHARED or module.startswith(_SHARED + ".")):
            node.module = self._renamed(module)
        return node

    def visit_Import(self, node: ast.Import) -> ast.Import:
        for alias in node.names:
            if alias.name == _SHARED or alias.name.startswith(_SHARED + "."):
                if alias.asname is None:
                    # `import modelevents.adapters.x` binds `modelevents`: its uses would reach
                    # the installed adapters, which is the shadowing this module prevents.
                    raise ConfigError(f"{self.path}:{node.lineno}: `import {alias.name}` without "
                                      "`as` cannot be loaded as another revision; write it as "
                                      "`from … import …`")
                alias.name = self._renamed(alias.name)
        return node


class _RevisionLoader(importlib.machinery.SourceFileLoader):
    """Compiles the revision's sources with its ``modelevents.adapters`` imports renamed; reads
    no bytecode cache (one from a normal import would carry the original imports) and writes
    none."""

    def __init__(self, fullname: str, path: str, package: str) -> None:
        super().__init__(fullname, path)
        self.package = package

    def get_code(self, fullname: str) -> CodeType:
        path = self.get_filename(fullname)
        source = self.get_data(path)
        tree = _Rewriter(self.package, path).visit(ast.parse(source, path))
        # Compiled here, not through SourceLoader.get_code: that one would write the renamed
        # code as the source's bytecode cache.
        return compile(tree, path, "exec", dont_inherit=True)


class _RevisionFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of one private package in one directory, and nothing else."""

    def __init__(self, package: str, root: Path) -> None:
        self.package = package
        self.root = root

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.package and not fullname.startswith(self.package + "."):
            return None
        parts = fullname.split(".")[1:]
        base = self.root.joinpath(*parts)
        if (base / "__init__.py").is_file():
            init = str(base / "__init__.py")
            return importlib.util.spec_from_file_location(
                fullname, init, loader=_RevisionLoader(fullname, init, self.package),
                submodule_search_locations=[str(base)])
        module = base.with_suffix(".py")
        if module.is_file():
            return importlib.util.spec_from_file_location(
                fullname, str(module), loader=_RevisionLoader(fullname, str(module), self.package))
        return None


def _digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _load_package(root: Path, spec: str, label: str) -> AdapterRevision:
    package = _PRIVATE + _digest(root)
    if package not in sys.modules and not any(
            isinstance(f, _RevisionFinder) and f.package == package for f in sys.meta_path):
        sys.meta_path.insert(0, _RevisionFinder(package, root))
    try:
        registry = importlib.import_module(package + ".registry")
    except ConfigError:
        raise
    except Exception as exc:
        # An older or newer revision that needs what the installed schemas do not have.
        raise ConfigError(f"--adapters {spec}: its adapters do not load beside the installed "
                          f"schemas ({type(exc).__name__}: {exc})") from exc
    table = getattr(registry, "ADAPTERS", None)
    if not isinstance(table, dict) or not table:
        raise ConfigError(f"--adapters {spec}: its registry.py has no ADAPTERS table (API → "
                          "adapter class); is it an adapters package of modelevents?")
    return _revision(spec, label, package, table)


def _revision(spec: str, label: str, package: str,
              table: Mapping[str, Any]) -> AdapterRevision:
    normalizer = type(f"RunNormalizer_{package}", (RunNormalizer,),
                      {"adapter_classes": dict(table), "__module__": __name__})
    return AdapterRevision(spec, label, package, dict(table), normalizer)


# --- naming a revision -------------------------------------------------------------------------


def _adapters_dir(directory: Path, spec: str) -> Path:
    for candidate in (directory, directory / "adapters"):
        if (candidate / "registry.py").is_file() and (candidate / "__init__.py").is_file():
            return candidate
    raise ConfigError(f"--adapters {spec}: {directory} is neither a checkout holding adapters/ "
                      "nor an adapters package (a directory with __init__.py and registry.py)")


def _git(args: list[str], spec: str) -> bytes:
    try:
        done = subprocess.run(["git", *args], capture_output=True, check=False)
    except OSError as exc:
        raise ConfigError(f"--adapters {spec}: cannot run git ({exc})") from exc
    if done.returncode != 0:
        raise ConfigError(f"--adapters {spec}: git {' '.join(args)} failed: "
                          f"{done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def _from_git(rev: str, spec: str) -> AdapterRevision:
    if not rev:
        raise ConfigError(f"--adapters {spec}: name a revision after git:, e.g. git:HEAD~3")
    commit = _git(["rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}"],
                  spec).decode().strip()
    tar = _git(["archive", "--format=tar", commit, "adapters"], spec)
    extracted = tempfile.TemporaryDirectory(prefix="modelevents-adapters-")
    _EXTRACTED.append(extracted)
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(extracted.name, filter="data")
    root = _adapters_dir(Path(extracted.name), spec)
    return _load_package(root, spec, f"git:{rev} ({commit[:12]})")


def load_revision(spec: str) -> AdapterRevision:
    """The revision ``spec`` names (module docstring), loaded. Raises ConfigError."""
    text = spec.strip()
    if text == INSTALLED:
        return AdapterRevision(text, INSTALLED, _SHARED, RunNormalizer.adapter_classes,
                               RunNormalizer)
    if text.startswith(GIT):
        return _from_git(text[len(GIT):], spec)
    directory = Path(text).expanduser()
    if not directory.is_dir():
        raise ConfigError(f"--adapters {spec}: no such directory; name a checkout (or an adapters "
                          f"package) directory, git:REV, or {INSTALLED}")
    root = _adapters_dir(directory.resolve(), spec)
    return _load_package(root, spec, str(root))


__all__ = ["AdapterRevision", "load_revision", "INSTALLED"]
