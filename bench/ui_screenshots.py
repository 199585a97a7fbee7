"""The screenshots of the UI in the README and docs/ui.md, taken from a real pipeline by Debian's headless Chromium.

    .venv/bin/python bench/ui_screenshots.py        # writes docs/img/ui-*.png

Starts a broker of its own, the topics, a worker and the gateway (bench/ui_stack.py), feeds a
few recorded runs of the project's fixtures through the worker as the gateway would (a tool loop
with reasoning and a citation, a pause_turn run, a refusal, grounded citations, a truncated
stream) and one run whose tool call waits for an approval (the events the tool executor writes),
writes an eval result to ``eval-results`` (the example corpus's recorded runs under two bundles,
scored by the eval: tests/integration/gateway/test_evals.py) and a decision on it, demoted by one
of the fed runs, then photographs the run list, two run views, the eval result and the demoted
decision at 1280×800 and the list on a phone.
"""

from __future__ import annotations

import sys
import time

from ui_stack import ROOT, Stack, chromium, run_off_loop, say, write_records

sys.path.insert(0, str(ROOT))  # the eval result is built as the tests build it

OUT = ROOT / "docs" / "img"
FIXTURES = ROOT / "tests" / "fixtures"
RECORDINGS = {
    "weather-tool-loop": "openai-responses/tool-loop-two-responses.sse",
    "tides-pause-turn": "anthropic-messages/pause-turn-then-continuation.sse",
    "refused": "openai-chat/refusal.sse",
    "grounded-answer": "gemini-generate/grounding-citations.sse",
    "cut-stream": "openai-chat/truncated.sse",
}


def feed_recordings(stack: Stack) -> list[str]:
    from modelevents.schemas.end_of_input import with_end_markers
    from modelevents.services.kafka import clients
    from modelevents.services.local import feeder

    async def feed(frames: list) -> None:
        producer = await clients.start_producer(stack.settings)
        try:
            await feeder.feed_frames(producer, stack.settings, frames)
        finally:
            await producer.stop()

    run_ids = []
    for n, (name, recording) in enumerate(RECORDINGS.items()):
        fed = feeder.frames_for_file(FIXTURES / recording, run_id=f"run-{name}",
                                     received_at=int(time.time() * 1000) - 60_000 * (9 - n))
        run_off_loop(feed(with_end_markers(fed.frames)))
        run_ids.append(fed.run_id)
    return run_ids


def approval_run(stack: Stack) -> str:
    """A run whose proposed write waits for a person's approval (as the executor asks)."""
    from modelevents.schemas.events import (
        Approval,
        Envelope,
        EventSource,
        ModelEvent,
        RunAwaiting,
        RunStarted,
        ToolCall,
    )
    from modelevents.services.run_logic.executor_events import RunOf, approval_event

    run_id, at = "run-note-needs-approval", int(time.time() * 1000)
    arguments = '{"notebook": "team", "text": "Ship the release on Friday"}'

    def provider_event(n: int, kind: str, payload) -> ModelEvent:
        return ModelEvent(event_id=f"{run_id}-{n}", run_id=run_id, tenant="default",
                          provider="openai", api="openai-responses", model="gpt-5-mini",
                          kind=kind, source=EventSource(frame_id=f"{run_id}-{n}", index=0,
                                                        transport="sse"),
                          received_at=at, adapter="screenshots/1",
                          envelope=Envelope(content_type="application/json", body=b"{}"),
                          payload=payload)

    events = [provider_event(0, "run.started", RunStarted("in_progress")),
              provider_event(1, "tool.call", ToolCall(0, "add_note", "call_note", arguments,
                                                      arguments_valid=True)),
              provider_event(2, "run.awaiting", RunAwaiting("tool_results")),
              approval_event(RunOf(run_id, "default", "openai", "openai-responses"),
                             "approval.requested",
                             Approval(approval_id="ap_note", tool_name="add_note",
                                      arguments=arguments),
                             b'{"reason": "add_note writes: the policy asks a person"}', at)]
    run_off_loop(write_records(stack.settings, "ingest", events))
    return run_id


def eval_result(stack: Stack) -> dict:
    """An eval result on the stack's eval-results topic."""
    from modelevents.services.migration.eval.store import publish
    from tests.integration.gateway.test_evals import scored_result

    record = scored_result("shots")
    run_off_loop(publish(stack.settings, record))
    return record


def demoted_decision(stack: Stack, result: dict) -> str:
    """A decision on ``result`` and its revision demoted by the tool loop's run, whose events
    another adapter revision wrote (as the watcher records it); the decision's id."""
    from modelevents.schemas.decision_record import Demotion
    from modelevents.services.migration.decisions.make import demoted
    from tests.integration.gateway.test_decisions import recorded, write

    decision = recorded(result)
    expected = decision.triggers.event_adapters["openai-responses"]
    observed = "openai_responses@5"
    write(stack.settings, demoted(decision, Demotion(
        trigger="event_adapter", at=int(time.time() * 1000), expected=expected,
        observed=observed, reason=f"events of openai-responses written by adapter {observed}, "
                                  f"not {expected}",
        run_id="run-weather-tool-loop", event_id="run-weather-tool-loop-0",
        topic=stack.settings.topic("events"), partition=0, offset=0)))
    return decision.decision_id


def wait_for(page, selector: str, what: str) -> None:
    page.wait_for_selector(selector, timeout=120_000)
    say(f"  {what}")


def main() -> int:
    from playwright.sync_api import sync_playwright

    OUT.mkdir(parents=True, exist_ok=True)
    stack = Stack(19962, 19972, worker=True)
    try:
        say("feeding recorded runs ...")
        run_ids = feed_recordings(stack)
        run_ids.append(approval_run(stack))
        result = eval_result(stack)
        result_id = result["result_id"]
        decision_id = demoted_decision(stack, result)
        with sync_playwright() as playwright:
            browser = chromium(playwright)
            try:
                desk = browser.new_page(viewport={"width": 1280, "height": 800})
                desk.goto(f"{stack.url}/ui")
                for run_id in run_ids:
                    wait_for(desk, f'#runs-body tr[data-run-id="{run_id}"]', run_id)
                wait_for(desk, '#runs-body tr[data-run-id="run-weather-tool-loop"] .s-completed',
                         "the tool loop completed")
                desk.screenshot(path=OUT / "ui-list.png")
                desk.goto(f"{stack.url}/ui#/runs/run-weather-tool-loop")
                wait_for(desk, "#terminal[data-status]", "the run view's end")
                desk.locator("ol.citations").scroll_into_view_if_needed()
                desk.screenshot(path=OUT / "ui-run.png", full_page=True)
                desk.goto(f"{stack.url}/ui#/runs/run-note-needs-approval")
                wait_for(desk, ".item.approval button.grant", "the approval's buttons")
                desk.screenshot(path=OUT / "ui-approval.png")
                desk.goto(f"{stack.url}/ui#/evals/{result_id}")
                wait_for(desk, "#charts figure", "the eval result's charts")
                desk.screenshot(path=OUT / "ui-eval.png", full_page=True)
                desk.goto(f"{stack.url}/ui#/decisions/{decision_id}")
                wait_for(desk, "#demotion", "the decision's demotion")
                desk.screenshot(path=OUT / "ui-decision.png", full_page=True)
                phone = browser.new_page(viewport={"width": 390, "height": 844}, is_mobile=True)
                phone.goto(f"{stack.url}/ui")
                wait_for(phone, '#runs-body tr[data-run-id="run-weather-tool-loop"]', "phone")
                phone.screenshot(path=OUT / "ui-phone.png")
            finally:
                browser.close()
    finally:
        stack.stop()
    for name in ("ui-list", "ui-run", "ui-approval", "ui-eval", "ui-decision", "ui-phone"):
        print(OUT / f"{name}.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
