// @ts-check
// modelevents UI: the run list (#/), live: GET /v1/runs?watch=true sends the first page, then
// every change of a run the filters show (services/gateway/routes/run_list.py).
import { api, apiJson, currentToken, refusalText } from "../api.js";
import { $, badge, el, sleep } from "../dom.js";
import { fmtDuration, fmtTarget, fmtTime, fmtTokens } from "../format.js";
import { readSse } from "../sse.js";
import { RunList, listSummary } from "../state.js";

const LIST_RETRY_MS = 1000;
const FILTERS = ["status", "provider", "tenant", "q"];

/** @typedef {{kind: string, stop(): void}} View */

/**
 * A filter's field of the form.
 * @param {HTMLFormElement} form @param {string} name
 * @returns {HTMLInputElement}
 */
const field = (form, name) => /** @type {HTMLInputElement} */ (form.elements.namedItem(name));

/**
 * The table's rows.
 * @param {import("../state.js").RunRow[]} rows @param {number} selected
 */
function render(rows, selected) {
  const body = $("runs-body");
  const active = /** @type {HTMLElement | null} */ (document.activeElement);
  const focusedRun = active && active.dataset ? active.dataset.runId : null;
  body.replaceChildren(...rows.map((row, index) => {
    const tags = [];
    if (row.waiting) tags.push(el("span", { class: "tag wait", text: `waiting: ${row.waiting}` }));
    if (row.needs_reconciliation) tags.push(el("span", { class: "tag recon", text: "needs reconciliation",
      title: (row.reconciliation_notes || []).join("; ") }));
    return el("tr", { class: index === selected ? "selected" : null, dataset: { runId: row.run_id } },
      el("td", { class: "run", "data-label": "Run" }, el("a", { href: `#/runs/${encodeURIComponent(row.run_id)}`,
        dataset: { runId: row.run_id, index: String(index) } }, row.run_id)),
      el("td", { "data-label": "Status" }, badge(row.status), ...tags),
      el("td", { "data-label": "Provider" }, fmtTarget(row) || "—"),
      el("td", { class: "wide", "data-label": "Tenant" }, row.tenant),
      el("td", { class: "wide", "data-label": "Started" }, fmtTime(row.started_at)),
      el("td", { "data-label": "Duration" }, fmtDuration(row.duration_ms)),
      el("td", { "data-label": "Tokens in/out/cache/reasoning" }, fmtTokens(row.tokens)));
  }));
  if (focusedRun) {
    const again = /** @type {HTMLElement | null} */ (body.querySelector(`a[data-run-id="${CSS.escape(focusedRun)}"]`));
    if (again) again.focus();
  }
  const providers = [...new Set(rows.map((r) => r.provider).filter(Boolean))];
  $("providers").replaceChildren(...providers.map((p) => el("option", { value: p })));
}

/** Shows the list, live until stopped. @returns {View} */
export function showList() {
  $("run-view").hidden = true;
  $("list-view").hidden = false;
  document.title = "modelevents — runs";
  const form = /** @type {HTMLFormElement} */ ($("filters"));
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  for (const name of FILTERS) field(form, name).value = params.get(name) || "";
  const list = new RunList();
  let stopped = false;
  let selected = 0;
  /** @type {AbortController | null} */
  let controller = null;

  /** @param {string | null} [cursor] */
  function query(cursor) {
    const search = new URLSearchParams();
    for (const name of FILTERS) {
      const value = field(form, name).value.trim();
      if (value) search.set(name, value);
    }
    if (cursor) search.set("cursor", cursor);
    return search;
  }

  function show() {
    const rows = list.rows();
    render(rows, selected);
    $("more").hidden = !list.nextCursor;
    $("list-status").textContent = listSummary(rows.length, list.complete, Boolean(currentToken()));
  }

  /** @param {import("../sse.js").SseEvent} event */
  function onChange(event) {
    if (list.apply(event)) show();
  }

  async function refresh() {
    if (controller) controller.abort();
    const mine = controller = new AbortController();
    while (!stopped && controller === mine) {
      try {
        const response = await api("/v1/runs?" + query() + "&watch=true", { signal: mine.signal });
        if (!response.ok || !response.body) {
          $("list-status").textContent = `Could not list runs: ${response.status} ${await refusalText(response)}`;
        } else {
          await readSse(response.body.getReader(), onChange);
        }
      } catch (error) {
        if (mine.signal.aborted) return;
        $("list-status").textContent = `Could not list runs: ${/** @type {Error} */ (error).message}; trying again…`;
      }
      await sleep(LIST_RETRY_MS); // the stream ended (a gateway restart, fell behind): again
    }
  }

  async function more() {
    if (!list.nextCursor) return;
    list.addPage(await apiJson("/v1/runs?" + query(list.nextCursor)));
    show();
  }

  function onFilter() {
    list.restart();
    selected = 0;
    const search = query();
    history.replaceState(null, "", "#/" + (search.toString() ? "?" + search : ""));
    refresh();
  }

  /** @param {number} step */
  function move(step) {
    const links = /** @type {HTMLElement[]} */ ([...$("runs-body").querySelectorAll("a[data-run-id]")]);
    if (!links.length) return;
    selected = Math.max(0, Math.min(links.length - 1, selected + step));
    links.forEach((a, i) => a.closest("tr")?.classList.toggle("selected", i === selected));
    links[selected].focus();
  }

  /** @param {KeyboardEvent} event */
  function onKey(event) {
    const target = /** @type {HTMLElement} */ (event.target);
    if (target.matches("input, select, textarea")) {
      if (event.key === "Escape") target.blur();
      return;
    }
    if (event.key === "j" || event.key === "ArrowDown") { event.preventDefault(); move(1); }
    else if (event.key === "k" || event.key === "ArrowUp") { event.preventDefault(); move(-1); }
    else if (event.key === "/") { event.preventDefault(); $("f-q").focus(); }
  }

  /** @param {SubmitEvent} event */
  const onSubmit = (event) => { event.preventDefault(); onFilter(); };
  form.addEventListener("input", onFilter);
  form.addEventListener("submit", onSubmit);
  $("more").onclick = more;
  document.addEventListener("keydown", onKey);
  refresh();
  return { kind: "list", stop() {
    stopped = true;
    if (controller) controller.abort();
    form.removeEventListener("input", onFilter);
    form.removeEventListener("submit", onSubmit);
    document.removeEventListener("keydown", onKey);
  } };
}
