"""How the run machine ends runs from OpenAI-compatible servers (docs/compatible-servers.md),
end to end through `modelevents normalize --state`: the recording in, the final RunState out."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.paths import FIXTURES

CHAT = FIXTURES / "openai-chat"


def final_state(name: str) -> dict:
    result = subprocess.run([sys.executable, "-m", "modelevents.services.cli", "normalize",
                             "--state", str(CHAT / name)], capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("name, status, reason, raw_reason, open_calls, provider_ids, tokens", [
    # The id changes mid-stream and the finish comes twice: one call, completed, usage counted.
    ("finish-repeated-new-id.sse", "completed", "end_turn", "stop", [],
     ["gen-1790000000-Qm3cXkR2aTn8bL5vYp0w"], 22),
    # Usage then [DONE], no finish_reason, a whole tool call: waiting for its result.
    ("no-finish-reason-usage-then-done.sse", "waiting_for_tool", "tool_results", None,
     ["call_k2m9"], ["chatcmpl-7f3a9c2e"], 230),
    # reasoning_details read as reasoning: no `unknown` event flags the run for reconciliation.
    ("openrouter-reasoning-text-signature.sse", "completed", "end_turn", "stop", [],
     ["gen-1790000200-Vb6nTq3LxWc8ZkP1sRd4"], 103),
    ("openrouter-reasoning-summary-encrypted.sse", "waiting_for_tool", "tool_results",
     "tool_calls", ["call_Wq3xN8"], ["gen-1790000300-Jc4rYw8QmNa2XtF6uLe0"], 230),
    # The call header resent on every delta: one open call, not one per delta.
    ("tool-call-header-repeated.sse", "waiting_for_tool", "tool_results", "tool_calls",
     ["chatcmpl-tool-aa62"], ["chatcmpl-b7de"], None),
])
def test_compatible_server_runs_end_as_the_server_ended_them(name, status, reason, raw_reason,
                                                             open_calls, provider_ids, tokens):
    state = final_state(name)
    assert (state["status"], state["reason"], state["raw_reason"]) == (status, reason, raw_reason)
    assert state["open_tool_calls"] == open_calls
    assert state["provider_object_ids"] == provider_ids
    assert state["last_error"] is None
    assert (state["needs_reconciliation"], state["reconciliation_notes"]) == (False, [])
    assert (state["usage"] or {}).get("total_tokens") == tokens
