"""One way to name a bundle on the command line (``eval run --bundle``, ``decide --bundle``).

A reference is a file when a file of that name exists, else a bundle id or a unique prefix of
one on the ``bundles`` topic (store.py). A file is either the YAML ``bundle create`` takes
(bundle_file.py: resolved against the installed adapters and the manifest) or a whole bundle
as ``bundle show --json`` prints it (its ``bundle_id``, when given, must be its content's).
Anything else is refused with an InputError naming the reference (the CLI exits 2).

    named = await resolve_all(settings, ["bnd-3f2a", "chat.yaml"])   # [Named], in order
    written = await ensure_on_topic(settings, named)   # the file ones written (idempotent)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from modelevents.schemas.bundle_record import StoredBundle, looks_like_id
from modelevents.schemas.bundles import BUNDLE_ID_PREFIX, Bundle
from modelevents.schemas.errors import InputError
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.migration.bundles import store
from modelevents.services.migration.bundles.bundle_file import (
    BundleFile,
    parse_bundle_file,
    resolve,
)

__all__ = ["Named", "read_bundle", "resolve_all", "ensure_on_topic"]

# Keys a whole bundle has and the authoring file never does.
_RESOLVED_KEYS = (set(Bundle.model_fields) - set(BundleFile.model_fields)) | {"bundle_id"}


@dataclass(frozen=True)
class Named:
    """A bundle and where the reference found it: ``path`` for a file, None for the topic."""

    reference: str
    bundle: Bundle
    path: Path | None


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}"
                     for e in exc.errors(include_url=False))


def _whole(doc: dict[str, Any], source: str) -> Bundle:
    doc = dict(doc)
    claimed = doc.pop("bundle_id", None)
    doc.pop("created_at", None)  # bundle show --json adds when it was written
    try:
        bundle = Bundle.model_validate(doc)
    except ValidationError as exc:
        raise InputError(f"bundle {source} is not a bundle — {_problems(exc)}") from None
    if claimed is not None and claimed != bundle.bundle_id:
        raise InputError(f"bundle {source} says it is {claimed} but its content is "
                         f"{bundle.bundle_id}: it was edited after it was written; write a "
                         "bundle file and `modelevents bundle create` it instead")
    return bundle


def read_bundle(path: Path) -> Bundle:
    """The bundle a file holds: a whole bundle (JSON or YAML), or a bundle file resolved."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read bundle {path}: {exc.strerror or exc}") from None
    try:
        doc = yaml.safe_load(text)  # JSON is YAML
    except yaml.YAMLError as exc:
        raise InputError(f"bundle {path} is neither YAML nor JSON: {exc}") from None
    if isinstance(doc, dict) and _RESOLVED_KEYS & doc.keys():
        return _whole(doc, str(path))
    return resolve(parse_bundle_file(text, str(path)), str(path))


def _as_file(reference: str) -> Path | None:
    path = Path(reference)
    if path.is_file():
        return path
    if not looks_like_id(reference.strip()):
        raise InputError(f"--bundle {reference}: no such file, and not a bundle id "
                         f"({BUNDLE_ID_PREFIX} and hex digits, or a prefix of one); see "
                         "`modelevents bundle list`")
    return None


async def resolve_all(settings: PipelineSettings, references: list[str]) -> list[Named]:
    """Each reference's bundle, in order; the topic is read once, and only when an id is named."""
    paths = [_as_file(reference) for reference in references]
    on_topic: dict[str, StoredBundle] = {}
    if any(path is None for path in paths):
        on_topic = await store.read_all(settings)
    return [Named(reference, read_bundle(path) if path is not None
                  else store.find(on_topic, reference).bundle, path)
            for reference, path in zip(references, paths, strict=True)]


async def ensure_on_topic(settings: PipelineSettings, named: list[Named]) -> list[Named]:
    """Write every bundle that came from a file on the topic (content-addressed: writing one
    that is there already changes nothing); the ones written."""
    written = []
    for item in named:
        if item.path is not None:
            await store.put(settings, item.bundle)
            written.append(item)
    return written
