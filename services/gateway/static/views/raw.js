// @ts-check
// modelevents UI: an event's raw provider frame (GET /v1/runs/{id}/events/{seq}), in a dialog.
import { apiJson } from "../api.js";
import { $ } from "../dom.js";

const FRAMES_KEPT = 100;
/** @type {Map<string, any>} run id and seq → frame (a few: fetched on demand) */
const frames = new Map();

/**
 * The event's frame, null when it cannot be read.
 * @param {string} runId @param {number} seq
 * @returns {Promise<any>}
 */
export async function fetchFrame(runId, seq) {
  const key = `${runId}\u0000${seq}`;
  if (frames.has(key)) return frames.get(key);
  try {
    const frame = await apiJson(`/v1/runs/${encodeURIComponent(runId)}/events/${seq}`);
    const oldest = frames.keys().next();
    if (frames.size > FRAMES_KEPT && !oldest.done) frames.delete(oldest.value);
    frames.set(key, frame);
    return frame;
  } catch { return null; }
}

/** Shows the event's frame as received. @param {string} runId @param {number} seq */
export async function openRaw(runId, seq) {
  const dialog = /** @type {HTMLDialogElement} */ ($("raw-dialog"));
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
