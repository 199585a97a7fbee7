// @ts-check
// modelevents UI: numbers, times and JSON as the page shows them.

/** @typedef {number | null | undefined} Maybe */

/** @param {Maybe} ms epoch milliseconds */
export const fmtTime = (ms) => (ms ? new Date(ms).toLocaleString() : "—");

/** @param {Maybe} ms */
export function fmtDuration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

/** A count, or "–" when the provider did not say. @param {unknown} value */
export const n = (value) => (value === null || value === undefined ? "–" : String(value));

/**
 * A list row's tokens: input / output / cache read / reasoning.
 * @param {{input?: Maybe, output?: Maybe, cache_read?: Maybe, reasoning?: Maybe} | null | undefined} t
 */
export function fmtTokens(t) {
  if (!t) return "—";
  return `${n(t.input)} / ${n(t.output)} / ${n(t.cache_read)} / ${n(t.reasoning)}`;
}

/**
 * A run's usage totals, as its view shows them.
 * @param {Record<string, Maybe> | null | undefined} u
 */
export function fmtUsage(u) {
  return u ? `in ${n(u.input_tokens)} · out ${n(u.output_tokens)} · cache read ${n(u.cache_read_tokens)}` +
    ` · cache write ${n(u.cache_write_tokens)} · reasoning ${n(u.reasoning_tokens)} · total ${n(u.total_tokens)}` : "—";
}

/**
 * JSON text indented, or the text as it is when it is not JSON.
 * @param {string | null | undefined} text
 */
export function prettyJson(text) {
  if (text === null || text === undefined || text === "") return "";
  try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return String(text); }
}

/**
 * "provider / api / model" of what is known, "" for none.
 * @param {Record<string, any>} run a run's state or row, or a run.started
 */
export const fmtTarget = (run) => [run.provider, run.api, run.model].filter(Boolean).join(" / ");
