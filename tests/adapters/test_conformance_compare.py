"""adapters/conformance.py: neutral events compared with expected ones, differences named."""

from __future__ import annotations

import pytest

from modelevents.adapters.conformance import (
    Replay,
    check,
    compare,
    parse_expected,
    render_expected,
)
from modelevents.schemas.errors import InputError
from tests.paths import FIXTURES

ID_A, ID_B, ID_C = "mev_" + "a" * 24, "mev_" + "b" * 24, "mev_" + "c" * 24


def text(t: str, index: int = 0) -> dict:
    return {"kind": "text.delta", "output_index": index, "part_index": 0, "text": t,
            "item_id": None}


def call(call_id: str, arguments: str = "{}") -> dict:
    return {"kind": "tool.call", "tool_name": "f", "tool_call_id": call_id,
            "arguments": arguments, "arguments_valid": True}


def described(expected: list[dict], actual: list[dict]) -> list[str]:
    return [d.describe() for d in compare(expected, actual)]


def test_equal_sequences_have_no_difference():
    events = [text("a"), text("b"), call("call_1")]
    assert compare(events, [dict(e) for e in events]) == []


def test_a_changed_field_names_event_kind_field_and_both_values():
    assert described([text("a"), text("b")], [text("a"), text("B")]) == [
        'event 1 (text.delta) text: expected "b", got "B"']


def test_an_inserted_event_is_one_difference_not_a_shift_of_all_later_ones():
    expected = [text("a"), text("b"), text("c"), text("d")]
    actual = [text("a"), {"kind": "error", "error_type": "malformed_frame"}, *expected[1:]]
    [difference] = compare(expected, actual)
    assert (difference.expected_index, difference.actual_index, difference.field) == (None, 1, None)
    assert difference.describe().startswith("event 1 (error): produced, not expected: ")


def test_a_lost_event_is_named_by_its_expected_index():
    expected = [text("a"), call("call_1"), text("b")]
    assert described(expected, [text("a"), text("b")]) == [
        'event 1 (tool.call): expected, not produced: {"kind":"tool.call","tool_name":"f",'
        '"tool_call_id":"call_1","arguments":"{}","arguments_valid":true}']


def test_fields_missing_or_added_and_nested_paths():
    expected = [{"kind": "usage", "iterations": [{"input_tokens": 5}], "total_tokens": 9}]
    actual = [{"kind": "usage", "iterations": [{"input_tokens": 6}], "reasoning_tokens": 1}]
    assert described(expected, actual) == [
        "event 0 (usage) iterations[0].input_tokens: expected 5, got 6",
        "event 0 (usage) total_tokens: expected 9, got (no such field)",
        "event 0 (usage) reasoning_tokens: expected (no such field), got 1"]


def test_true_is_not_one():
    assert described([{"kind": "k", "v": True}], [{"kind": "k", "v": 1}]) == [
        "event 0 (k) v: expected true, got 1"]


def test_minted_ids_compare_up_to_a_consistent_renaming():
    # Another run id mints other ids: the same call keeping one id is what must hold.
    assert compare([call(ID_A), call(ID_B), call(ID_A)], [call(ID_C), call(ID_A), call(ID_C)]) == []
    # Two calls that were one, or one id that became two, are differences.
    assert described([call(ID_A), call(ID_B)], [call(ID_C), call(ID_C)]) == [
        f'event 1 (tool.call) tool_call_id: expected "{ID_B}", got "{ID_C}"']
    assert described([call(ID_A), call(ID_A)], [call(ID_B), call(ID_C)]) == [
        f'event 1 (tool.call) tool_call_id: expected "{ID_A}", got "{ID_C}"']
    # A provider's own id is compared as it is.
    assert described([call("call_1")], [call("call_2")]) == [
        'event 0 (tool.call) tool_call_id: expected "call_1", got "call_2"']


def test_expected_file_round_trip_with_its_replay_line():
    events = [text("é"), call(ID_A)]
    written = render_expected(events, Replay(http_status=429))
    assert written.splitlines()[0] == '{"replay":{"http_status":429}}'
    parsed = parse_expected(written)
    assert (parsed.replay, parsed.events) == (Replay(http_status=429), events)
    assert render_expected(events).splitlines()[0].startswith('{"kind":"text.delta"')


@pytest.mark.parametrize(("text_", "message"), [
    ('{"kind": "a"}\nnot json\n', "line 2: not JSON"),
    ('[1, 2]\n', "line 1: an event is a JSON object, got list"),
    ('{"text": "no kind"}\n', 'line 1: an event needs a "kind"'),
    ('{"kind": "a"}\n{"replay": {"http_status": 429}}\n', "a replay line may only be the first"),
    ('{"replay": {"status": 429}}\n', "unknown replay field(s) status"),
    ('{"replay": {"http_status": "429"}}\n', "replay http_status must be an HTTP status"),
    ('{"replay": {"api": "mistral"}}\n', "unknown replay api 'mistral'; known: openai-responses"),
])
def test_bad_expected_files_are_named_errors(text_, message):
    with pytest.raises(InputError, match="x.expected.jsonl") as info:
        parse_expected(text_, "x.expected.jsonl")
    assert message in str(info.value)


def test_check_replays_the_http_status_of_the_replay_line():
    body = (FIXTURES / "openai-chat" / "http-error-rate-limit.json").read_bytes()
    bare = check(body, None, api="openai-chat")
    assert bare.status == "no-expected" and bare.events[0]["http_status"] is None
    expected = render_expected(bare.events, Replay(http_status=429))
    verdict = check(body, expected, api="openai-chat")
    assert verdict.status == "differ"
    assert [d.describe() for d in verdict.differences] == [
        "event 0 (error) http_status: expected null, got 429"]
    assert verdict.replay == Replay(http_status=429)


def test_check_reports_input_it_cannot_replay_as_an_error():
    verdict = check(b"<html>502 Bad Gateway</html>", None, source_name="proxy.html")
    assert verdict.status == "error" and "none of the framings" in (verdict.error or "")
    verdict = check(b'{"hello": "world"}', None, source_name="mystery.json")
    assert verdict.status == "error" and "cannot tell which provider API" in (verdict.error or "")
