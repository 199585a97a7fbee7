"""The eval results page (``#/evals``, ``#/evals/<id>``) in a real headless Chromium against the
real gateway and broker: a result written to ``eval-results`` by the eval's own code (the
example corpus under two bundles, one run rejected by a hard gate), and the rejected run's
recorded stream fed through the module's worker, so that its evidence links to a real run.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from modelevents.adapters.registry import normalize_file
from modelevents.schemas.end_of_input import with_end_markers
from modelevents.services.local import feeder
from modelevents.services.migration.eval.gates import GATES
from modelevents.services.migration.eval.store import publish
from modelevents.services.run_logic.run_machine import run_state_of
from tests.integration.gateway.test_evals import CORPUS, scored_result
from tests.integration.pipeline import feed, run
from tests.integration.simulated_gateway import (  # noqa: F401  (fixtures)
    settings,
    sim,
    simulator,
    start_gateway,
)
from tests.integration.ui.test_ui import (  # noqa: F401  (fixtures)
    browser,
    off_loop,
    page,
)
from tests.services.migration.eval.runs import REGISTRY

pytestmark = pytest.mark.kafka


def feed_run(settings_, run_id: str, task_id: str, api: str) -> str:
    """The run as the worker would have it from the gateway: the frames of the recording the
    simulator answers the task with on ``api``; the status the run ends in."""
    scenario = REGISTRY.resolve(CORPUS.task(task_id).simulator[api], api)
    fed = feeder.frames_for_file(Path(scenario.path), run_id=run_id,
                                 received_at=int(time.time() * 1000))
    off_loop(run, feed(settings_, with_end_markers(fed.frames)))
    return run_state_of(normalize_file(Path(scenario.path), run_id=run_id).events).status


def test_the_gates_table_comes_first_and_evidence_links_to_its_run(settings, start_gateway,
                                                                   page):
    record: dict[str, Any] = scored_result(uuid.uuid4().hex[:6])
    rejected = next(r for r in record["runs"] if not r["accepted"])
    outcome = {b["bundle"]: b for b in record["bundles"]}[rejected["bundle"]]
    api = "openai-chat" if outcome["name"] == "chat" else "openai-responses"
    status = feed_run(settings, rejected["run_id"], rejected["task"], api)
    off_loop(run, publish(settings, record))
    gateway = start_gateway()

    # From the navigation to the list, then the result.
    page.goto(f"{gateway.url}/ui")
    page.get_by_role("link", name="Eval results").click()
    expect(page.get_by_role("link", name="Eval results")).to_have_attribute("aria-current",
                                                                            "page")
    row = page.locator(f'#evals-body tr[data-result-id="{record["result_id"]}"]')
    expect(row).to_contain_text(CORPUS.ref)
    row.get_by_role("link").click()
    expect(page.locator("#eval-id")).to_have_text(record["result_id"])

    # The gates first, then the comparison, then what was observed.
    expect(page.locator("#eval-body h2")).to_have_text(
        ["Hard gates", "Comparison of accepted runs", "Observed"])
    assert page.evaluate("""() => Boolean(document.querySelector('#gates-table')
        .compareDocumentPosition(document.querySelector('#comparison'))
        & Node.DOCUMENT_POSITION_FOLLOWING)""")
    for bundle in record["bundles"]:
        line = page.locator(f'#gates-table tbody tr[data-bundle="{bundle["bundle"]}"]')
        expect(line.locator("td")).to_have_text(
            [str(bundle["runs"]), str(len(bundle["not_started"])), str(bundle["accepted"]),
             str(bundle["rejected"]), *(str(bundle["gate_failures"].get(g, 0)) for g in GATES)])

    # Each gate a rejected run failed, with its evidence, and a link to the run.
    for gate in rejected["gates"]:
        evidence = page.locator(f'#rejections tr[data-run-id="{rejected["run_id"]}"]'
                                f'[data-gate="{gate["gate"]}"]')
        expect(evidence.locator("td.evidence")).to_have_text(gate["evidence"])

    # The comparison: each bundle's figure with its interval and the rejected beside it.
    success = page.locator('#comparison tr[data-metric="task_success"]')
    for bundle in record["bundles"]:
        figure = next(f for f in bundle["figures"] if f["name"] == "task_success")
        cell = success.locator(f'td[data-bundle="{bundle["bundle"]}"]')
        expect(cell).to_contain_text(f"{round(figure['value'] * 100)}%")
        expect(cell).to_contain_text(f"{figure['n']} accepted")
        expect(cell).to_contain_text(f"rejected {figure['rejected']}")
    (comparison,) = record["comparisons"]
    paired = next(f for f in comparison["figures"] if f["name"] == "task_success")
    expect(success.locator("td.paired")).to_contain_text(f"{paired['tasks']} tasks")

    # One bar per bundle per metric (a bundle with no value for a metric has none, and says so).
    charts = page.locator("#charts figure")
    names = [f["name"] for f in record["bundles"][0]["figures"]]
    expect(charts).to_have_count(len(names))
    for name in names:
        valued = [b["bundle"] for b in record["bundles"]
                  if next(f for f in b["figures"] if f["name"] == name)["value"] is not None]
        bars = page.locator(f'#charts figure[data-metric="{name}"] rect.bar')
        expect(bars).to_have_count(len(valued))
        assert [bars.nth(i).get_attribute("data-bundle") for i in range(len(valued))] == valued
    expect(page.locator('#charts figure[data-metric="task_success"] rect.bar')).to_have_count(
        len(record["bundles"]))
    expect(page.locator('#charts figure[data-metric="task_success"] .whisker')).to_have_count(
        len(record["bundles"]))

    # The snapshots the events reported.
    for bundle in record["bundles"]:
        for snapshot in bundle["model_snapshots"]:
            expect(page.locator(f'#observed tr[data-bundle="{bundle["bundle"]}"]')
                   ).to_contain_text(snapshot)

    # The evidence's run link opens the run, fed through the worker.
    page.locator(f'#rejections tr[data-run-id="{rejected["run_id"]}"] a').first.click()
    expect(page.locator("#run-id")).to_have_text(rejected["run_id"])
    expect(page.locator("#run-view")).to_be_visible()
    expect(page.locator("#run-status")).to_have_attribute("data-status", status)
    expect(page.locator("#eval-view")).to_be_hidden()
