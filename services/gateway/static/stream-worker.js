// @ts-check
// modelevents UI: one connection for the run views of every tab of this browser (a SharedWorker).
//
// A browser keeps at most 6 HTTP/1.1 connections to one host; a run view holding a stream of
// its own each, a seventh tab would wait. The tabs' run views ask this worker instead (one worker
// per token), and it reads every run they follow on one stream, GET /v1/events?run=<id>@<seq>…
// (services/gateway/routes/event_streams.py), handing each event to the tabs that follow its run. When
// the runs change it asks again, every run after the last seq it has, and drops the old stream
// once the new one answered; an event seen twice meanwhile is handed on once. A tab that closes
// says so (pagehide), and is noticed through the Web Lock it holds while open if it cannot.
//
// A run the gateway does not know yet (its stream.end says not_found, 404: a link opened before
// the run's first event reached the gateway) is waited for: left out of the stream, it is asked
// for alone, GET /v1/runs/{id}, with a growing pause (run-wait.js), and followed again once the
// gateway knows it. The tabs are told each pause, to say so.
//
// A module worker (new SharedWorker(…, {type: "module"}), shared.js): it imports the page's SSE
// parser and backoff.
import { nextRunWait } from "./run-wait.js";
import { readSse } from "./sse.js";

const tabs = new Map(); // tab id → {port, runs: Map(run id → last seq handed to it)}
const have = new Map(); // run id → last seq read from the gateway (-1: none yet)
const ended = new Set(); // runs whose stream.end came: not asked for again
const waiting = new Map(); // run id → {waitMs, timer, status, error}: not known to the gateway yet
let token = "";
let stream = null; // {controller, runs: Set, done: Promise}
let pending = null; // timer of the next (re)connect

/** The token's header, none without one. @returns {Record<string, string>} */
function authorization() {
  return token ? { Authorization: "Bearer " + token } : {};
}

function post(tabId, message) {
  const tab = tabs.get(tabId);
  if (tab) tab.port.postMessage(message);
}

function wanted() {
  const runs = new Map(); // run id → the seq to go on after (the least any tab needs)
  for (const tab of tabs.values()) {
    for (const [runId, seq] of tab.runs) {
      if (ended.has(runId) || waiting.has(runId)) continue;
      const from = Math.min(seq, have.has(runId) ? have.get(runId) : seq);
      runs.set(runId, runs.has(runId) ? Math.min(runs.get(runId), from) : from);
    }
  }
  return runs;
}

function reconnectSoon(delay = 30) {
  clearTimeout(pending);
  pending = setTimeout(connect, delay);
}

async function connect() {
  pending = null;
  const runs = wanted();
  if (!runs.size) {
    if (stream) { stream.controller.abort(); stream = null; }
    return;
  }
  const query = new URLSearchParams();
  for (const [runId, after] of runs) query.append("run", after >= 0 ? `${runId}@${after}` : runId);
  for (const [runId, after] of runs) have.set(runId, after);
  const controller = new AbortController();
  const headers = authorization();
  let response;
  try {
    response = await fetch("/v1/events?" + query, { headers, signal: controller.signal });
  } catch (error) {
    broadcast(runs, { type: "status", text: "Connection lost; reconnecting…" });
    reconnectSoon(1000);
    return;
  }
  if (!response.ok || !response.body) {
    let message = response.statusText;
    try { message = (await response.json()).error || message; } catch (e) { /* not JSON */ }
    broadcast(runs, { type: "refused", status: response.status, text: `Events: ${response.status} ${message}` });
    if (response.status !== 401 && response.status !== 403 && response.status !== 422) reconnectSoon(2000);
    return;
  }
  const old = stream;
  stream = { controller, runs: new Set(runs.keys()) };
  if (old) old.controller.abort(); // the new one answered: it carries every run from here
  broadcast(runs, { type: "status", text: "live" });
  try {
    await readSse(response.body.getReader(), onBlock);
  } catch (error) { /* aborted, or cut */ }
  if (stream && stream.controller === controller) {
    stream = null;
    if (wanted().size) reconnectSoon(300); // cut, or a run left: go on after the last seqs
  }
}

function broadcast(runs, message) {
  for (const [tabId, tab] of tabs) {
    for (const runId of tab.runs.keys()) {
      if (runs.has(runId)) post(tabId, Object.assign({ runId }, message));
    }
  }
}

function onBlock({ id, kind, data }) {
  if (kind === "stream.end") {
    const end = JSON.parse(data);
    if (end.reason === "not_ready") { reconnectSoon(1000); return; }
    if (end.reason === "not_found" && end.status === 404) { waitFor(end.run_id, end); return; }
    ended.add(end.run_id);
    for (const [tabId, tab] of tabs) if (tab.runs.has(end.run_id)) post(tabId, Object.assign({ type: "end", runId: end.run_id }, end));
    return;
  }
  if (id === null || !data) return;
  const at = id.lastIndexOf("@");
  const runId = id.slice(0, at);
  const seq = Number(id.slice(at + 1));
  if (seq > (have.has(runId) ? have.get(runId) : -1)) have.set(runId, seq);
  for (const [tabId, tab] of tabs) {
    const last = tab.runs.get(runId);
    if (last === undefined || seq <= last) continue; // not its run, or seen before a reconnect
    tab.runs.set(runId, seq);
    post(tabId, { type: "event", runId, seq, kind, data });
  }
}

// The run is not known to the gateway: out of the stream until a lone ask finds it.
function waitFor(runId, refusal) {
  // A stream's late refusal of a run no tab follows any more (left meanwhile): nothing to wait for.
  if (![...tabs.values()].some((t) => t.runs.has(runId))) { stopWaiting(runId); return; }
  const entry = waiting.get(runId) || { waitMs: 0, timer: null };
  waiting.set(runId, entry);
  entry.waitMs = nextRunWait(entry.waitMs);
  entry.status = refusal.status;
  entry.error = refusal.error;
  clearTimeout(entry.timer);
  entry.timer = setTimeout(() => askAgain(runId, entry), entry.waitMs);
  broadcast(new Set([runId]), waitingMessage(entry));
}

function waitingMessage(entry) {
  return { type: "waiting", status: entry.status, error: entry.error, waitMs: entry.waitMs };
}

async function askAgain(runId, entry) {
  const headers = authorization();
  let response = null;
  try {
    response = await fetch(`/v1/runs/${encodeURIComponent(runId)}`, { headers });
  } catch (error) { /* the gateway is away: still waiting */ }
  if (waiting.get(runId) !== entry) return; // no tab follows it any more
  // Not found, or the gateway cannot answer now (a 5xx): still waiting, with its backoff —
  // not back into the shared stream, which would only be refused again.
  if (!response || response.status === 404 || response.status >= 500) {
    let refusal = { status: entry.status, error: entry.error };
    if (response) {
      try { refusal = { status: response.status, error: (await response.json()).error || refusal.error }; } catch (e) { /* not JSON */ }
    }
    if (waiting.get(runId) === entry) waitFor(runId, refusal);
    return;
  }
  // Known now (or refused otherwise: the stream says how): follow it with the others.
  stopWaiting(runId);
  reconnectSoon();
}

function stopWaiting(runId) {
  const entry = waiting.get(runId);
  if (entry) clearTimeout(entry.timer);
  waiting.delete(runId);
}

function follow(tabId, runId, after) {
  const tab = tabs.get(tabId);
  if (!tab) return;
  tab.runs.set(runId, after);
  ended.delete(runId);
  if (waiting.has(runId)) { post(tabId, Object.assign({ runId }, waitingMessage(waiting.get(runId)))); return; }
  // Already read from far enough back: nothing to ask again; else ask again from `after`.
  if (stream && stream.runs.has(runId) && have.get(runId) <= after) return;
  reconnectSoon();
}

function leave(tabId, runId) {
  const tab = tabs.get(tabId);
  if (!tab || !tab.runs.delete(runId)) return;
  if (![...tabs.values()].some((t) => t.runs.has(runId))) {
    have.delete(runId);
    ended.delete(runId);
    stopWaiting(runId);
    reconnectSoon(); // the stream goes on without it
  }
}

function dropTab(tabId) {
  const tab = tabs.get(tabId);
  if (!tab) return;
  for (const runId of [...tab.runs.keys()]) leave(tabId, runId);
  tabs.delete(tabId);
}

/** @type {SharedWorkerGlobalScope} */ (/** @type {unknown} */ (self)).onconnect = (event) => {
  const port = event.ports[0];
  let tabId = null;
  port.onmessage = ({ data: message }) => {
    if (message.type === "hello") {
      tabId = message.tabId;
      token = message.token || "";
      tabs.set(tabId, { port, runs: new Map() });
      // The tab holds this lock while it is open: granted to us, it closed.
      if (navigator.locks) navigator.locks.request(`modelevents-tab-${tabId}`, () => dropTab(tabId));
    } else if (message.type === "follow") follow(tabId, message.runId, message.after);
    else if (message.type === "leave") leave(tabId, message.runId);
    else if (message.type === "bye") dropTab(tabId);
  };
  port.start();
};
