// @ts-check
// modelevents UI: what the eval pages fold from a result (GET /v1/evals/{id}) apart from the
// DOM: the gates in their order, each metric's label and number format, the rejected runs with
// the evidence of each gate, and a chart's scale. The record's fields: docs/migration.md.

/** The hard gates, in the order of services/migration/eval/gates.py's GATES (a test checks). */
export const GATES = ["data_policy", "unauthorized_action", "invalid_schema", "missing_evidence",
  "duplicated_effect"];

/** @typedef {{name: string, value: number | null, low: number | null, high: number | null, n: number, rejected: number}} Figure */
/** @typedef {{name: string, difference: number | null, low: number | null, high: number | null, tasks: number, rejected_a: number, rejected_b: number}} PairedFigure */
/** @typedef {{bundle: string, name: string | null, runs: number, accepted: number, rejected: number, not_started: string[], gate_failures: Record<string, number>, figures: Figure[], model_snapshots: string[], api_revisions: string[], error_runs: number, refusal_runs: number, unknown_event_rate: number, needs_reconciliation_rate: number, unpriced: string[]}} BundleOutcome */
/** @typedef {{gate: string, evidence: string}} GateVerdict */
/** @typedef {{run_id: string, task: string, repeat: number, bundle: string, accepted: boolean, gates: GateVerdict[]}} RunVerdict */
/** @typedef {{result_id: string, corpus: string, created_at: number, mode: string, bundles: BundleOutcome[], comparisons: {a: string, b: string, figures: PairedFigure[]}[], runs: RunVerdict[]}} EvalResult */

/** A metric's label and how its numbers read (as `modelevents eval show` prints them). */
const METRICS = /** @type {Record<string, {label: string, format: (v: number) => string}>} */ ({
  task_success: { label: "Task success", format: (v) => `${Math.round(v * 100)}%` },
  approvals_per_run: { label: "Approvals asked per run", format: (v) => v.toFixed(2) },
  time_to_verified_ms: { label: "Time to verified result", format: (v) => `${Math.round(v).toLocaleString("en")} ms` },
  input_tokens: { label: "Input tokens", format: (v) => v.toLocaleString("en", { maximumFractionDigits: 1 }) },
  output_tokens: { label: "Output tokens", format: (v) => v.toLocaleString("en", { maximumFractionDigits: 1 }) },
  cache_read_tokens: { label: "Cache read tokens", format: (v) => v.toLocaleString("en", { maximumFractionDigits: 1 }) },
  unit_cost: { label: "Unit cost", format: (v) => v.toFixed(6) },
});

/** @param {string} name a metric's name in the record */
export const metricLabel = (name) => (METRICS[name] ? METRICS[name].label : name.replaceAll("_", " "));

/** A gate's name as a heading says it. @param {string} gate */
export const gateLabel = (gate) => gate.replaceAll("_", " ");

/**
 * A metric's number, "—" for none.
 * @param {string} name @param {number | null | undefined} value
 */
export function fmtMetric(name, value) {
  if (value === null || value === undefined) return "—";
  return METRICS[name] ? METRICS[name].format(value) : String(value);
}

/**
 * A difference with its sign ("+", or "−" for below zero).
 * @param {string} name @param {number | null | undefined} value
 */
export function fmtSigned(name, value) {
  if (value === null || value === undefined) return "—";
  return (value < 0 ? "−" : "+") + fmtMetric(name, Math.abs(value));
}

/**
 * "[low … high]", "" without an interval.
 * @param {string} name @param {number | null} low @param {number | null} high
 * @param {boolean} [signed]
 */
export function fmtInterval(name, low, high, signed = false) {
  if (low === null || high === null) return "";
  const f = signed ? fmtSigned : fmtMetric;
  return `[${f(name, low)} … ${f(name, high)}]`;
}

/**
 * A bundle as the pages name it: its name and the start of its id.
 * @param {{bundle: string, name?: string | null}} outcome
 */
export const bundleLabel = (outcome) => (outcome.name ? `${outcome.name} (${outcome.bundle.slice(0, 12)})`
  : outcome.bundle.slice(0, 16));

/**
 * The gates as columns: the five, then any other the record counts.
 * @param {EvalResult} result
 */
export function gateColumns(result) {
  const more = new Set();
  for (const b of result.bundles) for (const g of Object.keys(b.gate_failures)) if (!GATES.includes(g)) more.add(g);
  return [...GATES, ...[...more].sort()];
}

/**
 * Every gate failure of every rejected run, one row each, in the record's order.
 * @param {EvalResult} result
 * @returns {{run_id: string, bundle: string, task: string, repeat: number, gate: string, evidence: string}[]}
 */
export function rejections(result) {
  return result.runs.filter((r) => !r.accepted).flatMap((r) => r.gates.map((g) => (
    { run_id: r.run_id, bundle: r.bundle, task: r.task, repeat: r.repeat, gate: g.gate, evidence: g.evidence })));
}

/**
 * Each metric of the record, in the first bundle's order, with every bundle's figure of it
 * (null where a bundle has none).
 * @param {EvalResult} result
 * @returns {{name: string, figures: (Figure | null)[]}[]}
 */
export function metrics(result) {
  const names = [];
  for (const b of result.bundles) for (const f of b.figures) if (!names.includes(f.name)) names.push(f.name);
  return names.map((name) => ({ name, figures: result.bundles.map((b) => b.figures.find((f) => f.name === name) || null) }));
}

/**
 * A horizontal chart's scale over its figures' values and intervals: from 0 (or the lowest
 * value below it) to the highest; `x(v)` maps a value onto [0, width].
 * @param {(Figure | null)[]} figures @param {number} width
 */
export function chartScale(figures, width) {
  const values = figures.flatMap((f) => (f ? [f.value, f.low, f.high] : [])).filter((v) => v !== null && v !== undefined);
  const low = Math.min(0, ...values.map(Number));
  let high = Math.max(0, ...values.map(Number));
  if (high === low) high = low + 1;
  return { low, high, x: (/** @type {number} */ v) => ((v - low) / (high - low)) * width };
}
