// @ts-check
// modelevents UI: one run live (#/runs/<id>): its events applied as they come, from the tabs'
// shared stream (shared.js) or, without SharedWorker, its own GET /v1/runs/{id}/events resumed
// with Last-Event-ID; its state from GET /v1/runs/{id}.
import { ApiError, api, apiJson, refusalText } from "../api.js";
import { $, el, sleep } from "../dom.js";
import { fmtTarget, fmtUsage, prettyJson } from "../format.js";
import { linkOrText } from "../links.js";
import { nextRunWait } from "../run-wait.js";
import { sharedStreams } from "../shared.js";
import { readSse } from "../sse.js";
import {
  SeqCursor, awaitingStatus, blockKey, citedSegments, citesBlock, locateCited, receiptSummary,
  stateShowsStatus,
} from "../state.js";
import { approvalCard, hostedCard, markTrust, toolCard } from "./cards.js";
import { fetchFrame, openRaw } from "./raw.js";

const EVENT_LOG_ROWS = 200;
/** @type {Record<string, string>} */
const WAITING_TEXT = {
  tool_results: "Waiting for tool results: the model asked for a tool the application runs.",
  approval: "Waiting for an approval: a tool call needs a person's decision (below).",
  continuation: "Paused by the provider: waiting for the continuation call.",
};

/**
 * @typedef {import("./cards.js").ItemNode} ItemNode
 * @typedef {import("./cards.js").Payload} Payload
 * @typedef {import("../state.js").Cited} Cited
 * @typedef {{key: string, text: string, body: HTMLElement, tail: Text, citations: Cited[], done: boolean,
 *   node: ItemNode, state?: HTMLElement, list?: HTMLElement}} Block
 */

export class RunView {
  /** @param {string} runId */
  constructor(runId) {
    this.kind = "run";
    this.runId = runId;
    this.seen = new SeqCursor();
    this.finished = false;
    this.stopped = false;
    this.call = 0;
    /** @type {Map<string, Block>} text/reasoning blocks by call:kind:output:part */
    this.blocks = new Map();
    /** @type {Map<string, import("./cards.js").ToolCard>} by tool_call_id */
    this.tools = new Map();
    /** @type {Map<string, import("./cards.js").HostedCard>} by call_id */
    this.hosted = new Map();
    /** @type {Map<string, import("./cards.js").ApprovalCard>} by approval_id */
    this.approvals = new Map();
    this.citationCount = 0;
    this.controller = new AbortController();
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.stateTimer = undefined;
    /** @type {(() => void) | null} */
    this.leave = null;
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
    /** @param {KeyboardEvent} event */
    this.onKey = (event) => {
      const dialog = /** @type {HTMLDialogElement} */ ($("raw-dialog"));
      if (event.key === "Escape" && !dialog.open && !(/** @type {HTMLElement} */ (event.target)).matches("input, textarea")) {
        location.hash = "#/";
      }
    };
    document.addEventListener("keydown", this.onKey);
  }

  get lastSeq() {
    return this.seen.lastSeq;
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
      /** @type {Record<string, string>} */
      const headers = {};
      if (this.lastSeq >= 0) headers["Last-Event-ID"] = String(this.lastSeq);
      let response;
      try {
        response = await api(`/v1/runs/${encodeURIComponent(this.runId)}/events`,
          { headers, signal: this.controller.signal });
      } catch {
        if (this.stopped) return;
        $("stream-status").textContent = "Connection lost; reconnecting…";
        await sleep(1000);
        continue;
      }
      if (response.status === 204) { this.streamEnded(); return; }
      if (!response.ok || !response.body) {
        const message = await refusalText(response);
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
      } catch {
        if (this.stopped) return;
      }
      if (this.finished) { this.streamEnded(); return; }
      // Cut before run.finished (a gateway restart, a slow reader ended): resume after lastSeq.
      $("stream-status").textContent = "Stream cut; resuming after event " + this.lastSeq + "…";
      await sleep(300);
    }
  }

  /** What the tabs' shared stream (stream-worker.js) says about this run. @param {import("../shared.js").StreamMessage} message */
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

  /**
   * The gateway does not know the run (404): a link opened before the run's first event reached
   * it, or a run this token may not see (the same answer). Said until it is there.
   * @param {number} status @param {string} error @param {number} waitMs
   */
  waitForRun(status, error, waitMs) {
    if (this.stopped) return;
    const box = $("waiting");
    box.hidden = false;
    box.dataset.reason = "run";
    box.textContent = `Waiting for run ${this.runId}: the gateway does not know it yet (or this ` +
      "token may not see it). It is shown live as soon as it appears.";
    $("stream-status").textContent = `Events: ${status} ${error} — asking again in ${waitMs / 1000} s.`;
  }

  /** The run is there (its stream answered, or an event came): no longer waited for. */
  runAppeared() {
    if ($("waiting").dataset.reason !== "run") return;
    this.setWaiting(null);
    this.loadState();
  }

  streamEnded() {
    $("stream-status").textContent = "The run ended; every event is shown.";
    this.loadState();
  }

  /** @param {number} seq @param {string} kind @param {string} data */
  onEvent(seq, kind, data) {
    if (!this.seen.accept(seq)) return; // seen before a resume
    this.runAppeared();
    const event = JSON.parse(data);
    this.apply(kind, event);
    this.logEvent(seq, kind);
    document.dispatchEvent(new CustomEvent("modelevents:rendered", { detail: { run_id: this.runId, seq, kind } }));
  }

  // --- applying one event ------------------------------------------------------------------

  /** @param {string} kind @param {Payload} e */
  apply(kind, e) {
    const handler = HANDLERS[kind];
    if (handler) handler.call(this, e);
    else this.item("unknown", e.seq, `event ${kind}`);
    if (kind === "run.finished" || kind === "run.awaiting" || kind === "usage" || kind.startsWith("approval.")) {
      this.scheduleState();
    }
  }

  /**
   * A transcript item: its header (what, #seq, a raw button) and its children.
   * @param {string} cls @param {number} seq @param {string} what
   * @param {...(Node | string | null | undefined)} children
   * @returns {ItemNode}
   */
  item(cls, seq, what, ...children) {
    const raw = el("button", { type: "button", class: "raw", text: "raw",
      "aria-label": `raw provider frame of event ${seq}`, dataset: { seq: String(seq) },
      onclick: (/** @type {MouseEvent} */ ev) =>
        openRaw(this.runId, Number((/** @type {HTMLElement} */ (ev.currentTarget)).dataset.seq)) });
    /** @type {ItemNode} */
    const node = el("article", { class: `item ${cls}` },
      el("header", {}, el("span", { class: "what", text: what }), el("span", { class: "seq", text: `#${seq}` }), raw),
      ...children);
    node.rawButton = raw;
    this.transcript.append(node);
    return node;
  }

  /** An item's latest event: its raw button and #seq. @param {ItemNode} node @param {number} seq */
  touch(node, seq) {
    if (node.rawButton) node.rawButton.dataset.seq = String(seq);
    const label = node.querySelector(".seq");
    if (label) label.textContent = `#${seq}`;
  }

  /** @param {string} kind @param {Payload} e @returns {Block} */
  block(kind, e) {
    const key = blockKey(this.call, kind, /** @type {any} */ (e));
    let block = this.blocks.get(key);
    if (!block) {
      const body = el("div", { class: "body" });
      const tail = document.createTextNode("");
      body.append(tail);
      /** @type {HTMLElement | undefined} */
      let state;
      let node;
      if (kind === "text") {
        state = el("span", { class: "state", text: "streaming" });
        node = this.item("text streaming", e.seq, "Text", body);
        node.querySelector("header")?.append(state);
      } else {
        const details = el("details", {}, el("summary", { text: `Reasoning (${e.form || "summary"})` }), body);
        node = this.item("reasoning", e.seq, "Reasoning", details);
      }
      block = { key, text: "", body, tail, citations: [], done: false, node, state };
      this.blocks.set(key, block);
    }
    this.touch(block.node, e.seq);
    return block;
  }

  /** @param {string} kind @param {Payload} e */
  blockDelta(kind, e) {
    const block = this.block(kind, e);
    block.text += e.text;
    block.tail.appendData(e.text);
    return block;
  }

  /** @param {string} kind @param {Payload} e */
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

  /**
   * The text block a citation refers to: the same output item (and part, when named).
   * @param {number} outputIndex @param {number | null | undefined} partIndex
   */
  textOf(outputIndex, partIndex) {
    let found = null;
    for (const block of this.blocks.values()) {
      if (citesBlock(block.key, this.call, outputIndex, partIndex)) found = block;
    }
    return found;
  }

  /** The block's text with each cited span marked and linked to its source below. @param {Block} block */
  renderCited(block) {
    /** @type {(Node | string)[]} */
    const parts = [];
    for (const { text, citation: c } of citedSegments(block.text, block.citations)) {
      if (!c) { parts.push(text); continue; }
      parts.push(el("mark", { id: `span-${c.number}`, tabindex: "0", "aria-describedby": `cite-${c.number}`,
        title: c.title || c.url || "" }, text));
      parts.push(el("button", { type: "button", class: "cite-ref", "aria-label": `source ${c.number}`,
        onclick: () => focusCitation(c.number) }, `[${c.number}]`));
    }
    block.tail = document.createTextNode("");
    block.body.replaceChildren(...parts, block.tail);
  }

  /** @param {number} seq @param {string} kind */
  logEvent(seq, kind) {
    const log = $("event-log");
    log.append(el("li", { value: String(seq) }, kind,
      el("button", { type: "button", text: "raw", "aria-label": `raw provider frame of event ${seq}`,
        onclick: () => openRaw(this.runId, seq) })));
    while (log.childElementCount > EVENT_LOG_ROWS) log.firstElementChild?.remove();
  }

  /** @param {string} status */
  setStatus(status) {
    const node = $("run-status");
    node.className = `badge s-${status}`;
    node.textContent = status.replaceAll("_", " ");
    node.dataset.status = status;
  }

  /** @param {string | null} reason @param {string | null} [raw] */
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
      const status = error instanceof ApiError ? error.status : null;
      if (status !== 404 && !this.stopped) $("stream-status").textContent = `Run: ${/** @type {Error} */ (error).message}`;
      return;
    }
    const state = body.state;
    if (!state || this.stopped) return;
    $("run-provider").textContent = fmtTarget(state) || "—";
    $("run-tenant").textContent = state.tenant;
    $("run-usage").textContent = fmtUsage(state.usage);
    const flag = $("run-flag");
    flag.hidden = !state.needs_reconciliation;
    flag.textContent = state.needs_reconciliation
      ? "Needs reconciliation: " + ((state.reconciliation_notes || []).join("; ") || "see the events") : "";
    if (stateShowsStatus(state, this)) this.setStatus(state.status);
  }
}

/** @param {number} number */
function focusCitation(number) {
  document.querySelectorAll("ol.citations li.active, mark.active").forEach((x) => x.classList.remove("active"));
  const li = document.getElementById(`cite-${number}`);
  const span = document.getElementById(`span-${number}`);
  if (span) span.classList.add("active");
  if (li) { li.classList.add("active"); li.scrollIntoView({ block: "nearest" }); }
}

/** @type {Record<string, (this: RunView, e: Payload) => void>} */
const HANDLERS = {
  "run.started"(e) {
    this.call += 1;
    if (this.call > 1) {
      this.item("call-divider", e.seq, `Provider call ${this.call}` + (e.provider_object_id ? ` (${e.provider_object_id})` : ""));
    }
    this.setStatus("in_progress");
    if (!this.pendingApprovals()) this.setWaiting(null);
    $("run-provider").textContent = fmtTarget(e);
  },
  "run.status"() { /* provider statuses: shown in the event log */ },
  "run.awaiting"(e) {
    this.setStatus(awaitingStatus(e.reason));
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
    if (block.state) block.state.textContent = "";
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
      const summary = frame ? receiptSummary(frame.envelope.body) : "";
      if (summary) receipt.textContent = summary;
    });
  },
  "hosted.call"(e) { hostedCard(this, e); },
  "hosted.result"(e) { hostedCard(this, e); },
  citation(e) {
    this.citationCount += 1;
    const number = this.citationCount;
    /** @type {Cited} */
    const c = Object.assign({ number }, e);
    const block = this.textOf(e.output_index, e.part_index);
    const source = e.url ? linkOrText(e.url, e.title || e.url) : el("span", {}, e.title || e.file_id || e.source_type);
    const li = el("li", { id: `cite-${number}`, value: String(number) }, source,
      e.cited_text ? el("span", { class: "muted" }, ` — “${e.cited_text}”`) : null);
    markTrust(li, e.trust);
    if (block) {
      if ((c.start === null || c.start === undefined) && e.cited_text) {
        const span = locateCited(block.text, e.cited_text);
        if (span) { c.start = span.start; c.end = span.end; }
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
