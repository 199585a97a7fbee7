"""Naming a bundle (services/migration/bundles/reference.py) by file: the YAML ``bundle create``
takes and the whole bundle ``bundle show --json`` prints give the same bundle, with no Kafka;
a whole bundle edited after it was written, a file that fits neither and a reference that is
neither a file nor an id are refused, naming what is wrong. By id on the topic:
tests/integration/migration/test_walkthrough.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from modelevents.schemas.errors import InputError
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.migration.bundles.bundle_file import EXAMPLE_PATH, read_bundle_file
from modelevents.services.migration.bundles.reference import read_bundle, resolve_all

# Nothing listens here: a file reference must not reach for the topic.
NO_KAFKA = PipelineSettings(bootstrap_servers="127.0.0.1:1")


def _shown(tmp_path: Path, **changes: object) -> Path:
    """The bundle of the example file as `bundle show --json` prints it."""
    bundle = read_bundle_file(EXAMPLE_PATH)
    doc = {"bundle_id": bundle.bundle_id, "created_at": "2026-12-07T08:00:00+00:00",
           **bundle.model_dump(mode="json", by_alias=True), **changes}
    path = tmp_path / "shown.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_bundle_file_and_the_bundle_it_makes_name_the_same_bundle(tmp_path: Path):
    expected = read_bundle_file(EXAMPLE_PATH).bundle_id
    named = asyncio.run(resolve_all(NO_KAFKA, [str(EXAMPLE_PATH), str(_shown(tmp_path))]))
    assert [n.bundle.bundle_id for n in named] == [expected, expected]
    assert [n.path for n in named] == [EXAMPLE_PATH, tmp_path / "shown.json"]


def test_a_whole_bundle_edited_after_it_was_written_is_refused(tmp_path: Path):
    path = _shown(tmp_path, name="edited")
    with pytest.raises(InputError, match="says it is bnd-.* but its content is bnd-"):
        read_bundle(path)


def test_a_whole_bundle_missing_a_field_is_refused_by_field(tmp_path: Path):
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"name": "x", "request_adapter": "requests/openai-chat@1"}))
    with pytest.raises(InputError, match=r"b.json is not a bundle — instruction: Field required"):
        read_bundle(path)


def test_a_bundle_file_that_does_not_fit_is_refused_by_field(tmp_path: Path):
    path = tmp_path / "b.yaml"
    path.write_text("name: x\ninstruction: {text: hi, version: '1'}\n")
    with pytest.raises(InputError, match=r"b.yaml does not fit — target: Field required"):
        read_bundle(path)


@pytest.mark.parametrize("reference", ["missing.yaml", "bnd-xyz", ""])
def test_a_reference_that_is_no_file_and_no_id_is_refused_before_kafka(reference: str):
    with pytest.raises(InputError, match="no such file, and not a bundle id"):
        asyncio.run(resolve_all(NO_KAFKA, [reference]))
