"""Field-level bundle differences (services/migration/bundles/diff.py): each changed leaf by its
dotted path, tools by name so their order is no difference, one-sided paths said so."""

from __future__ import annotations

from modelevents.schemas.bundles import ToolContractRef
from modelevents.schemas.transcript import ToolDeclaration
from modelevents.services.migration.bundles.bundle_file import EXAMPLE_PATH, read_bundle_file
from modelevents.services.migration.bundles.diff import diff


def _tool(name: str, version: str = "1") -> ToolContractRef:
    return ToolContractRef(declaration=ToolDeclaration(name=name), schema_version=version)


def test_identical_bundles_have_no_differences():
    bundle = read_bundle_file(EXAMPLE_PATH)
    assert diff(bundle, bundle) == []


def test_each_changed_field_is_one_change_by_its_path():
    a = read_bundle_file(EXAMPLE_PATH)
    b = a.model_copy(update={
        "target": a.target.model_copy(update={"snapshot": "gpt-4o-mini-2099-01-01"}),
        "sampling": a.sampling.model_copy(update={"temperature": 0.7}),
        "capabilities": {**a.capabilities, "citations": False}})
    changes = {c.path: (c.before, c.after, c.only_in) for c in diff(a, b)}
    assert changes == {
        "target.snapshot": (a.target.snapshot, "gpt-4o-mini-2099-01-01", None),
        "sampling.temperature": (0.2, 0.7, None),
        "capabilities.citations": (a.capabilities["citations"], False, None)}


def test_tools_are_compared_by_name_not_position():
    a = read_bundle_file(EXAMPLE_PATH).model_copy(update={"tools": [_tool("x"), _tool("y")]})
    b = a.model_copy(update={"tools": [_tool("y"), _tool("x", "2"), _tool("z")]})
    changes = {c.path: (c.before, c.after, c.only_in) for c in diff(a, b)}
    assert changes["tools.x.schema_version"] == ("1", "2", None)
    assert changes["tools.z.schema_version"] == (None, "1", "b")
    assert not any(p.startswith("tools.y") for p in changes)
