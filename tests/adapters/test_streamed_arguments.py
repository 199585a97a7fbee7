"""adapters/streamed_arguments.py: Vertex partialArgs → the argument object and its JSON text."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelevents.adapters.streamed_arguments import (
    StreamedArguments,
    parse_json_path,
    partial_value,
)


@pytest.mark.parametrize(("path", "segments"), [
    ("$.location", ("location",)),
    ("$.recipe.ingredients[6].name", ("recipe", "ingredients", 6, "name")),
    ("$.operations[0].price", ("operations", 0, "price")),
    ("$['a b'].c", ("a b", "c")),
    ('$["q\\"x"][2]', ('q"x', 2)),
    ("$", None),
    ("location", None),
    ("$.a[*]", None),
    ("$.a[-1]", None),
    ("$..a", None),
    ("$.a[²]", None),  # a digit to str.isdigit, no index to int()
])
def test_parse_json_path(path: str, segments: tuple | None) -> None:
    assert parse_json_path(path) == segments


def test_out_of_order_paths_still_build_the_arguments() -> None:
    args = StreamedArguments()
    fragments = [args.put(("b",), 1, False), args.put(("a",), "x", False),
                 args.put(("b",), 2, False)]  # b again: not document order
    assert None not in fragments
    assert args.in_order is False
    assert args.tree == {"b": 2, "a": "x"}
    assert args.close() == ""  # the text stream stopped; tool.call carries the whole JSON


def test_array_gap_is_padded_with_null_in_text_and_tree() -> None:
    args = StreamedArguments()
    text = args.put(("xs", 2), "c", False) + args.close()
    assert args.tree == {"xs": [None, None, "c"]}
    assert text == orjson.dumps(args.tree).decode()


@pytest.mark.parametrize("value", ["plain", 'a "quote"', "back\\slash", "tab\there",
                                   "nul\x00", "del\x7f", "été", "line\u2028sep", "😀"])
def test_a_value_is_written_as_orjson_writes_it(value: str) -> None:
    # Text that needs no escape is written as it is, without orjson: the same bytes either way.
    args = StreamedArguments()
    text = args.put(("s",), value, True) + args.put(("s",), "", False) + args.close()
    assert text == orjson.dumps({"s": value}).decode()


def test_an_index_where_the_tree_has_an_object_is_not_placed() -> None:
    args = StreamedArguments()
    args.put(("a", "b"), 1, False)
    assert args.put(("a", 0), 2, False) is None  # "a" is an object, not an array
    assert args.tree == {"a": {"b": 1}} and args.in_order is False


_KEYS = st.text(min_size=0, max_size=6)
_LEAVES = (st.none() | st.booleans() | st.integers(-10**6, 10**6)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20))
_VALUES = st.recursive(_LEAVES, lambda inner: st.lists(inner, min_size=1, max_size=3)
                       | st.dictionaries(_KEYS, inner, min_size=1, max_size=3), max_leaves=12)


def _path(segments: tuple) -> str:
    out = ["$"]
    for segment in segments:
        if type(segment) is int:
            out.append(f"[{segment}]")
        elif segment.isidentifier():
            out.append("." + segment)
        else:
            out.append("['" + segment.replace("\\", "\\\\").replace("'", "\\'") + "']")
    return "".join(out)


def _leaves(value, prefix=()):
    if type(value) is dict:
        for key, item in value.items():
            yield from _leaves(item, prefix + (key,))
    elif type(value) is list:
        for index, item in enumerate(value):
            yield from _leaves(item, prefix + (index,))
    else:
        yield prefix, value


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=4), st.data())
def test_partial_args_in_document_order_reassemble_exactly(obj: dict, data) -> None:
    """Flatten any object the way Vertex streams it (strings split at random, closed by an empty
    fragment or not) and reassemble: same object, and the fragments are its JSON text."""
    args = StreamedArguments()
    text = []
    for segments, value in _leaves(obj):
        segments = parse_json_path(_path(segments))
        if type(value) is str and value:
            cuts = sorted(data.draw(st.sets(st.integers(1, len(value)), max_size=3)))
            pieces = [value[a:b] for a, b in zip([0] + cuts, cuts + [len(value)]) if a < b]
            closing_empty = data.draw(st.booleans())
            for n, piece in enumerate(pieces):
                last = n == len(pieces) - 1 and not closing_empty
                text.append(args.put(segments, piece, not last))
            if closing_empty:
                text.append(args.put(segments, "", False))
        else:
            text.append(args.put(segments, value, False))
    text.append(args.close())
    assert args.tree == obj
    assert "".join(text) == orjson.dumps(obj).decode()


def test_a_string_growing_by_fragments_is_one_json_string() -> None:
    args = StreamedArguments()
    text = [args.put(("city",), "Par", True), args.put(("city",), "is", True),
            args.put(("city",), "", False), args.close()]
    assert args.tree == {"city": "Paris"}
    assert "".join(text) == '{"city":"Paris"}'


def test_nothing_streamed_is_the_empty_object() -> None:
    assert StreamedArguments().close() == "{}"


def test_a_path_that_contradicts_the_tree_is_not_placed() -> None:
    args = StreamedArguments()
    args.put(("a",), 1, False)
    assert args.put(("a", "b"), 2, False) is None  # "a" is a number, not an object
    assert args.tree == {"a": 1} and args.in_order is False


def test_a_starting_object_is_kept_but_not_streamed_as_text() -> None:
    args = StreamedArguments({"unit": "c"})
    assert args.put(("city",), "Oslo", False) == ""
    assert args.tree == {"unit": "c", "city": "Oslo"} and args.close() == ""


@pytest.mark.parametrize(("arg", "expected"), [
    ({"jsonPath": "$.a", "stringValue": "x"}, ("x", True)),
    ({"jsonPath": "$.a", "numberValue": 2.5}, (2.5, True)),
    ({"jsonPath": "$.a", "boolValue": False}, (False, True)),
    ({"jsonPath": "$.a", "nullValue": "NULL_VALUE"}, (None, True)),
    ({"jsonPath": "$.a"}, (None, False)),
])
def test_partial_value_reads_each_value_member(arg: dict, expected: tuple) -> None:
    assert partial_value(arg) == expected
