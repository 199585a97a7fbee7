"""``modelevents capabilities probe`` refuses bad input before anything is sent: a malformed
target, an unknown API, a provider or model the manifest does not know, a gateway nobody
answers at — each a clear message and exit 2."""

from __future__ import annotations

import socket

import pytest

from modelevents.services.cli.main import main


def free_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize(("target", "message"), [
    ("openai/gpt-4.1-mini", "is not provider/api/model"),
    ("openai/openai-completions/gpt-4.1-mini", "unknown API 'openai-completions'"),
    ("mistral/openai-chat/mistral-large", "provider 'mistral' is not in the capability manifest"),
    ("anthropic/openai-chat/claude-sonnet-4", "the manifest has no openai-chat for anthropic"),
    ("openai/openai-responses/davinci-002", "matches 'davinci-002', so it claims nothing"),
])
def test_a_target_the_manifest_does_not_know_exits_2_before_any_request(capsys, target, message):
    code = main(["capabilities", "probe", "--target", target, "--gateway", free_url(),
                 "--no-publish"])
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
    assert "requests" not in err  # no count printed: nothing was about to be sent


def test_a_gateway_nobody_answers_at_exits_2_saying_where(capsys):
    url = free_url()
    code = main(["capabilities", "probe", "--target", "openai/openai-responses/gpt-4.1-mini",
                 "--gateway", url, "--no-publish"])
    captured = capsys.readouterr()
    assert code == 2 and f"the gateway at {url} cannot be reached" in captured.err
    assert "--gateway" in captured.err and captured.out == ""
