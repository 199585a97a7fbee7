// @ts-check
// modelevents UI: what the decision pages fold from a record (GET /v1/decisions/{id}) apart
// from the DOM: each retest trigger's label and what the record holds for it, the trigger that
// fired, and a rate as a percentage. The record's fields: docs/migration.md.

/** @typedef {{provider: string, api: string, model: string, snapshot: string | null}} Target */
/** @typedef {{runs: number, rejected: number, error_rate: number, refusal_rate: number}} Availability */
/** @typedef {{model_snapshot: string | null, event_adapters: Record<string, string>, event_schema: string | null, tool_contracts: Record<string, string>, capabilities: string | null, unknown_event_rate: number | null, needs_reconciliation_rate: number | null}} Triggers */
/** @typedef {{trigger: string, reason: string, at: number, expected: string | null, observed: string | null, run_id: string | null, event_id: string | null, topic: string | null, partition: number | null, offset: number | null, withheld?: string[]}} Demotion */
/** @typedef {{decision_id: string, revision: number, bundle_id: string, bundle_name: string, target: Target, required_capabilities: string[], availability: Availability, evidence: string[], eval_results: string[], exceptions: string[], owner: string, triggers: Triggers, status: string, decided_at: number, updated_at: number, demotion: Demotion | null}} Decision */

/**
 * The retest triggers, in the order of schemas/decision_record.py's TRIGGERS (a
 * test checks), each with its label.
 */
export const TRIGGERS = /** @type {const} */ ([
  ["model_snapshot", "Model snapshot"],
  ["event_adapter", "Event adapter revision"],
  ["event_schema", "Event schema"],
  ["tool_contract", "Tool contract version"],
  ["capabilities", "Capability manifest entry"],
  ["unknown_event_rate", "Unknown-event rate"],
  ["needs_reconciliation_rate", "Needs-reconciliation rate"],
]);

/** A trigger's label. @param {string} trigger */
export function triggerLabel(trigger) {
  const found = TRIGGERS.find(([name]) => name === trigger);
  return found ? found[1] : trigger.replaceAll("_", " ");
}

/** A rate as a percentage ("—" for none). @param {number | null | undefined} rate */
export const fmtRate = (rate) => (rate === null || rate === undefined ? "—"
  : `${(rate * 100).toLocaleString("en", { maximumFractionDigits: 2 })}%`);

/** "provider / api / model @ snapshot". @param {Target} target */
export const fmtDecisionTarget = (target) => [target.provider, target.api, target.model].join(" / ")
  + (target.snapshot ? ` @ ${target.snapshot}` : "");

/** @param {Record<string, string>} map */
const pairs = (map) => Object.entries(map).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}: ${v}`);

/**
 * What the record watches for each trigger, as lines of text (empty: not watched), in the
 * triggers' order; `fired` marks the one a demotion names.
 * @param {Decision} decision
 * @returns {{trigger: string, label: string, watched: string[], fired: boolean}[]}
 */
export function retestTriggers(decision) {
  const t = decision.triggers;
  /** @type {Record<string, string[]>} */
  const watched = {
    model_snapshot: t.model_snapshot ? [t.model_snapshot] : [],
    event_adapter: pairs(t.event_adapters),
    event_schema: t.event_schema ? [t.event_schema] : [],
    tool_contract: pairs(t.tool_contracts),
    capabilities: t.capabilities ? [t.capabilities] : [],
    unknown_event_rate: t.unknown_event_rate === null ? [] : [`above ${fmtRate(t.unknown_event_rate)}`],
    needs_reconciliation_rate: t.needs_reconciliation_rate === null ? []
      : [`above ${fmtRate(t.needs_reconciliation_rate)}`],
  };
  const fired = decision.demotion ? decision.demotion.trigger : null;
  return TRIGGERS.map(([trigger, label]) => ({ trigger, label, watched: watched[trigger], fired: trigger === fired }));
}

/**
 * "topic / partition / offset" of a demotion's record, null when it names none (a changed
 * capability manifest is seen in the manifest, not on a topic).
 * @param {Demotion} demotion
 */
export function recordPlace(demotion) {
  if (!demotion.topic) return null;
  return `${demotion.topic} / partition ${demotion.partition} / offset ${demotion.offset}`;
}

/**
 * Whether a poll brought another revision than the one shown.
 * @param {Decision | null} shown @param {Decision} fetched
 */
export const changed = (shown, fetched) => !shown || shown.revision !== fetched.revision
  || shown.updated_at !== fetched.updated_at || shown.status !== fetched.status;
