"""The decision pages (``#/decisions``, ``#/decisions/<id>``) in a real headless Chromium
against the real gateway and broker: a decision recorded by the decisions' own store on an eval
result the eval's own code wrote, the page opened, then the demoted revision written as the
watcher writes it — naming a live run fed through the module's worker — and the open page shows
the decision historical with its evidence, without a reload.
"""

from __future__ import annotations

import time
import uuid

import pytest
from playwright.sync_api import expect

from modelevents.adapters.registry import ADAPTERS
from modelevents.schemas.decision_record import Demotion
from modelevents.services.migration.decisions.make import demoted
from modelevents.services.migration.eval.store import publish
from tests.integration.cli.test_eval import RESPONSES
from tests.integration.gateway.test_decisions import recorded, write
from tests.integration.gateway.test_evals import CORPUS, scored_result
from tests.integration.pipeline import run
from tests.integration.simulated_gateway import (  # noqa: F401  (fixtures)
    settings,
    sim,
    simulator,
    start_gateway,
)
from tests.integration.ui.test_evals_page import feed_run
from tests.integration.ui.test_ui import (  # noqa: F401  (fixtures)
    browser,
    off_loop,
    page,
)

pytestmark = pytest.mark.kafka

# The revision the installed adapter writes events with (what the watcher would observe).
ADAPTER = f"{ADAPTERS['openai-responses'].name}@{ADAPTERS['openai-responses'].revision}"


def test_an_open_decision_page_shows_its_demotion_and_evidence_without_a_reload(
        settings, start_gateway, page):
    result = scored_result(uuid.uuid4().hex[:6])
    off_loop(run, publish(settings, result))
    decision = recorded(result)
    off_loop(write, settings, decision)
    # The live run that will fire the trigger: a recorded stream through the worker.
    task = next(t for t in CORPUS.tasks if "openai-responses" in t.simulator)
    live_run = "run-" + uuid.uuid4().hex
    status = feed_run(settings, live_run, task.id, "openai-responses")
    gateway = start_gateway()

    # From the navigation to the list, then the decision: current.
    page.goto(f"{gateway.url}/ui")
    page.get_by_role("link", name="Decisions").click()
    expect(page.get_by_role("link", name="Decisions")).to_have_attribute("aria-current", "page")
    row = page.locator(f'#decisions-body tr[data-decision-id="{decision.decision_id}"]')
    expect(row).to_have_attribute("data-status", "current")
    expect(row).to_contain_text("responses")
    row.get_by_role("link").click()
    expect(page.locator("#decision-id")).to_have_text(decision.decision_id)
    expect(page.locator("#decision-status [data-status]")).to_have_text("current")
    expect(page.locator("#decision-bundle")).to_contain_text(RESPONSES.bundle_id)
    expect(page.locator("#decision-target")).to_have_text("openai / openai-responses / gpt-5-mini")
    expect(page.locator("#decision-owner")).to_have_text(decision.owner)
    expect(page.locator("#required li")).to_have_text(decision.required_capabilities)
    expect(page.locator(f'#eval-results a[href="#/evals/{result["result_id"]}"]')
           ).to_have_text(result["result_id"])
    expect(page.locator("#evidence a")).to_have_attribute("href", decision.evidence[0])
    expect(page.locator("#exceptions li")).to_have_text(decision.exceptions)
    expect(page.locator('#triggers tr[data-trigger="model_snapshot"]')).to_contain_text(
        "not watched")  # the bundle names no snapshot
    adapters_row = page.locator('#triggers tr[data-trigger="event_adapter"]')
    for api, adapter in decision.triggers.event_adapters.items():
        expect(adapters_row).to_contain_text(f"{api}: {adapter}")
    expect(page.locator("#demotion")).to_have_count(0)
    page.evaluate("window.stillTheSamePage = true")

    # The watcher's revision, written while the page is open.
    expected = decision.triggers.event_adapters["openai-responses"]
    demotion = Demotion(
        trigger="event_adapter", at=int(time.time() * 1000),
        reason=f"events of openai-responses written by adapter {ADAPTER}, not {expected}",
        expected=expected, observed=ADAPTER, run_id=live_run, event_id=f"{live_run}:0", topic=settings.topic("events"),
        partition=2, offset=17)
    off_loop(write, settings, demoted(decision, demotion))

    expect(page.locator("#decision-status [data-status]")).to_have_text("historical")
    expect(page.locator("#decision-revision")).to_have_text("1")
    expect(page.locator("#demotion")).to_be_visible()
    expect(page.locator("#demotion-trigger")).to_have_text("Event adapter revision")
    expect(page.locator("#demotion-reason")).to_have_text(demotion.reason)
    expect(page.locator("#demotion-expected")).to_have_text(expected)
    expect(page.locator("#demotion-observed")).to_have_text(ADAPTER)
    expect(page.locator("#demotion-event")).to_have_text(demotion.event_id)
    expect(page.locator("#demotion-record")).to_have_text(
        f"{settings.topic('events')} / partition 2 / offset 17")
    expect(page.locator('#triggers tr[data-trigger="event_adapter"]')).to_have_class("fired")
    assert page.evaluate("window.stillTheSamePage") is True  # no reload

    # The evidence's run link opens the run, fed through the worker.
    page.locator("#demotion-run a").click()
    expect(page.locator("#run-id")).to_have_text(live_run)
    expect(page.locator("#run-status")).to_have_attribute("data-status", status)

    # Back in the list, the decision is marked historical.
    page.get_by_role("link", name="Decisions").click()
    expect(row).to_have_attribute("data-status", "historical")
    expect(row).to_have_class("historical")
    expect(row.locator(".badge")).to_have_text("historical")
