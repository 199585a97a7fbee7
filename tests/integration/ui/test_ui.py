"""The operator's page (``/ui``) in a real headless Chromium (Debian's, driven by Playwright),
against the real pipeline: the broker, a ``modelevents worker`` subprocess, the gateway on a
loopback port, the provider simulator serving recorded streams as real SSE, and the real tool
executor for approvals; and ``/docs`` under its Content-Security-Policy. Nothing in the page is
faked; what the tests wait for with Playwright's ``expect`` is bounded by a hang guard, never a
timing assertion.

Playwright's sync API keeps an event loop running in this thread, so everything that talks to
Kafka from the test itself goes through :func:`off_loop` (a thread of its own).
"""

from __future__ import annotations

import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from playwright import sync_api as playwright_sync
from playwright.sync_api import expect

from modelevents.adapters.registry import normalize_file
from modelevents.schemas.end_of_input import with_end_markers
from modelevents.schemas.events import ModelEvent
from modelevents.services.local import feeder
from modelevents.services.local.asgi_thread import ServedApp
from modelevents.services.run_logic.run_machine import run_state_of
from tests.integration.pipeline import feed, run
from tests.integration.simulated_gateway import (  # noqa: F401  (fixtures)
    neutral,
    settings,
    sim,
    simulator,
    start_gateway,
    start_run,
)
from tests.integration.tools.test_executor import (  # noqa: F401  (fixtures)
    db,
    events_of,
    note_args,
    policy_for,
    propose,
    start_executor,
    tenant,
)
from tests.paths import FIXTURES, REPO_ROOT

pytestmark = pytest.mark.kafka

GUARD_MS = 90_000  # a hang guard for what the page is waited for, not a timing assertion
# Every expect waits as long (Playwright's default, 5 s, is short for a machine other test runs
# share: the list showed a run's state a moment later than that).
expect.set_options(timeout=GUARD_MS)


def off_loop(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` in a thread of its own (it may use asyncio.run)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(function, *args, **kwargs).result()


def chromium_path() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("Debian's chromium is not installed: scripts/bootstrap.sh installs it "
                    "(or: sudo apt-get install -y chromium)")
    return path


@pytest.fixture(scope="module")
def browser(settings) -> Iterator[Any]:
    with playwright_sync.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path(),
                                              args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    opened = context.new_page()
    opened.set_default_timeout(GUARD_MS)
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    yield opened
    context.close()
    assert not errors, f"the page raised: {errors}"


def feed_frames(settings_, frames) -> None:
    off_loop(run, feed(settings_, frames))


def recording_frames(name: str, run_id: str, tenant_: str = "default") -> list:
    fed = feeder.frames_for_file(FIXTURES / name, run_id=run_id, tenant=tenant_,
                                 received_at=int(time.time() * 1000))
    return with_end_markers(fed.frames)


def offline(name: str, run_id: str) -> list[ModelEvent]:
    return normalize_file(FIXTURES / name, run_id=run_id).events


PAUSED_RUN = "anthropic-messages/pause-turn-then-continuation.sse"


def paused_run_parts(run_id: str) -> tuple[list, list, list]:
    """The frames of PAUSED_RUN as ``run_id`` in three parts: up to the end of its first text
    block (the text still streaming), the rest of the first response (it pauses: pause_turn),
    and the continuation (the cited answer, the run completed)."""
    frames = recording_frames(PAUSED_RUN, run_id)
    first_stop = next(i for i, f in enumerate(frames) if f.sse_event == "content_block_stop")
    second_start = [i for i, f in enumerate(frames) if f.sse_event == "message_start"][1]
    return frames[:first_stop], frames[first_stop:second_start], frames[second_start:]


def expect_first_text_streaming(page) -> Any:
    """The first part of PAUSED_RUN on screen: its text, not shown as done; the text's item."""
    text = page.locator(".item.text").first
    expect(text).to_contain_text("Let me search.")
    expect(text).to_have_class(re.compile(r"\bstreaming\b"))
    expect(page.locator("#terminal")).to_be_hidden()
    return text


@contextmanager
def page_asking(browser, *, shared_worker: bool = True) -> Iterator[tuple[Any, list[str]]]:
    """A page of a browser context of its own (without SharedWorker: as in Chrome on Android)
    and the URLs it asked for; the page must raise nothing."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    if not shared_worker:
        context.add_init_script("delete window.SharedWorker;")
    asked: list[str] = []
    context.on("request", lambda r: asked.append(r.url))
    errors: list[str] = []
    try:
        opened = context.new_page()
        opened.set_default_timeout(GUARD_MS)
        opened.on("pageerror", lambda exc: errors.append(str(exc)))
        yield opened, asked
        assert opened.evaluate("typeof window.SharedWorker") == (
            "function" if shared_worker else "undefined")
    finally:
        context.close()
    assert not errors, f"the page raised: {errors}"


def open_run_from_list(page, gateway: ServedApp, run_id: str) -> None:
    page.goto(f"{gateway.url}/ui")
    page.fill("#f-q", run_id)
    row = page.locator(f'#runs-body tr[data-run-id="{run_id}"]')
    expect(row).to_be_visible()
    page.locator(f'#runs-body a[data-run-id="{run_id}"]').click()
    expect(page.locator("#run-id")).to_have_text(run_id)


# --- a run through the whole pipeline -------------------------------------------------------


def test_a_recorded_run_appears_in_the_list_and_completes_on_screen(settings, sim,
                                                                     start_gateway, page):
    gateway = start_gateway()
    recording = "openai-responses/tool-loop-two-responses.sse"
    lists: list[str] = []
    page.on("request", lambda r: lists.append(r.url) if "/v1/runs?" in r.url else None)
    page.goto(f"{gateway.url}/ui")
    started = start_run(gateway, neutral("openai", "openai-responses",
                                         "sim:openai-responses/tool-loop-two-responses"))
    run_id = started["run_id"]
    expected = run_state_of(offline(recording, run_id))
    assert expected.status == "completed"

    # The list shows it (pushed: the page was open before the run started, and asked once).
    row = page.locator(f'#runs-body tr[data-run-id="{run_id}"]')
    expect(row).to_be_visible()
    expect(row).to_contain_text("openai / openai-responses")
    expect(row.locator(".badge")).to_have_text("completed")
    assert len(lists) == 1 and "watch=true" in lists[0], lists
    usage = expected.usage
    assert usage is not None
    expect(row).to_contain_text(f"{usage.input_tokens} / {usage.output_tokens} / "
                                f"{usage.cache_read_tokens} / {usage.reasoning_tokens}")

    # Keyboard: the search field with "/", then j/Enter opens the run.
    page.locator("body").press("/")
    expect(page.locator("#f-q")).to_be_focused()
    page.keyboard.type(run_id)
    page.keyboard.press("Escape")
    expect(page.locator("#runs-body tr")).to_have_count(1)
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    expect(page.locator("#run-id")).to_have_text(run_id)

    terminal = page.locator("#terminal")
    expect(terminal).to_have_attribute("data-status", "completed")
    expect(terminal).to_contain_text("end_turn")
    expect(terminal).to_contain_text("provider: completed")  # the raw reason beside
    expect(page.locator("#run-status")).to_have_text("completed")

    # The text as the model wrote it; the reasoning there but collapsed.
    text = page.locator(".item.text.done .body")
    expect(text).to_contain_text("It is 14 °C and cloudy in Paris right now")
    reasoning = page.locator(".item.reasoning details")
    expect(reasoning).to_have_count(1)
    assert reasoning.get_attribute("open") is None
    expect(reasoning).to_contain_text("Checking the weather", use_inner_text=False)

    # The tool call with its whole arguments.
    tool = page.locator('.item.tool[data-tool-call-id="call_loop"]')
    expect(tool).to_contain_text("get_weather")
    expect(tool.locator("pre.args")).to_contain_text('"city": "Paris"')

    # The citation: its span marked in the text, linked to the source.
    mark = text.locator("mark")
    expect(mark).to_have_count(1)
    expect(mark).to_contain_text("météo")
    source = page.locator("ol.citations a")
    expect(source).to_have_attribute("href", "https://meteo.example.org/paris")
    expect(source).to_have_text("Météo Paris")

    # Usage: the run's totals over both provider calls.
    expect(page.locator("#run-usage")).to_contain_text(
        f"in {usage.input_tokens} · out {usage.output_tokens}")

    # The raw provider frame of the tool call, one click away.
    tool.locator("button.raw").click()
    dialog = page.locator("#raw-dialog")
    expect(dialog).to_be_visible()
    expect(page.locator("#raw-body")).to_contain_text('"fc_loop"')
    expect(page.locator("#raw-meta")).to_contain_text("text/event-stream")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()

    # Esc goes back to the list.
    page.keyboard.press("Escape")
    expect(page.locator("#list-view")).to_be_visible()


def test_a_paused_run_shows_waiting_then_continues(settings, start_gateway, page):
    gateway = start_gateway()
    run_id = f"ui-pause-{uuid.uuid4().hex[:8]}"
    before_pause, pause, continuation = paused_run_parts(run_id)

    # Up to the first text delta: the text is there, and not shown as done.
    feed_frames(settings, before_pause)
    open_run_from_list(page, gateway, run_id)
    text = expect_first_text_streaming(page)
    expect(text.locator(".state")).to_have_text("streaming")

    # The provider pauses (pause_turn): the page says it waits, and the run is not over.
    feed_frames(settings, pause)
    waiting = page.locator("#waiting")
    expect(waiting).to_be_visible()
    expect(waiting).to_have_attribute("data-reason", "continuation")
    expect(waiting).to_contain_text("pause_turn")
    expect(page.locator("#run-status")).to_have_text("waiting for tool")
    expect(page.locator("#terminal")).to_be_hidden()
    expect(page.locator(".item.hosted")).to_contain_text("web_search")

    # The continuation: waiting ends, the run completes with its cited answer.
    feed_frames(settings, continuation)
    expect(page.locator("#terminal")).to_have_attribute("data-status", "completed")
    expect(waiting).to_be_hidden()
    expect(page.locator(".item.text.done").last).to_contain_text("High tide is at 06:12.")
    expect(page.locator("ol.citations a")).to_have_attribute("href",
                                                             "https://tides.example.org/today")
    expect(page.locator(".item.hosted")).to_contain_text("tides.example.org")

    # The list, filtered by status and provider, has it; another status does not.
    page.goto(f"{gateway.url}/ui#/?status=completed&provider=anthropic&q={run_id}")
    expect(page.locator(f'#runs-body tr[data-run-id="{run_id}"]')).to_be_visible()
    page.select_option("#f-status", "failed")
    expect(page.locator("#runs-body tr")).to_have_count(0)


def test_twenty_runs_open_in_one_browser_are_all_live(browser, settings, start_gateway):
    """A browser keeps at most 6 HTTP/1.1 connections to one host: with a stream per run view,
    the seventh tab would not even load. The tabs share one stream of their runs (a
    SharedWorker reading GET /v1/events), so twenty tabs of one browser profile follow their
    runs live, up to the end."""
    gateway = start_gateway()
    recording = "anthropic-messages/pause-turn-then-continuation.sse"
    runs = [f"ui-many-{uuid.uuid4().hex[:8]}-{n}" for n in range(20)]
    frames = {run_id: recording_frames(recording, run_id) for run_id in runs}
    first_stop = next(i for i, f in enumerate(frames[runs[0]])
                      if f.sse_event == "content_block_stop")
    feed_frames(settings, [f for run_id in runs for f in frames[run_id][:first_stop]])
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    one_run_streams: list[str] = []
    context.on("request", lambda r: one_run_streams.append(r.url)
               if re.search(r"/v1/runs/[^/]+/events$", r.url) else None)
    errors: list[str] = []
    try:
        pages = []
        for run_id in runs:
            opened = context.new_page()
            opened.set_default_timeout(GUARD_MS)
            opened.on("pageerror", lambda exc: errors.append(str(exc)))
            opened.goto(f"{gateway.url}/ui#/runs/{run_id}")
            pages.append(opened)
        for opened in pages:  # every tab live at once, its run not over
            expect(opened.locator(".item.text").first).to_contain_text("Let me search.")
            expect(opened.locator("#terminal")).to_be_hidden()
        feed_frames(settings, [f for run_id in runs for f in frames[run_id][first_stop:]])
        for run_id, opened in zip(runs, pages, strict=True):
            expect(opened.locator("#run-id")).to_have_text(run_id)
            expect(opened.locator("#terminal")).to_have_attribute("data-status", "completed")
            expect(opened.locator(".item.text.done").last).to_contain_text(
                "High tide is at 06:12.")
        # A tab closed: the others go on (the shared stream drops only its run).
        pages[0].close()
        expect(pages[1].locator("#terminal")).to_have_attribute("data-status", "completed")
    finally:
        context.close()
    assert not errors, f"the pages raised: {errors}"
    assert not one_run_streams, "run views read streams of their own"


def test_without_shared_worker_a_run_view_reads_its_own_stream_live(browser, settings,
                                                                    start_gateway):
    """A browser without SharedWorker (Chrome on Android, older Safari): the run view reads
    GET /v1/runs/{id}/events itself, and its events still arrive live, up to the end."""
    gateway = start_gateway()
    run_id = f"ui-noworker-{uuid.uuid4().hex[:8]}"
    before_pause, pause, continuation = paused_run_parts(run_id)
    feed_frames(settings, before_pause)  # the run exists before its view opens
    with page_asking(browser, shared_worker=False) as (opened, asked):
        open_run_from_list(opened, gateway, run_id)
        expect_first_text_streaming(opened)
        expect(opened.locator("#stream-status")).to_have_text("Live: following the run's events.")
        # What the provider says next arrives while the view is open: live, not on a reload.
        feed_frames(settings, pause)
        expect(opened.locator("#waiting")).to_have_attribute("data-reason", "continuation")
        feed_frames(settings, continuation)
        expect(opened.locator("#terminal")).to_have_attribute("data-status", "completed")
        expect(opened.locator(".item.text.done").last).to_contain_text("High tide is at 06:12.")
        expect(opened.locator("#stream-status")).to_have_text(
            "The run ended; every event is shown.")
    own = f"{gateway.url}/v1/runs/{run_id}/events"
    assert own in asked, "the run view did not read its own stream"
    assert not any(url.endswith("/ui/stream-worker.js") for url in asked), asked


@pytest.mark.parametrize("shared_worker", [True, False], ids=["shared-worker", "own-stream"])
def test_a_run_view_opened_before_its_run_waits_for_it_then_shows_it_live(
        browser, settings, start_gateway, shared_worker):
    """A link to a run opened before the run reached the gateway (right after `modelevents
    feed` started it): the gateway answers 404, and the view says it waits for that run, asks
    again less and less often (up to every 5 s), and shows the run live once it is there — with
    the tabs' shared stream and with a stream of its own."""
    gateway = start_gateway()
    run_id = f"ui-before-{uuid.uuid4().hex[:8]}"
    before_pause, pause, continuation = paused_run_parts(run_id)
    with page_asking(browser, shared_worker=shared_worker) as (opened, asked):
        opened.goto(f"{gateway.url}/ui#/runs/{run_id}")
        waiting = opened.locator("#waiting")
        expect(waiting).to_have_attribute("data-reason", "run")
        expect(waiting).to_contain_text(f"Waiting for run {run_id}")
        status = opened.locator("#stream-status")
        expect(status).to_contain_text("404")
        # It backs off: the pause between its tries grows to its bound, and stays there.
        expect(status).to_contain_text("asking again in 5 s.")
        expect(opened.locator(".item")).to_have_count(0)

        feed_frames(settings, before_pause)  # the run starts while its view waits
        expect_first_text_streaming(opened)
        expect(waiting).to_be_hidden()
        expect(status).to_have_text("Live: following the run's events.")
        feed_frames(settings, pause)
        expect(waiting).to_have_attribute("data-reason", "continuation")
        feed_frames(settings, continuation)
        expect(opened.locator("#terminal")).to_have_attribute("data-status", "completed")
        expect(opened.locator(".item.text.done").last).to_contain_text("High tide is at 06:12.")
        expect(opened.locator("#run-tenant")).to_have_text("default")  # its state, read again
    own = f"{gateway.url}/v1/runs/{run_id}/events"
    if shared_worker:
        assert own not in asked, "the run view read a stream of its own"
    else:
        assert asked.count(own) >= 5, "the run view did not ask again while it waited"
        assert not any(url.endswith("/ui/stream-worker.js") for url in asked), asked


# --- approvals --------------------------------------------------------------------------------


def test_an_approval_granted_from_the_page_reaches_ingest_and_the_call_runs(
        settings, start_gateway, start_executor, tenant, db, page):
    gateway = start_gateway()
    start_executor(policy_for(tenant, scopes={"add_note": ["notebook:team"]}))
    run_id = off_loop(propose, settings, tenant,
                      [("add_note", "c1", note_args("team", "from the page"))])
    open_run_from_list(page, gateway, run_id)

    card = page.locator(".item.approval")
    expect(card).to_contain_text("add_note")
    expect(page.locator("#waiting")).to_have_attribute("data-reason", "approval")
    card.locator("input").fill("looked at it")
    card.locator("button.grant").click()

    # The decision is an approval.resolved on the run's events, with who decided …
    expect(card).to_have_attribute("data-decision", "granted")
    expect(card).to_contain_text(f"granted by tenant:{tenant}")
    events = off_loop(events_of, settings, run_id,
                      lambda es: any(e.kind == "tool.result" for e in es), "the tool's result")
    resolved = [e for e in events if e.kind == "approval.resolved"]
    assert len(resolved) == 1
    assert resolved[0].payload.decision == "granted"
    assert resolved[0].payload.decider == f"tenant:{tenant}"
    assert b"looked at it" in resolved[0].envelope.body
    # … and the executor ran the call: its result is on the page, with the receipt's outcome.
    result = page.locator('.item.tool[data-tool-call-id="c1"]')
    expect(result).to_have_attribute("data-result", "ok")
    expect(result.locator(".receipt")).to_contain_text("outcome: succeeded")
    expect(page.locator("#waiting")).not_to_have_attribute("data-reason", "approval")


# --- tenants ----------------------------------------------------------------------------------


def test_another_tenants_token_sees_nothing_of_a_run(settings, start_gateway, page):
    acme, other = "tok-acme-" + uuid.uuid4().hex, "tok-other-" + uuid.uuid4().hex
    gateway = start_gateway(api_tokens={"acme": [acme], "other": [other]})
    run_id = f"ui-acme-{uuid.uuid4().hex[:8]}"
    feed_frames(settings, recording_frames("openai-chat/refusal.sse", run_id, "acme"))

    page.goto(f"{gateway.url}/ui")
    page.fill("#token", acme)
    page.click("#token-form button")
    page.fill("#f-q", run_id)
    expect(page.locator(f'#runs-body tr[data-run-id="{run_id}"]')).to_be_visible()
    page.locator(f'#runs-body a[data-run-id="{run_id}"]').click()
    expect(page.locator("#terminal")).to_be_visible()
    refusal = page.locator(".item.refusal")
    expect(refusal).to_be_visible()  # a refusal, shown apart from errors
    expect(page.locator(".item.error")).to_have_count(0)

    # The other tenant's token: not in the list, and the run's page finds nothing.
    page.goto(f"{gateway.url}/ui")
    page.fill("#token", other)
    page.click("#token-form button")
    page.fill("#f-q", run_id)
    expect(page.locator("#list-status")).to_contain_text("No runs to show")
    expect(page.locator("#runs-body tr")).to_have_count(0)
    page.goto(f"{gateway.url}/ui#/runs/{run_id}")
    page.reload()
    expect(page.locator("#stream-status")).to_contain_text("404")
    # The same answer as for a run not there yet: the view waits for it, and shows nothing.
    expect(page.locator("#waiting")).to_have_attribute("data-reason", "run")
    expect(page.locator(".item")).to_have_count(0)
    # The API says the same to that token.
    listed = httpx.get(f"{gateway.url}/v1/runs", params={"q": run_id},
                       headers={"authorization": f"Bearer {other}"}, timeout=30)
    assert listed.status_code == 200 and listed.json()["runs"] == []


def test_the_page_is_usable_on_a_phone_viewport(browser, settings, start_gateway):
    gateway = start_gateway()
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    try:
        phone = context.new_page()
        phone.set_default_timeout(GUARD_MS)
        phone.goto(f"{gateway.url}/ui")
        expect(phone.locator("#list-title")).to_be_visible()
        expect(phone.locator("#f-q")).to_be_visible()
        # Nothing wider than the screen: no sideways scrolling of the page itself.
        width = phone.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, width
    finally:
        context.close()


def test_the_page_loads_nothing_from_outside_the_gateway(browser, settings,
                                                         start_gateway):
    gateway = start_gateway()
    context = browser.new_context()
    try:
        visitor = context.new_page()
        asked: list[str] = []
        visitor.on("request", lambda request: asked.append(request.url))
        visitor.goto(f"{gateway.url}/ui")
        expect(visitor.locator("#list-status")).not_to_be_empty(timeout=GUARD_MS)
        assert asked and all(url.startswith(gateway.url) for url in asked), asked
    finally:
        context.close()


# --- URLs from a run, and /docs, under their policies -------------------------------------------

SCRIPT_URL = "javascript:alert(1)"
HTML_DATA_URL = "data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg=="


def hostile_urls_frames(run_id: str) -> list:
    """GROUNDED (a Gemini stream with two cited sources) whose first source is SCRIPT_URL, with a
    file part whose URI is HTML_DATA_URL: what a hostile provider or a forwarded stream can
    send."""
    body = (FIXTURES / "gemini-generate/grounding-citations.sse").read_text(encoding="utf-8")
    assert "https://example.com/a" in body
    body = body.replace("https://example.com/a", SCRIPT_URL).replace(
        '"parts":[{"text":"Café ☕ opens at 8. "}]',
        '"parts":[{"text":"Café ☕ opens at 8. "},{"fileData":{"mimeType":"text/html",'
        f'"fileUri":"{HTML_DATA_URL}"}}}}]', 1)
    fed = feeder.frames_for_bytes(body.encode(), api="gemini-generate", run_id=run_id,
                                  received_at=int(time.time() * 1000))
    return with_end_markers(fed.frames)


def test_a_runs_javascript_and_data_urls_are_shown_as_text_never_as_links(
        settings, start_gateway, page):
    gateway = start_gateway()
    run_id = f"ui-urls-{uuid.uuid4().hex[:8]}"
    feed_frames(settings, hostile_urls_frames(run_id))
    open_run_from_list(page, gateway, run_id)
    expect(page.locator("#terminal")).to_have_attribute("data-status", "completed")

    # The http(s) source is a link; the javascript: one is its title as text.
    expect(page.locator("ol.citations a").first).to_have_attribute("href",
                                                                   "https://example.org/b")
    expect(page.locator("ol.citations .inert-url").first).to_have_text("example.com")
    # The media's data: URI is shown, as text.
    media = page.locator(".item.media")
    expect(media).to_contain_text(HTML_DATA_URL)
    expect(media.locator(".inert-url")).to_have_count(1)
    for scheme in ("javascript:", "data:"):
        expect(page.locator(f'[href^="{scheme}" i], [src^="{scheme}" i]')).to_have_count(0)


def test_docs_load_and_work_under_their_content_security_policy(browser, settings,
                                                                start_gateway):
    gateway = start_gateway()
    context = browser.new_context()
    try:
        visitor = context.new_page()
        refused: list[str] = []
        visitor.on("console", lambda m: refused.append(m.text)
                   if "Content Security Policy" in m.text else None)
        answer = visitor.goto(f"{gateway.url}/docs")
        assert answer is not None
        policy = answer.headers.get("content-security-policy", "")
        assert "default-src 'none'" in policy and "script-src 'self' 'sha256-" in policy, policy
        assert "unsafe-eval" not in policy and "script-src 'self' 'unsafe-inline'" not in policy
        # Swagger UI ran (its inline start script was allowed) and drew the gateway's routes.
        expect(visitor.locator(".swagger-ui .info .title")).to_contain_text("modelevents gateway")
        expect(visitor.locator(".opblock").first).to_be_visible()
        visitor.locator(".opblock-summary").first.click()
        expect(visitor.locator(".opblock-body").first).to_be_visible()
        assert not refused, refused
        # An inline script that is not the page's own is refused.
        ran = visitor.evaluate("""() => { const s = document.createElement('script');
            s.textContent = 'window.__injected = true'; document.body.append(s);
            return window.__injected === true; }""")
        assert ran is False
    finally:
        context.close()


# --- the README's drop-in application -------------------------------------------------------

DROP_IN_SNIPPET = re.compile(
    r"<!-- drop-in-snippet -->\s*```python\n(.*?)```\s*<!-- /drop-in-snippet -->", re.S)


def test_the_readmes_unchanged_openai_app_through_the_proxy_shows_live_in_the_ui(
        settings, start_gateway, page, monkeypatch, capsys):
    # The README's block as a user copies it, pointed at this test's gateway, the model one
    # the simulator serves, the key from the environment as the openai SDK reads it.
    snippet = DROP_IN_SNIPPET.search((REPO_ROOT / "README.md").read_text())
    assert snippet, "README.md has no drop-in snippet between its markers"
    gateway = start_gateway()
    code = snippet[1].replace("http://127.0.0.1:8080", gateway.url)
    code = code.replace('model="gpt-5"', 'model="sim:openai-responses/text-with-usage"')
    assert gateway.url in code and "sim:" in code, "the snippet's base URL or model changed"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-readme-app")
    page.goto(f"{gateway.url}/ui")

    def listed() -> set[str]:
        """The newest runs of the module's topics (the list is newest first; the earlier tests'
        runs have ended)."""
        answer = httpx.get(f"{gateway.url}/v1/runs", params={"limit": 200}, timeout=30)
        assert answer.status_code == 200, answer.text
        return {row["run_id"] for row in answer.json()["runs"]}

    before = listed()
    exec(compile(code, "README.md (drop-in snippet)", "exec"), {})
    printed = capsys.readouterr().out.split()
    assert printed[0] == "response.created" and printed[-1] == "response.completed", printed
    deadline = time.monotonic() + 90
    while not (new := listed() - before):
        assert time.monotonic() < deadline, "the proxied run never reached the run list"
        time.sleep(0.2)
    [run_id] = new
    # On the page that was open before the app ran: pushed to the list, then its run view.
    row = page.locator(f'#runs-body tr[data-run-id="{run_id}"]')
    expect(row).to_be_visible()
    expect(row).to_contain_text("openai / openai-responses")
    expect(row.locator(".badge")).to_have_text("completed")
    open_run_from_list(page, gateway, run_id)
    expect(page.locator("#terminal")).to_have_attribute("data-status", "completed")
