"""The `modelevents` command line, run as a user runs it: a subprocess of the installed script."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from tests.adapters.bombs import (
    gzip_of_zeros,
    one_call_cassette,
    run_limited,
    truncated_gzip,
    yaml_alias_bomb,
)
from tests.corpus import corpus_files, corpus_id, require_corpus
from tests.paths import FIXTURES, REPO_ROOT

CLI = [sys.executable, "-m", "modelevents.services.cli"]


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], input=stdin, capture_output=True, timeout=120)


def events_of(stdout: bytes) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_normalize_prints_one_json_object_per_event_with_the_payload_fields():
    result = cli("normalize", str(FIXTURES / "anthropic-messages" / "pause-turn-then-continuation.sse"))
    assert result.returncode == 0, result.stderr
    events = events_of(result.stdout)
    assert [e["seq"] for e in events] == list(range(len(events)))
    kinds = [e["kind"] for e in events]
    assert "run.awaiting" in kinds and kinds[-1] == "run.finished"
    awaiting = next(e for e in events if e["kind"] == "run.awaiting")
    assert awaiting["reason"] == "continuation"
    assert b"anthropic-messages" in result.stderr


def test_tool_calls_carry_name_id_and_arguments():
    result = cli("normalize", "--provider", "openai-chat",
                 str(FIXTURES / "openai-chat" / "tool-call-no-ids.sse"))
    assert result.returncode == 0, result.stderr
    calls = [e for e in events_of(result.stdout) if e["kind"] == "tool.call"]
    assert calls and all(c["tool_name"] and c["tool_call_id"] for c in calls)
    assert all(json.loads(c["arguments"]) is not None for c in calls)


def test_summary_and_state():
    path = str(FIXTURES / "anthropic-messages" / "pause-turn-then-continuation.sse")
    summary = cli("normalize", "--summary", path)
    assert summary.returncode == 0, summary.stderr
    assert b"status    completed" in summary.stdout
    state = cli("normalize", "--state", path)
    assert json.loads(state.stdout)["status"] == "completed"


def test_standard_input_and_explicit_format():
    body = (FIXTURES / "anthropic-messages" / "pause-turn-then-continuation.sse").read_bytes()
    result = cli("normalize", "--format", "sse", "-", stdin=body)
    assert result.returncode == 0, result.stderr
    assert events_of(result.stdout)[0]["kind"] == "run.started"


@pytest.mark.parametrize("args, stdin, message", [
    (["normalize", "/no/such/file"], None, b"cannot read /no/such/file"),
    (["normalize", "-"], b"<html>502 Bad Gateway</html>", b"none of the framings"),
    (["normalize", "-"], b'{"hello": "world"}', b"--provider"),
])
def test_unreadable_input_is_one_clear_line_and_a_nonzero_exit(args, stdin, message):
    result = cli(*args, stdin=stdin)
    assert result.returncode == 2
    assert result.stdout == b""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(b"modelevents: error:") and message in lines[0]


def test_bad_option_is_a_usage_error():
    result = cli("normalize", "--provider", "nope", "x")
    assert result.returncode == 2 and b"invalid choice" in result.stderr


@pytest.mark.corpus
@pytest.mark.parametrize("path", [p for p in corpus_files("") if p.name != "webhook-test-vector.json"],
                         ids=corpus_id)
def test_every_corpus_file_normalizes_with_auto_detection(path):
    require_corpus()
    result = cli("normalize", "--summary", str(path))
    assert result.returncode == 0, result.stderr.decode()
    assert b"status" in result.stdout


# Every command the README's command table names is reachable and documents itself.
COMMANDS = tuple(dict.fromkeys(re.findall(r"^modelevents ([a-z]+) ",
                                          (REPO_ROOT / "README.md").read_text(), re.M)))


def test_every_command_is_listed_and_answers_help():
    assert {"demo", "gateway", "audit", "tools", "config", "conformance"} <= set(COMMANDS)
    top = cli("--help")
    assert top.returncode == 0
    listed = top.stdout.decode()
    for command in COMMANDS:
        assert f"    {command}" in listed, command
        result = cli(command, "--help")
        assert result.returncode == 0, (command, result.stderr)
        assert b"usage: modelevents " + command.encode() in result.stdout


# --- hostile inputs (issue #11 §3): one error line, exit 2, under a memory cap ---------------

def _one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr.decode()[-2000:]
    assert result.stdout == b""
    lines = result.stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines[-20:]
    assert lines[0].startswith("modelevents: error: ")
    return lines[0]


@pytest.mark.parametrize("build, option", [
    (lambda: one_call_cassette(gzip_of_zeros()), "--max-ratio"),  # 1 MB → 1 GiB
    (yaml_alias_bomb, "--max-yaml-alias-nodes"),  # 500 bytes → 387M strings
], ids=["gzip-of-zeros", "yaml-alias-bomb"])
def test_a_cassette_bomb_is_one_error_line_under_a_memory_cap(tmp_path, build, option):
    path = tmp_path / "bomb.yaml"
    path.write_bytes(build())
    line = _one_error_line(run_limited([*CLI[1:], "normalize", str(path)]))
    assert f"error: {path}: " in line and f"raise it with {option}" in line


def test_raising_a_limit_meets_the_next_one(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_bytes(one_call_cassette(gzip_of_zeros()))
    line = _one_error_line(run_limited([*CLI[1:], "normalize", "--max-ratio", "100000",
                                        "--max-body-bytes", "32M", str(path)]))
    assert "decompresses (gzip) to more than 33,554,432 bytes" in line
    assert "max_body_bytes=33,554,432 bytes; if the input is trusted, raise it with " \
           "--max-body-bytes" in line


def test_a_truncated_gzip_body_is_one_error_line(tmp_path):
    path = tmp_path / "cut.yaml"
    path.write_bytes(one_call_cassette(truncated_gzip()))
    line = _one_error_line(cli("normalize", str(path)))
    assert f"cassette {path}, interaction 1: the gzip response body is cut short" in line


@pytest.mark.parametrize("body, what", [
    (b"data: " + b"x" * (3 << 20), "an SSE event of"),  # no blank line, ever
    (b'{"a": 1}\n{"b": "' + b"x" * (3 << 20) + b'"}\n', "a JSON line of"),
    (b'[{"a": 1}, {"b": "' + b"x" * (3 << 20) + b'"}]', "a JSON array element of"),
    (b'{"b": "' + b"x" * (3 << 20) + b'"}', "a JSON object of"),
], ids=["sse", "jsonl", "json-array", "json"])
def test_a_frame_over_the_event_limit_is_one_error_line(tmp_path, body, what):
    path = tmp_path / "long.txt"
    path.write_bytes(body)
    line = _one_error_line(cli("normalize", "--max-event-bytes", "2M", str(path)))
    assert f"{path}: {what}" in line and "raise it with --max-event-bytes" in line


def test_input_limits_are_documented_in_help():
    for command in ("normalize", "feed"):
        text = cli(command, "--help").stdout.decode()
        for option, default in (("--max-body-bytes", "64M"), ("--max-cassette-bytes", "256M"),
                                ("--max-ratio", "100"), ("--max-yaml-alias-nodes", "1,000,000"),
                                ("--max-event-bytes", "64M")):
            assert option in text and f"default {default}" in text, (command, option)


def test_version_is_the_installed_distributions():
    from importlib.metadata import version

    done = cli("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip() == f"modelevents {version('modelevents')}"


@pytest.mark.parametrize("text, named", [
    ("tenants:\n  acme:\n    hosted:\n      sources: {maybe: [x]}\n", "sources"),
    ("tenants: [\n", "policy file"),
])
def test_a_worker_given_a_wrong_policy_file_stops_before_kafka_with_one_line(tmp_path, text,
                                                                              named):
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    # Port 9 (discard): nothing answers there; the policy is read before Kafka is asked.
    result = cli("worker", "--policy", str(policy), "--bootstrap-servers", "127.0.0.1:9")
    assert result.returncode == 2, result.stderr
    line = _one_error_line(result)
    assert named in line and "Traceback" not in result.stderr.decode()
