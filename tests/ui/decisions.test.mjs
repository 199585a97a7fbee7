// What the decision pages fold from a record (services/gateway/static/decisions.js), over the
// frozen sample of the record (tests/services/migration/decisions/samples/decision.v1.json).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { changed, fmtDecisionTarget, fmtRate, recordPlace, retestTriggers, triggerLabel } from "../../services/gateway/static/decisions.js";

const SAMPLE = JSON.parse(readFileSync(new URL("../services/migration/decisions/samples/decision.v1.json", import.meta.url), "utf8"));

test("every trigger is listed with what the record watches; the one that fired is marked", () => {
  const rows = retestTriggers(SAMPLE);
  assert.deepEqual(rows.filter((r) => r.fired).map((r) => r.trigger), [SAMPLE.demotion.trigger]);
  const by = Object.fromEntries(rows.map((r) => [r.trigger, r.watched]));
  assert.deepEqual(by.model_snapshot, ["gpt-4o-2024-08-06"]);
  assert.deepEqual(by.event_adapter, ["openai-responses: openai_responses@4"]);
  assert.deepEqual(by.tool_contract, ["get_weather: 2"]);
  assert.deepEqual(by.unknown_event_rate, ["above 0%"]);
  assert.deepEqual(by.needs_reconciliation_rate, ["above 5%"]);
  assert.equal(by.capabilities[0], SAMPLE.triggers.capabilities);
});

test("a trigger the record does not hold is not watched, and a current decision fired none", () => {
  const current = { ...SAMPLE, status: "current", demotion: null,
    triggers: { ...SAMPLE.triggers, model_snapshot: null, unknown_event_rate: null, tool_contracts: {} } };
  const rows = retestTriggers(current);
  assert.equal(rows.some((r) => r.fired), false);
  const by = Object.fromEntries(rows.map((r) => [r.trigger, r.watched]));
  assert.deepEqual([by.model_snapshot, by.unknown_event_rate, by.tool_contract], [[], [], []]);
});

test("the demotion's record, its target and rates read plainly", () => {
  assert.equal(recordPlace(SAMPLE.demotion), "modelevents.events / partition 2 / offset 18446");
  assert.equal(recordPlace({ ...SAMPLE.demotion, topic: null, partition: null, offset: null }), null);
  assert.equal(fmtDecisionTarget(SAMPLE.target), "openai / openai-responses / gpt-4o @ gpt-4o-2024-08-06");
  assert.equal(fmtRate(0.025), "2.5%");
  assert.equal(fmtRate(null), "—");
  assert.equal(triggerLabel("model_snapshot"), "Model snapshot");
  assert.equal(triggerLabel("new_trigger"), "new trigger");
});

test("a poll redraws the page only for another revision", () => {
  assert.equal(changed(null, SAMPLE), true);
  assert.equal(changed(SAMPLE, { ...SAMPLE }), false);
  assert.equal(changed({ ...SAMPLE, revision: 0, status: "current" }, SAMPLE), true);
});
