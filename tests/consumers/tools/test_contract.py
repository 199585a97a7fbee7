"""ToolContract and ToolRegistry (consumers/tools/contract.py, registry.py): a schema is checked
when the contract is made, arguments are validated by JSON Schema Draft 2020-12, and registry
modules load by dotted path."""

from __future__ import annotations

import jsonschema
import pytest

from modelevents.consumers.tools.contract import ToolContract, default_idempotency_key
from modelevents.consumers.tools.registry import ToolRegistry, load_registry
from modelevents.schemas.errors import ConfigError

PARAMETERS = {"type": "object", "properties": {"city": {"type": "string", "minLength": 1},
                                               "days": {"type": "integer", "maximum": 7}},
              "required": ["city"], "additionalProperties": False}


def contract(**options):
    options.setdefault("name", "forecast")
    return ToolContract(parameters=PARAMETERS, run=lambda a, c: a, **options)


def test_an_invalid_schema_is_refused_when_the_contract_is_made():
    with pytest.raises(jsonschema.SchemaError):
        ToolContract(name="x", parameters={"type": "object", "required": "city"},
                     run=lambda a, c: a)


def test_argument_errors_name_each_field_that_breaks_the_schema():
    assert contract().argument_errors({"city": "Oslo", "days": 3}) == []
    problems = contract().argument_errors({"city": "", "days": 30, "extra": 1})
    assert len(problems) == 3
    assert any(p.startswith("city:") for p in problems)
    assert any(p.startswith("days:") and "7" in p for p in problems)
    assert any("extra" in p for p in problems)
    assert contract().argument_errors([]) == ["(arguments): [] is not of type 'object'"]


def test_draft_2020_12_keywords_are_enforced():
    tool = ToolContract(name="pair", run=lambda a, c: a, parameters={
        "type": "object", "properties": {"pair": {"type": "array", "prefixItems": [
            {"type": "string"}, {"type": "integer"}], "items": False}}})
    assert tool.argument_errors({"pair": ["a", 1]}) == []
    assert tool.argument_errors({"pair": ["a", 1, 2]})


def test_the_output_schema_catches_drift():
    tool = contract(output_schema={"type": "object", "required": ["temperature"]})
    assert tool.output_errors({"temperature": 3}) == []
    assert tool.output_errors({"temp": 3})


def test_the_default_idempotency_key_ignores_key_order_but_not_values():
    a = default_idempotency_key("run_1", "call_1", {"city": "Oslo", "days": 2})
    assert a == default_idempotency_key("run_1", "call_1", {"days": 2, "city": "Oslo"})
    assert a != default_idempotency_key("run_1", "call_1", {"city": "Oslo", "days": 3})
    assert a != default_idempotency_key("run_1", "call_2", {"city": "Oslo", "days": 2})


def test_the_decorator_registers_and_a_name_is_registered_once():
    registry = ToolRegistry()

    @registry.tool("echo", {"type": "object"}, action="read")
    def echo(arguments, context):
        """Say it back."""
        return arguments

    assert registry.get("echo") is echo and echo.description == "Say it back."
    assert echo.declaration() == {"name": "echo", "parameters": {"type": "object"},
                                  "description": "Say it back."}
    with pytest.raises(ConfigError, match="twice"):
        registry.register(contract(name="echo"))


def test_load_registry_by_dotted_path(tmp_path):
    registry = load_registry("modelevents.consumers.tools.sqlite_tools", db=tmp_path / "t.db")
    assert {c.name: c.action for c in registry} == {"get_weather": "read", "add_note": "write"}
    with pytest.raises(ConfigError, match="cannot import"):
        load_registry("no.such.module")
    with pytest.raises(ConfigError, match="neither"):
        load_registry("json")
