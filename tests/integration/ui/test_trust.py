"""The page (``/ui``) shows the worker's trust verdicts, in a real headless Chromium against the
real pipeline (tests/integration/ui/test_ui.py's pattern): a worker started with ``--policy``, the
gateway, one hand-written stream with trusted, untrusted and blocked sources
(tests/source_trust_cases.py). Blocked sources are struck out, untrusted ones marked, each
violation shown, the run flagged."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright import sync_api as playwright_sync
from playwright.sync_api import expect

from tests.integration.simulated_gateway import (  # noqa: F401  (fixtures)
    sim,
    simulator,
    start_gateway,
)
from tests.integration.ui.test_ui import (
    GUARD_MS,
    chromium_path,
    feed_frames,
    open_run_from_list,
    recording_frames,
)
from tests.source_trust_cases import POLICY_YAML, TENANT

pytestmark = pytest.mark.kafka

RECORDING = "anthropic-messages/hosted-sources-trust.sse"


@pytest.fixture
def page() -> Iterator[Any]:
    with playwright_sync.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        opened = browser.new_page(viewport={"width": 1280, "height": 800})
        opened.set_default_timeout(GUARD_MS)
        errors: list[str] = []
        opened.on("pageerror", lambda exc: errors.append(str(exc)))
        try:
            yield opened
        finally:
            browser.close()
        assert not errors, f"the page raised: {errors}"


def test_the_page_strikes_out_blocked_sources_marks_untrusted_and_shows_violations(
        settings, start_worker, start_gateway, page, tmp_path):
    # The gateway without tokens shows the runs of tenant "default": the policy names it.
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY_YAML.replace(f"  {TENANT}:", "  default:"))
    start_worker(extra=("--policy", str(policy)))
    gateway = start_gateway()
    run_id = f"ui-trust-{uuid.uuid4().hex[:8]}"
    feed_frames(settings, recording_frames(RECORDING, run_id))
    open_run_from_list(page, gateway, run_id)
    expect(page.locator("#terminal")).to_have_attribute("data-status", "completed")

    cited = page.locator("ol.citations li")
    expect(cited).to_have_count(3)
    for index, verdict in enumerate(("trusted", "untrusted", "blocked")):
        expect(cited.nth(index)).to_have_attribute("data-trust", verdict)
        expect(cited.nth(index).locator(".tag.trust")).to_have_text(verdict)
    expect(cited.nth(2).locator("a")).to_have_css("text-decoration-line", "line-through")
    expect(cited.nth(1).locator("a")).to_have_css("text-decoration-line", "underline")

    hosted = page.locator(".item.hosted")
    expect(hosted).to_have_attribute("data-trust", "blocked")
    expect(hosted.locator('.evidence li[data-trust="blocked"] a')).to_have_text(
        "https://evil.example/payload")
    expect(hosted.locator('.evidence li[data-trust="untrusted"] .tag')).to_have_text("untrusted")

    violations = page.locator(".item.violation")
    expect(violations).to_have_count(2)  # in the search's evidence, and a citation
    expect(violations.first).to_contain_text("Policy violation: blocked source")
    expect(violations.first).to_contain_text("evil.example")
    expect(page.locator("#run-flag")).to_contain_text("policy violation blocked_source")

    # The run list counts them (its search's and its citations' sources).
    rows = httpx.get(f"{gateway.url}/v1/runs", params={"q": run_id}, timeout=30).json()["runs"]
    assert [(r["sources"], r["policy_violations"]) for r in rows] == [
        ({"untrusted": 2, "blocked": 2}, 2)]
