"""Bundle files (services/migration/bundles/bundle_file.py): the shipped example resolves
against the installed adapters and manifest, the same file gives the same id, a change of any
field gives another, and a file that does not fit is refused naming the field at fault."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from modelevents.adapters.openai_responses import OpenAIResponsesAdapter
from modelevents.adapters.requests import REVISIONS
from modelevents.schemas import codec
from modelevents.schemas.errors import InputError
from modelevents.services.gateway.calls.capabilities import load_manifest
from modelevents.services.migration.bundles.bundle_file import EXAMPLE_PATH, read_bundle_file


def _write(tmp_path: Path, doc: dict, name: str = "bundle.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def _example() -> dict:
    return yaml.safe_load(EXAMPLE_PATH.read_text())


def test_the_example_resolves_from_the_installed_code_and_manifest():
    bundle = read_bundle_file(EXAMPLE_PATH)
    doc = _example()
    assert bundle.name == doc["name"] and bundle.target.snapshot == doc["target"]["snapshot"]
    assert bundle.request_adapter == f"requests/openai-responses@{REVISIONS['openai-responses']}"
    assert bundle.event_adapters == {
        "openai-responses": f"{OpenAIResponsesAdapter.name}@{OpenAIResponsesAdapter.revision}"}
    fingerprint = codec.schemas().current_fingerprint["modelevents.ModelEvent"].hex()
    assert bundle.event_schema == f"modelevents.ModelEvent@{fingerprint}"
    expected = load_manifest().lookup("openai", "openai-responses", doc["target"]["model"])
    assert bundle.capabilities["manifest_version"] == 1
    assert bundle.capabilities["citations"] is expected.capabilities.citations
    assert bundle.capabilities["input"] == expected.capabilities.input
    assert [t.declaration.name for t in bundle.tools] == ["get_order"]
    assert bundle.tools[0].schema_version == "1"
    assert bundle.sampling.temperature == 0.2


def test_the_same_file_is_the_same_bundle_and_any_change_another(tmp_path):
    first = read_bundle_file(_write(tmp_path, _example(), "a.yaml"))
    assert read_bundle_file(_write(tmp_path, _example(), "b.yaml")).bundle_id == first.bundle_id
    changed = _example()
    changed["target"]["snapshot"] = "gpt-4o-mini-2099-01-01"
    assert read_bundle_file(_write(tmp_path, changed, "c.yaml")).bundle_id != first.bundle_id
    changed = _example()
    changed["tools"][0]["schema_version"] = "2"
    assert read_bundle_file(_write(tmp_path, changed, "d.yaml")).bundle_id != first.bundle_id


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d.pop("instruction"), "instruction: Field required"),
    (lambda d: d["target"].pop("model"), "target.model: Field required"),
    (lambda d: d["sampling"].update(temperature="warm"), "sampling.temperature"),
    (lambda d: d["tools"][0].pop("schema_version"), "tools.0.schema_version"),
    (lambda d: d.update(colour="blue"), "colour: Extra inputs are not permitted"),
    (lambda d: d["tools"][0].update(parameters={"type": "string"}), "tools.0 ('get_order')"),
    (lambda d: d["target"].update(api="openai-assistants"), "target.api: unknown api"),
    (lambda d: d["target"].update(model="no-such-model"), "not in the capability manifest"),
    (lambda d: d["tools"].append(dict(d["tools"][0])), "declared more than once"),
])
def test_a_file_that_does_not_fit_is_refused_naming_the_field(tmp_path, edit, field):
    doc = _example()
    edit(doc)
    path = _write(tmp_path, doc)
    with pytest.raises(InputError) as caught:
        read_bundle_file(path)
    assert str(path) in str(caught.value)
    assert field in str(caught.value)


def test_yaml_that_does_not_parse_is_refused_with_the_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(InputError, match=f"{path} is not valid YAML"):
        read_bundle_file(path)
    path.write_text("- a list\n")
    with pytest.raises(InputError, match="must be a YAML mapping"):
        read_bundle_file(path)
    with pytest.raises(InputError, match="cannot read bundle file"):
        read_bundle_file(tmp_path / "missing.yaml")
