// @ts-check
// modelevents UI: one connection for the run views of all tabs. The tabs of this browser share
// one stream of their runs' events through a SharedWorker (stream-worker.js): a browser keeps at
// most 6 HTTP/1.1 connections to one host, and a stream per open run view would hold one each.
// Without SharedWorker, each run view reads its own.
import { currentToken } from "./api.js";

/**
 * What the worker says about one run (stream-worker.js posts them).
 * @typedef {{type: string, runId: string, [field: string]: any}} StreamMessage
 * @typedef {{follow(runId: string, after: number, listener: (message: StreamMessage) => void): () => void,
 *   close(): void}} SharedStreams
 */

/** @type {SharedStreams | null} */
let shared = null;

/** The tabs' shared streams, for the current token; null without SharedWorker. */
export function sharedStreams() {
  if (shared) return shared;
  if (!window.SharedWorker) return null;
  const token = currentToken();
  // One worker per token: what it reads is what that token may see.
  let tag = 0;
  for (const c of token) tag = (tag * 31 + c.charCodeAt(0)) >>> 0;
  const worker = new SharedWorker("/ui/stream-worker.js", { type: "module", name: `modelevents-streams-${tag}` });
  const tabId = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
  /** @type {Map<string, (message: StreamMessage) => void>} run id → the run view's handler */
  const listeners = new Map();
  worker.port.onmessage = ({ data: message }) => {
    const listener = listeners.get(message.runId);
    if (listener) listener(message);
  };
  worker.port.start();
  // Held while this tab is open (the worker learns of a tab that closed without saying so).
  const ready = new Promise((resolve) => {
    if (!navigator.locks) { resolve(undefined); return; }
    navigator.locks.request(`modelevents-tab-${tabId}`, () => { resolve(undefined); return new Promise(() => {}); });
  }).then(() => worker.port.postMessage({ type: "hello", tabId, token }));
  /** @param {object} message */
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

/** Closes the shared streams: the next ones read as the new token. */
export function closeSharedStreams() {
  if (shared) { shared.close(); shared = null; }
}
