"""A call's arguments under limits (consumers/tools/arguments.py): refused with a reason, never
an exception of another kind, whatever the text."""

from __future__ import annotations

import pytest

from modelevents.consumers.tools.arguments import ArgumentsRefused, parse_arguments


def test_an_object_within_the_limits_is_parsed_and_empty_text_is_no_arguments():
    assert parse_arguments('{"city": "Paris", "tags": [1, [2, {"x": null}]]}') == {
        "city": "Paris", "tags": [1, [2, {"x": None}]]}
    assert parse_arguments("") == {}


@pytest.mark.parametrize(("text", "said"), [
    ("[" * 1000 + "]" * 1000, "not an object"),
    ('{"a": ' + "[" * 1000 + "]" * 1000 + "}", "deeper than 32"),
    ('{"a": ' + "[" * 10_000 + "]" * 10_000 + "}", "not JSON"),
    ('{"a":' * 40 + "1" + "}" * 40, "deeper than 32"),
    ('"text"', "a JSON string"),
    ("42", "a JSON number"),
    ("null", "a JSON null"),
    ("true", "a JSON boolean"),
    ('{"a": NaN}', "not JSON"),
    ('{"a": 1e999}', "not JSON"),
    ('{"a": "\\ud800"}', "not JSON"),
    ("{a: 1}", "not JSON"),
    ('{"a": "' + "x" * 2_000_000 + '"}', "over the limit of 1048576"),
    ("[" + "0," * 100_001 + "0]", "not an object"),
    ('{"a": [' + "0," * 100_001 + "0]}", "more than 100000 values"),
])
def test_hostile_arguments_are_refused_with_what_is_wrong(text, said):
    with pytest.raises(ArgumentsRefused, match=said):
        parse_arguments(text)


def test_the_contract_sets_the_limits():
    with pytest.raises(ArgumentsRefused, match="deeper than 2"):
        parse_arguments('{"a": {"b": {}}}', max_depth=2)
    with pytest.raises(ArgumentsRefused, match="12 bytes, over the limit of 10"):
        parse_arguments('{"a": "bcd"}', max_bytes=10)
