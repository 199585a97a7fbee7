// modelevents UI: the run list and one run live. Plain JavaScript, no build step, no library;
// it talks only to the gateway that served it (services/gateway/ui.py says which routes).
"use strict";

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = "modelevents.token";
const LIST_RETRY_MS = 1000;
const EVENT_LOG_ROWS = 200;
const WAITING_TEXT = {
  tool_results: "Waiting for tool results: the model asked for a tool the application runs.",
  approval: "Waiting for an approval: a tool call needs a person's decision (below).",
  continuation: "Paused by the provider: waiting for the continuation call.",
};

let token = sessionStorage.getItem(TOKEN_KEY) || "";
let current = null; // the view shown: {kind: "list"|"run", stop()}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "dataset") Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// A URL from a run (a citation's source, a media URI, a hosted tool's evidence) becomes a link
// only when it is absolute http(s): javascript:, data:, blob:, file: and relative ones stay text.
const LINK_SCHEMES = ["http:", "https:"];

function safeUrl(value) {
  if (typeof value !== "string") return null;
  try {
    const url = new URL(value);
    return LINK_SCHEMES.includes(url.protocol) ? url.href : null;
  } catch (err) {
    return null;
  }
}

// An external link that opens apart from the page, or the URL as inert text.
function linkOrText(value, label, attrs = {}) {
  const href = safeUrl(value);
  return href ? el("a", Object.assign({ href, rel: "noopener noreferrer", target: "_blank" }, attrs), label)
    : el("span", { class: "inert-url" }, label);
}

function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (token) headers.Authorization = "Bearer " + token;
  return fetch(path, Object.assign({}, options, { headers }));
}

async function apiJson(path, options) {
  const response = await api(path, options);
  let body = null;
  try { body = await response.json(); } catch (e) { body = null; }
  if (!response.ok) {
    const message = (body && body.error) || response.statusText;
    const error = new Error(`${response.status}: ${message}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const fmtTime = (ms) => (ms ? new Date(ms).toLocaleString() : "—");
function fmtDuration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}
const n = (value) => (value === null || value === undefined ? "–" : String(value));
function fmtTokens(t) {
  if (!t) return "—";
  return `${n(t.input)} / ${n(t.output)} / ${n(t.cache_read)} / ${n(t.reasoning)}`;
}
function prettyJson(text) {
  if (text === null || text === undefined || text === "") return "";
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return String(text); }
}
function badge(status) {
  return el("span", { class: `badge s-${status}`, text: status.replaceAll("_", " ") });
}

// --- the run list ------------------------------------------------------------------------------

function showList() {
  $("run-view").hidden = true;
  $("list-view").hidden = false;
  document.title = "modelevents — runs";
  const form = $("filters");
  const params = new URLSearchParams(location.hash.split("?")[1] || "");
  for (const name of ["status", "provider", "tenant", "q"]) form.elements[name].value = params.get(name) || "";
  let stopped = false;
  let extra = []; // rows of older pages asked for with "Older runs"
  let nextCursor = null;
  let selected = 0;

  function query(cursor) {
    const search = new URLSearchParams();
    for (const name of ["status", "provider", "tenant", "q"]) {
      const value = form.elements[name].value.trim();
      if (value) search.set(name, value);
    }
    if (cursor) search.set("cursor", cursor);
    return search;
  }

  function render(rows) {
    const body = $("runs-body");
    const focusedRun = document.activeElement && document.activeElement.dataset
      ? document.activeElement.dataset.runId : null;
    body.replaceChildren(...rows.map((row, index) => {
      const tags = [];
      if (row.waiting) tags.push(el("span", { class: "tag wait", text: `waiting: ${row.waiting}` }));
      if (row.needs_reconciliation) tags.push(el("span", { class: "tag recon", text: "needs reconciliation",
        title: (row.reconciliation_notes || []).join("; ") }));
      return el("tr", { class: index === selected ? "selected" : null, dataset: { runId: row.run_id } },
        el("td", { class: "run", "data-label": "Run" }, el("a", { href: `#/runs/${encodeURIComponent(row.run_id)}`,
          dataset: { runId: row.run_id, index: String(index) } }, row.run_id)),
        el("td", { "data-label": "Status" }, badge(row.status), ...tags),
        el("td", { "data-label": "Provider" }, [row.provider, row.api, row.model].filter(Boolean).join(" / ") || "—"),
        el("td", { class: "wide", "data-label": "Tenant" }, row.tenant),
        el("td", { class: "wide", "data-label": "Started" }, fmtTime(row.started_at)),
        el("td", { "data-label": "Duration" }, fmtDuration(row.duration_ms)),
        el("td", { "data-label": "Tokens in/out/cache/reasoning" }, fmtTokens(row.tokens)));
    }));
    if (focusedRun) {
      const again = body.querySelector(`a[data-run-id="${CSS.escape(focusedRun)}"]`);
      if (again) again.focus();
    }
    const providers = [...new Set(rows.map((r) => r.provider).filter(Boolean))];
    $("providers").replaceChildren(...providers.map((p) => el("option", { value: p })));
  }

  // The list is pushed: GET /v1/runs?watch=true sends the first page, then every change of a
  // run these filters show (services/gateway/run_list.py).
  const live = new Map(); // run id → row, of the first page and the changes since
  let complete = true;
  let controller = null;

  function show() {
    const sortKey = (r) => [r.started_at || r.updated_at || 0, r.run_id];
    const newestFirst = (a, b) => {
      const [x, y] = [sortKey(a), sortKey(b)];
      return y[0] - x[0] || (y[1] > x[1] ? 1 : y[1] < x[1] ? -1 : 0);
    };
    const rows = [...live.values()].sort(newestFirst)
      .concat(extra.filter((r) => !live.has(r.run_id)));
    render(rows);
    $("more").hidden = !nextCursor;
    $("list-status").textContent = rows.length
      ? `${rows.length} run${rows.length === 1 ? "" : "s"}${complete ? "" : " (still reading the runs topic)"}`
      : "No runs to show" + (token ? " for this token." : ".");
  }

  function onChange({ kind, data }) {
    if (!data) return;
    const body = JSON.parse(data);
    if (kind === "page") {
      live.clear();
      for (const row of body.runs) live.set(row.run_id, row);
      complete = body.complete;
      if (!extra.length) nextCursor = body.next_cursor;
    } else if (kind === "run") {
      live.set(body.run_id, body);
      extra = extra.filter((r) => r.run_id !== body.run_id);
    } else if (kind === "gone") {
      live.delete(body.run_id);
      extra = extra.filter((r) => r.run_id !== body.run_id);
    } else return;
    show();
  }

  async function refresh() {
    if (controller) controller.abort();
    const mine = controller = new AbortController();
    while (!stopped && controller === mine) {
      try {
        const response = await api("/v1/runs?" + query() + "&watch=true", { signal: mine.signal });
        if (!response.ok) {
          let message = response.statusText;
          try { message = (await response.json()).error || message; } catch (e) { /* not JSON */ }
          $("list-status").textContent = `Could not list runs: ${response.status} ${message}`;
        } else {
          await readSse(response.body.getReader(), onChange);
        }
      } catch (error) {
        if (mine.signal.aborted) return;
        $("list-status").textContent = `Could not list runs: ${error.message}; trying again…`;
      }
      await sleep(LIST_RETRY_MS); // the stream ended (a gateway restart, fell behind): again
    }
  }

  async function more() {
    if (!nextCursor) return;
    const page = await apiJson("/v1/runs?" + query(nextCursor));
    extra = extra.concat(page.runs);
    nextCursor = page.next_cursor;
    show();
  }

  function onFilter() {
    extra = []; selected = 0;
    const search = query();
    history.replaceState(null, "", "#/" + (search.toString() ? "?" + search : ""));
    refresh();
  }

  function move(step) {
    const links = [...$("runs-body").querySelectorAll("a[data-run-id]")];
    if (!links.length) return;
    selected = Math.max(0, Math.min(links.length - 1, selected + step));
    links.forEach((a, i) => a.closest("tr").classList.toggle("selected", i === selected));
    links[selected].focus();
  }

  function onKey(event) {
    if (event.target.matches("input, select, textarea")) {
      if (event.key === "Escape") event.target.blur();
      return;
    }
    if (event.key === "j" || event.key === "ArrowDown") { event.preventDefault(); move(1); }
    else if (event.key === "k" || event.key === "ArrowUp") { event.preventDefault(); move(-1); }
    else if (event.key === "/") { event.preventDefault(); $("f-q").focus(); }
  }

  form.addEventListener("input", onFilter);
  form.addEventListener("submit", (e) => { e.preventDefault(); onFilter(); });
  $("more").onclick = more;
  document.addEventListener("keydown", onKey);
  refresh();
  return { kind: "list", stop() {
    stopped = true;
    if (controller) controller.abort();
    form.removeEventListener("input", onFilter);
    document.removeEventListener("keydown", onKey);
  } };
}

// --- one run, live -----------------------------------------------------------------------------

class RunView {
  constructor(runId) {
    this.runId = runId;
    this.lastSeq = -1;
    this.finished = false;
    this.stopped = false;
    this.call = 0;
    this.blocks = new Map(); // text/reasoning blocks by call:kind:output:part
    this.tools = new Map(); // tool cards by tool_call_id
    this.hosted = new Map(); // hosted tool cards by call_id
    this.approvals = new Map(); // approval cards by approval_id
    this.citationCount = 0;
    this.controller = new AbortController();
    this.stateTimer = null;
    this.transcript = $("transcript");
    this.transcript.replaceChildren();
    $("event-log").replaceChildren();
    $("terminal").hidden = true;
    $("waiting").hidden = true;
    $("run-flag").hidden = true;
    $("run-id").textContent = runId;
    $("run-status").className = "badge";
    $("run-status").textContent = "…";
    for (const id of ["run-provider", "run-tenant", "run-usage"]) $(id).textContent = "…";
    this.onKey = (event) => {
      if (event.key === "Escape" && !$("raw-dialog").open && !event.target.matches("input, textarea")) {
        location.hash = "#/";
      }
    };
    document.addEventListener("keydown", this.onKey);
  }

  stop() {
    this.stopped = true;
    if (this.leave) this.leave();
    this.controller.abort();
    clearTimeout(this.stateTimer);
    document.removeEventListener("keydown", this.onKey);
  }

  async start() {
    this.loadState();
    const shared = sharedStreams();
    if (shared) {
      this.leave = shared.follow(this.runId, this.lastSeq, (message) => this.onShared(message));
      return;
    }
    let waitMs = 0; // the pause before asking again for a run the gateway does not know yet
    while (!this.stopped) {
      const headers = {};
      if (this.lastSeq >= 0) headers["Last-Event-ID"] = String(this.lastSeq);
      let response;
      try {
        response = await api(`/v1/runs/${encodeURIComponent(this.runId)}/events`,
          { headers, signal: this.controller.signal });
      } catch (error) {
        if (this.stopped) return;
        $("stream-status").textContent = "Connection lost; reconnecting…";
        await sleep(1000);
        continue;
      }
      if (response.status === 204) { this.streamEnded(); return; }
      if (!response.ok) {
        let message = response.statusText;
        try { message = (await response.json()).error || message; } catch (e) { /* not JSON */ }
        if (response.status === 404) {
          waitMs = nextRunWait(waitMs);
          this.waitForRun(response.status, message, waitMs);
          await sleep(waitMs);
          continue;
        }
        $("stream-status").textContent = `Events: ${response.status} ${message}`;
        if (response.status === 401 || response.status === 403) return;
        await sleep(2000);
        continue;
      }
      waitMs = 0;
      this.runAppeared();
      $("stream-status").textContent = this.finished ? "" : "Live: following the run's events.";
      try {
        await readSse(response.body.getReader(), ({ id, kind, data }) => {
          if (id !== null && data) this.onEvent(Number(id), kind, data);
        });
      } catch (error) {
        if (this.stopped) return;
      }
      if (this.finished) { this.streamEnded(); return; }
      // Cut before run.finished (a gateway restart, a slow reader ended): resume after lastSeq.
      $("stream-status").textContent = "Stream cut; resuming after event " + this.lastSeq + "…";
      await sleep(300);
    }
  }

  // What the tabs' shared stream (stream-worker.js) says about this run.
  onShared(message) {
    if (this.stopped) return;
    if (message.type === "event") this.onEvent(message.seq, message.kind, message.data);
    else if (message.type === "waiting") this.waitForRun(message.status, message.error, message.waitMs);
    else if (message.type === "end") {
      if (message.reason === "finished") this.streamEnded();
      else $("stream-status").textContent = `Events: ${message.status} ${message.error}`;
    } else if (message.type === "status") {
      if (message.text === "live") this.runAppeared();
      $("stream-status").textContent = message.text === "live"
        ? (this.finished ? "" : "Live: following the run's events.") : message.text;
    } else if (message.type === "refused") $("stream-status").textContent = message.text;
  }

  // The gateway does not know the run (404): a link opened before the run's first event reached
  // it, or a run this token may not see (the same answer). Said until it is there.
  waitForRun(status, error, waitMs) {
    if (this.stopped) return;
    const box = $("waiting");
    box.hidden = false;
    box.dataset.reason = "run";
    box.textContent = `Waiting for run ${this.runId}: the gateway does not know it yet (or this ` +
      "token may not see it). It is shown live as soon as it appears.";
    $("stream-status").textContent = `Events: ${status} ${error} — asking again in ${waitMs / 1000} s.`;
  }

  // The run is there (its stream answered, or an event came): no longer waited for.
  runAppeared() {
    if ($("waiting").dataset.reason !== "run") return;
    this.setWaiting(null);
    this.loadState();
  }

  streamEnded() {
    $("stream-status").textContent = "The run ended; every event is shown.";
    this.loadState();
  }

  onEvent(seq, kind, data) {
    if (seq <= this.lastSeq) return; // seen before a resume
    this.runAppeared();
    this.lastSeq = seq;
    const event = JSON.parse(data);
    this.apply(kind, event);
    this.logEvent(seq, kind);
    document.dispatchEvent(new CustomEvent("modelevents:rendered", { detail: { run_id: this.runId, seq, kind } }));
  }

  // --- applying one event ------------------------------------------------------------------

  apply(kind, e) {
    const handler = HANDLERS[kind];
    if (handler) handler.call(this, e, kind);
    else this.item("unknown", e.seq, `event ${kind}`);
    if (kind === "run.finished" || kind === "run.awaiting" || kind === "usage" || kind.startsWith("approval.")) {
      this.scheduleState();
    }
  }

  item(cls, seq, what, ...children) {
    const raw = el("button", { type: "button", class: "raw", text: "raw",
      "aria-label": `raw provider frame of event ${seq}`, dataset: { seq: String(seq) },
      onclick: (ev) => openRaw(this.runId, Number(ev.currentTarget.dataset.seq)) });
    const node = el("article", { class: `item ${cls}` },
      el("header", {}, el("span", { class: "what", text: what }), el("span", { class: "seq", text: `#${seq}` }), raw),
      ...children);
    node.rawButton = raw;
    this.transcript.append(node);
    return node;
  }

  touch(node, seq) {
    node.rawButton.dataset.seq = String(seq);
    node.querySelector(".seq").textContent = `#${seq}`;
  }

  block(kind, e) {
    const key = `${this.call}:${kind}:${e.output_index}:${e.part_index}`;
    let block = this.blocks.get(key);
    if (!block) {
      const body = el("div", { class: "body" });
      block = { key, text: "", body, tail: document.createTextNode(""), citations: [], done: false };
      body.append(block.tail);
      if (kind === "text") {
        block.state = el("span", { class: "state", text: "streaming" });
        block.node = this.item("text streaming", e.seq, "Text", body);
        block.node.querySelector("header").append(block.state);
      } else {
        const details = el("details", {}, el("summary", { text: `Reasoning (${e.form || "summary"})` }), body);
        block.node = this.item("reasoning", e.seq, "Reasoning", details);
      }
      this.blocks.set(key, block);
    }
    this.touch(block.node, e.seq);
    return block;
  }

  blockDelta(kind, e) {
    const block = this.block(kind, e);
    block.text += e.text;
    block.tail.appendData(e.text);
    return block;
  }

  blockDone(kind, e) {
    // The done event's whole value wins over the deltas (unless it refers to them: elided).
    const block = this.block(kind, e);
    if (!e.elided && e.text && e.text !== block.text) {
      block.text = e.text;
      if (block.citations.length) this.renderCited(block);
      else { block.tail = document.createTextNode(e.text); block.body.replaceChildren(block.tail); }
    }
    block.done = true;
    return block;
  }

  textOf(outputIndex, partIndex) {
    // The text block a citation refers to: the same output item (and part, when named).
    let found = null;
    for (const block of this.blocks.values()) {
      const [call, kind, output, part] = block.key.split(":");
      if (Number(call) === this.call && kind === "text" && Number(output) === outputIndex &&
          (partIndex === null || partIndex === undefined || Number(part) === partIndex)) found = block;
    }
    return found;
  }

  renderCited(block) {
    // The block's text with each cited span marked and linked to its source below.
    const chars = Array.from(block.text);
    const spans = block.citations.filter((c) => c.start !== null && c.end !== null && c.end > c.start)
      .sort((a, b) => a.start - b.start);
    const parts = [];
    let at = 0;
    for (const c of spans) {
      if (c.start < at) continue; // overlapping spans: the first one is marked
      parts.push(chars.slice(at, c.start).join(""));
      parts.push(el("mark", { id: `span-${c.number}`, tabindex: "0", "aria-describedby": `cite-${c.number}`,
        title: c.title || c.url || "" }, chars.slice(c.start, c.end).join("")));
      parts.push(el("button", { type: "button", class: "cite-ref", "aria-label": `source ${c.number}`,
        onclick: () => focusCitation(c.number) }, `[${c.number}]`));
      at = c.end;
    }
    parts.push(chars.slice(at).join(""));
    block.tail = document.createTextNode("");
    block.body.replaceChildren(...parts, block.tail);
  }

  logEvent(seq, kind) {
    const log = $("event-log");
    log.append(el("li", { value: String(seq) }, kind,
      el("button", { type: "button", text: "raw", "aria-label": `raw provider frame of event ${seq}`,
        onclick: () => openRaw(this.runId, seq) })));
    while (log.childElementCount > EVENT_LOG_ROWS) log.firstElementChild.remove();
  }

  setStatus(status) {
    const node = $("run-status");
    node.className = `badge s-${status}`;
    node.textContent = status.replaceAll("_", " ");
    node.dataset.status = status;
  }

  setWaiting(reason, raw) {
    const box = $("waiting");
    if (!reason) { box.hidden = true; box.textContent = ""; delete box.dataset.reason; return; }
    box.hidden = false;
    box.dataset.reason = reason;
    box.textContent = (WAITING_TEXT[reason] || `Waiting: ${reason}`) + (raw ? ` (provider: ${raw})` : "");
  }

  pendingApprovals() {
    return [...this.approvals.values()].filter((a) => !a.resolved).length;
  }

  scheduleState() {
    clearTimeout(this.stateTimer);
    this.stateTimer = setTimeout(() => this.loadState(), 300);
  }

  async loadState() {
    let body;
    try { body = await apiJson(`/v1/runs/${encodeURIComponent(this.runId)}`); } catch (error) {
      // A 404: the events' side waits for the run and says so (waitForRun).
      if (error.status !== 404 && !this.stopped) $("stream-status").textContent = `Run: ${error.message}`;
      return;
    }
    const state = body.state;
    if (!state || this.stopped) return;
    $("run-provider").textContent = [state.provider, state.api, state.model].filter(Boolean).join(" / ") || "—";
    $("run-tenant").textContent = state.tenant;
    const u = state.usage;
    $("run-usage").textContent = u ? `in ${n(u.input_tokens)} · out ${n(u.output_tokens)} · cache read ${n(u.cache_read_tokens)}` +
      ` · cache write ${n(u.cache_write_tokens)} · reasoning ${n(u.reasoning_tokens)} · total ${n(u.total_tokens)}` : "—";
    const flag = $("run-flag");
    flag.hidden = !state.needs_reconciliation;
    flag.textContent = state.needs_reconciliation
      ? "Needs reconciliation: " + ((state.reconciliation_notes || []).join("; ") || "see the events") : "";
    if (!this.finished || ["completed", "incomplete", "failed", "cancelled"].includes(state.status)) {
      // The events are the live truth; the state on `runs` may lag them by a moment.
      if (state.last_seq >= this.lastSeq) this.setStatus(state.status);
    }
  }
}

const HANDLERS = {
  "run.started"(e) {
    this.call += 1;
    if (this.call > 1) {
      this.item("call-divider", e.seq, `Provider call ${this.call}` + (e.provider_object_id ? ` (${e.provider_object_id})` : ""));
    }
    this.setStatus("in_progress");
    if (!this.pendingApprovals()) this.setWaiting(null);
    $("run-provider").textContent = [e.provider, e.api, e.model].filter(Boolean).join(" / ");
  },
  "run.status"(e) { /* provider statuses: shown in the event log */ },
  "run.awaiting"(e) {
    this.setStatus(e.reason === "approval" ? "waiting_for_approval" : "waiting_for_tool");
    this.setWaiting(this.pendingApprovals() ? "approval" : e.reason, e.raw_reason);
  },
  "run.finished"(e) {
    this.finished = true;
    this.setStatus(e.status);
    this.setWaiting(null);
    for (const block of this.blocks.values()) {
      if (!block.done && block.state) block.state.textContent = "ended without text.done";
    }
    const box = $("terminal");
    box.hidden = false;
    box.className = `terminal s-${e.status}`;
    box.dataset.status = e.status;
    box.replaceChildren(`Run ${e.status}: ${e.reason}`, e.raw_reason ? ` (provider: ${e.raw_reason})` : "");
  },
  "message.started"() {},
  "message.finished"() {},
  "text.delta"(e) { this.blockDelta("text", e); },
  "text.done"(e) {
    const block = this.blockDone("text", e);
    block.node.classList.remove("streaming");
    block.node.classList.add("done");
    block.state.textContent = "";
  },
  "reasoning.delta"(e) { this.blockDelta("reasoning", e); },
  "reasoning.done"(e) { this.blockDone("reasoning", e); },
  "tool.call.started"(e) { toolCard(this, e); },
  "tool.call.delta"(e) {
    const card = toolCard(this, e);
    card.args.textContent += e.arguments;
  },
  "tool.call"(e) {
    const card = toolCard(this, e);
    card.args.textContent = prettyJson(e.arguments);
    card.valid.textContent = e.arguments_valid === false ? "arguments are not valid JSON" : "";
    card.node.dataset.complete = "true";
  },
  "tool.result"(e) {
    const card = toolCard(this, { seq: e.seq, tool_name: e.tool_name, tool_call_id: e.tool_call_id });
    const result = el("div", { class: "result" + (e.is_error ? " is-error" : "") },
      el("span", { class: "label", text: e.is_error ? "Result (error)" : "Result" }),
      el("pre", { text: e.output }));
    const receipt = el("div", { class: "receipt muted" });
    card.results.append(result, receipt);
    card.node.dataset.result = e.is_error ? "error" : "ok";
    // The executor's receipt summary travels in the result's frame (operation id, outcome).
    fetchFrame(this.runId, e.seq).then((frame) => {
      if (!frame) return;
      try {
        const doc = JSON.parse(frame.envelope.body);
        const bits = ["operation_id", "outcome", "error_class", "reconciled", "repeated"]
          .filter((k) => doc[k] !== undefined).map((k) => `${k.replaceAll("_", " ")}: ${doc[k]}`);
        if (bits.length) receipt.textContent = "Receipt — " + bits.join(" · ");
      } catch (err) { /* a provider's own frame: no receipt */ }
    });
  },
  "hosted.call"(e) { hostedCard(this, e); },
  "hosted.result"(e) { hostedCard(this, e); },
  citation(e) {
    this.citationCount += 1;
    const number = this.citationCount;
    const c = Object.assign({ number }, e);
    const block = this.textOf(e.output_index, e.part_index);
    const source = e.url ? linkOrText(e.url, e.title || e.url) : el("span", {}, e.title || e.file_id || e.source_type);
    const li = el("li", { id: `cite-${number}`, value: String(number) }, source,
      e.cited_text ? el("span", { class: "muted" }, ` — “${e.cited_text}”`) : null);
    markTrust(li, e.trust);
    if (block) {
      if ((c.start === null || c.start === undefined) && e.cited_text) {
        const at = Array.from(block.text).join("").indexOf(e.cited_text);
        if (at >= 0) { c.start = Array.from(block.text.slice(0, at)).length; c.end = c.start + Array.from(e.cited_text).length; }
      }
      block.citations.push(c);
      if (!block.list) { block.list = el("ol", { class: "citations", "aria-label": "Sources" }); block.node.append(block.list); }
      block.list.append(li);
      this.renderCited(block);
    } else {
      this.item("citation", e.seq, "Citation", el("ol", { class: "citations" }, li));
    }
  },
  refusal(e) {
    this.item("refusal", e.seq, "Refused by the model",
      el("p", { text: e.text }), e.category ? el("p", { class: "label", text: `category: ${e.category}` }) : null,
      e.explanation ? el("p", { text: e.explanation }) : null);
  },
  error(e) {
    this.item("error", e.seq, `Error: ${e.error_type}`, el("p", { text: e.message }),
      el("p", { class: "label", text: [e.code && `code ${e.code}`, e.http_status && `HTTP ${e.http_status}`,
        e.retryable ? "retryable" : "not retryable"].filter(Boolean).join(" · ") }));
  },
  "approval.requested"(e) { approvalCard(this, e); },
  "approval.resolved"(e) {
    const card = approvalCard(this, e);
    card.resolved = true;
    card.node.dataset.decision = e.decision || "";
    card.actions.replaceChildren(el("p", { class: "decision", text: `${e.decision || "decided"} by ${e.decider || "someone"}` }));
    if (!this.pendingApprovals() && $("waiting").dataset.reason === "approval") this.setWaiting(null);
  },
  usage() { /* a snapshot of one provider call: the run's totals come with its state */ },
  "media.done"(e) {
    const body = e.data && /^image\/[\w.+-]+$/.test(e.mime_type)
      ? el("img", { class: "media", src: `data:${e.mime_type};base64,${e.data}`, alt: `${e.mime_type} from the model` })
      : el("p", {}, e.uri ? linkOrText(e.uri, e.uri) : e.mime_type);
    this.item("media", e.seq, `Media (${e.mime_type})`, body);
  },
  "structured.done"(e) {
    this.item("structured", e.seq, `Structured output${e.schema_name ? ` (${e.schema_name})` : ""}`,
      el("pre", { text: prettyJson(e.json) }), e.valid ? null : el("p", { class: "label", text: `invalid: ${e.error || ""}` }));
  },
  unknown(e) {
    this.item("unknown", e.seq, `Unknown provider event: ${e.provider_type}`, e.detail ? el("pre", { text: e.detail }) : null);
  },
  "policy.violation"(e) {
    this.item("violation", e.seq, `Policy violation: ${e.violation.replaceAll("_", " ")}`, el("p", { text: e.note }),
      el("p", { class: "label", text: [e.call_id && `hosted call ${e.call_id}`, e.source && `source ${e.source}`].filter(Boolean).join(" · ") }));
    this.scheduleState(); // the run is flagged needs_reconciliation
  },
};

function toolCard(view, e) {
  let card = view.tools.get(e.tool_call_id);
  if (!card) {
    const args = el("pre", { class: "args" });
    const valid = el("span", { class: "label" });
    const results = el("div", { class: "results" });
    const node = view.item("tool", e.seq, `Tool call: ${e.tool_name}`,
      el("span", { class: "label" }, "id ", el("code", { text: e.tool_call_id })),
      el("span", { class: "label", text: "Arguments" }), args, valid, results);
    node.dataset.toolCallId = e.tool_call_id;
    card = { node, args, valid, results };
    view.tools.set(e.tool_call_id, card);
  }
  view.touch(card.node, e.seq);
  return card;
}

function hostedCard(view, e) {
  let card = view.hosted.get(e.call_id);
  if (!card) {
    const status = el("span", { class: "label" });
    const args = el("pre", { class: "args" });
    const evidence = el("div", { class: "evidence" });
    const node = view.item("hosted", e.seq, `Hosted tool: ${e.tool_type}${e.name ? ` (${e.name})` : ""} — run by ${e.authority}`,
      status, el("span", { class: "label", text: "Input" }), args, evidence);
    card = { node, status, args, evidence };
    view.hosted.set(e.call_id, card);
  }
  view.touch(card.node, e.seq);
  card.status.textContent = [e.status && `status: ${e.status}`, e.billable_unit && `billed per ${e.billable_unit}`,
    e.quantity !== null && e.quantity !== undefined && `× ${e.quantity}`, e.is_error && "error"].filter(Boolean).join(" · ");
  if (e.arguments) card.args.textContent = prettyJson(e.arguments);
  if (e.evidence) {
    let links = [];
    try { links = collectUrls(JSON.parse(e.evidence)); } catch (err) { links = []; }
    card.evidence.replaceChildren(el("span", { class: "label", text: "Evidence" }),
      links.length ? el("ul", {}, ...links.slice(0, 20).map((u) => el("li", {}, linkOrText(u, u)))) : null,
      el("details", {}, el("summary", { text: "all of it" }), el("pre", { text: prettyJson(e.evidence) })));
  }
  markEvidenceTrust(card, e);
  return card;
}

// The worker's verdicts from the tenant's policy (docs/hosted-tools.md): a blocked source is
// struck out, an untrusted one marked; unknown (no policy names it) is left as it is.
function markTrust(node, trust) {
  if (!trust || trust === "unknown" || node.dataset.trust === trust) return;
  node.dataset.trust = trust;
  node.querySelector(":scope > .trust")?.remove();
  node.append(el("span", { class: `tag trust ${trust}`, text: trust }));
}

function markEvidenceTrust(card, e) {
  const verdicts = e.source_trust || {};
  card.evidence.querySelectorAll(":scope > ul > li").forEach((li) => markTrust(li, verdicts[li.firstElementChild?.textContent]));
  if (e.trust && e.trust !== "unknown") card.node.dataset.trust = e.trust;
}

function collectUrls(value, out = []) {
  if (typeof value === "string") { if (safeUrl(value) && !out.includes(value)) out.push(value); }
  else if (Array.isArray(value)) value.forEach((v) => collectUrls(v, out));
  else if (value && typeof value === "object") Object.values(value).forEach((v) => collectUrls(v, out));
  return out;
}

function approvalCard(view, e) {
  let card = view.approvals.get(e.approval_id);
  if (!card) {
    const reason = el("input", { type: "text", "aria-label": "reason for the decision", placeholder: "reason (optional)" });
    const note = el("span", { class: "muted", "aria-live": "polite" });
    const decide = async (granted) => {
      note.textContent = "sending…";
      try {
        await apiJson(`/v1/runs/${encodeURIComponent(view.runId)}/approvals/${encodeURIComponent(e.approval_id)}`, {
          method: "POST", headers: { "content-type": "application/json" },
          body: JSON.stringify({ granted, reason: reason.value }) });
        note.textContent = `${granted ? "granted" : "denied"}: sent, waiting for approval.resolved…`;
      } catch (error) { note.textContent = `not sent: ${error.message}`; }
    };
    const actions = el("div", { class: "actions" }, reason,
      el("button", { type: "button", class: "grant", onclick: () => decide(true) }, "Grant"),
      el("button", { type: "button", class: "deny", onclick: () => decide(false) }, "Deny"), note);
    const node = view.item("approval", e.seq, `Approval${e.tool_name ? ` for ${e.tool_name}` : ""}`,
      el("span", { class: "label" }, "id ", el("code", { text: e.approval_id })),
      e.arguments ? el("pre", { text: prettyJson(e.arguments) }) : null, actions);
    node.dataset.approvalId = e.approval_id;
    card = { node, actions, resolved: false };
    view.approvals.set(e.approval_id, card);
    if (e.kind === "approval.requested") view.setWaiting("approval");
  }
  view.touch(card.node, e.seq);
  return card;
}

function focusCitation(number) {
  document.querySelectorAll("ol.citations li.active, mark.active").forEach((x) => x.classList.remove("active"));
  const li = $(`cite-${number}`);
  const span = $(`span-${number}`);
  if (span) span.classList.add("active");
  if (li) { li.classList.add("active"); li.scrollIntoView({ block: "nearest" }); }
}

const frames = new Map(); // seq → frame, of the run shown (a few: fetched on demand)
async function fetchFrame(runId, seq) {
  const key = `${runId}\u0000${seq}`;
  if (frames.has(key)) return frames.get(key);
  try {
    const frame = await apiJson(`/v1/runs/${encodeURIComponent(runId)}/events/${seq}`);
    if (frames.size > 100) frames.delete(frames.keys().next().value);
    frames.set(key, frame);
    return frame;
  } catch (error) { return null; }
}

async function openRaw(runId, seq) {
  const dialog = $("raw-dialog");
  $("raw-title").textContent = `Raw frame of event ${seq}`;
  $("raw-meta").textContent = "loading…";
  $("raw-body").textContent = "";
  if (!dialog.open) dialog.showModal();
  const frame = await fetchFrame(runId, seq);
  if (!frame) { $("raw-meta").textContent = "could not read the event"; return; }
  $("raw-meta").textContent = `${frame.event.kind} · ${frame.envelope.content_type} · ${frame.envelope.size} bytes · ` +
    `${frame.event.transport} · adapter ${frame.adapter}`;
  $("raw-body").textContent = frame.envelope.encoding === "utf-8" ? frame.envelope.body : `(base64) ${frame.envelope.body}`;
  $("raw-body").focus();
}

// --- one connection for the run views of all tabs ----------------------------------------------

// The tabs of this browser share one stream of their runs' events through a SharedWorker
// (stream-worker.js): a browser keeps at most 6 HTTP/1.1 connections to one host, and a stream
// per open run view would hold one each. Without SharedWorker, each run view reads its own.
let shared = null;
function sharedStreams() {
  if (shared) return shared;
  if (!window.SharedWorker) return null;
  // One worker per token: what it reads is what that token may see.
  let tag = 0;
  for (const c of token) tag = (tag * 31 + c.charCodeAt(0)) >>> 0;
  const worker = new SharedWorker("/ui/stream-worker.js", { name: `modelevents-streams-${tag}` });
  const tabId = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
  const listeners = new Map(); // run id → the run view's handler
  worker.port.onmessage = ({ data: message }) => {
    const listener = listeners.get(message.runId);
    if (listener) listener(message);
  };
  worker.port.start();
  // Held while this tab is open (the worker learns of a tab that closed without saying so).
  const ready = new Promise((resolve) => {
    if (!navigator.locks) { resolve(); return; }
    navigator.locks.request(`modelevents-tab-${tabId}`, () => { resolve(); return new Promise(() => {}); });
  }).then(() => worker.port.postMessage({ type: "hello", tabId, token }));
  const send = (message) => ready.then(() => worker.port.postMessage(message));
  window.addEventListener("pagehide", () => worker.port.postMessage({ type: "bye" }));
  shared = {
    follow(runId, after, listener) {
      listeners.set(runId, listener);
      send({ type: "follow", runId, after });
      return () => { listeners.delete(runId); send({ type: "leave", runId }); };
    },
    close() { send({ type: "bye" }); },
  };
  return shared;
}

// --- routing -----------------------------------------------------------------------------------

function route() {
  if (current) current.stop();
  const match = location.hash.match(/^#\/runs\/([^?]+)/);
  if (match) {
    $("list-view").hidden = true;
    $("run-view").hidden = false;
    const runId = decodeURIComponent(match[1]);
    document.title = `modelevents — ${runId}`;
    const view = new RunView(runId);
    current = view;
    view.start();
    $("main").focus({ preventScroll: true });
  } else {
    current = showList();
  }
}

function init() {
  $("token").value = token;
  $("whoami").textContent = token ? "token set" : "";
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    token = $("token").value.trim();
    if (token) sessionStorage.setItem(TOKEN_KEY, token); else sessionStorage.removeItem(TOKEN_KEY);
    if (current) current.stop();
    current = null;
    if (shared) { shared.close(); shared = null; } // the next one reads as the new token
    $("whoami").textContent = token ? "token set" : "no token";
    route();
  });
  window.addEventListener("hashchange", (event) => {
    // A filter change rewrites the list's hash without leaving it.
    const wasList = !/#\/runs\//.test(new URL(event.oldURL).hash);
    const isList = !/^#\/runs\//.test(location.hash);
    if (wasList && isList && current && current.kind === "list") return;
    route();
  });
  route();
}

init();
