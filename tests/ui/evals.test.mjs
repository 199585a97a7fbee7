// What the eval pages fold from a result (services/gateway/static/evals.js), over the frozen
// sample of the record (tests/services/migration/eval/samples/eval_result.v1.json).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { chartScale, fmtInterval, fmtMetric, fmtSigned, gateColumns, metrics, rejections } from "../../services/gateway/static/evals.js";

const SAMPLE = JSON.parse(readFileSync(new URL("../services/migration/eval/samples/eval_result.v1.json", import.meta.url), "utf8"));

test("every gate failure of a rejected run is a row with its evidence and run", () => {
  const rows = rejections(SAMPLE);
  const expected = SAMPLE.runs.filter((r) => !r.accepted).flatMap((r) => r.gates.map((g) => [r.run_id, g.gate, g.evidence]));
  assert.ok(expected.length > 0, "the sample has a rejected run");
  assert.deepEqual(rows.map((r) => [r.run_id, r.gate, r.evidence]), expected);
});

test("the five gates are columns even when no run failed them, then any other counted", () => {
  const columns = gateColumns({ ...SAMPLE, bundles: [{ ...SAMPLE.bundles[0], gate_failures: { new_gate: 1 } }] });
  assert.equal(columns.length, 6);
  assert.equal(columns[5], "new_gate");
});

test("each metric lists every bundle's figure, null where a bundle has none", () => {
  const listed = metrics({ ...SAMPLE, bundles: [SAMPLE.bundles[0], { ...SAMPLE.bundles[0], figures: [] }] });
  assert.deepEqual(listed.map((m) => m.name), SAMPLE.bundles[0].figures.map((f) => f.name));
  for (const m of listed) assert.equal(m.figures[1], null);
});

test("numbers read as the CLI prints them", () => {
  assert.equal(fmtMetric("task_success", 0.8), "80%");
  assert.equal(fmtMetric("unit_cost", 0.0012), "0.001200");
  assert.equal(fmtMetric("time_to_verified_ms", 1234.4), "1,234 ms");
  assert.equal(fmtMetric("input_tokens", null), "—");
  assert.equal(fmtSigned("task_success", -0.25), "−25%");
  assert.equal(fmtSigned("task_success", 0), "+0%");
  assert.equal(fmtInterval("task_success", 0.5, 1), "[50% … 100%]");
  assert.equal(fmtInterval("task_success", null, null), "");
});

test("a chart's scale starts at zero, spans every interval, and never divides by zero", () => {
  const scale = chartScale([{ name: "x", value: 5, low: 2, high: 10, n: 1, rejected: 0 }, null], 200);
  assert.equal(scale.x(0), 0);
  assert.equal(scale.x(10), 200);
  assert.equal(scale.x(5), 100);
  const below = chartScale([{ name: "x", value: -1, low: -2, high: 2, n: 1, rejected: 0 }], 100);
  assert.equal(below.x(-2), 0);
  assert.equal(below.x(2), 100);
  const flat = chartScale([{ name: "x", value: 0, low: 0, high: 0, n: 1, rejected: 0 }], 100);
  assert.equal(flat.x(0), 0);
});
