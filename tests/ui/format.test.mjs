// The UI's formatters (services/gateway/static/format.js).
import assert from "node:assert/strict";
import { test } from "node:test";

import { fmtDuration, fmtTarget, fmtTime, fmtTokens, fmtUsage, n, prettyJson } from "../../services/gateway/static/format.js";

test("durations in ms, seconds, then minutes and seconds", () => {
  assert.equal(fmtDuration(null), "—");
  assert.equal(fmtDuration(undefined), "—");
  assert.equal(fmtDuration(0), "0 ms");
  assert.equal(fmtDuration(999), "999 ms");
  assert.equal(fmtDuration(1000), "1.0 s");
  assert.equal(fmtDuration(59_949), "59.9 s");
  assert.equal(fmtDuration(60_000), "1 min 0 s");
  assert.equal(fmtDuration(125_600), "2 min 6 s");
});

test("a missing count is a dash, zero is zero", () => {
  assert.equal(n(null), "–");
  assert.equal(n(undefined), "–");
  assert.equal(n(0), "0");
});

test("a row's tokens: input / output / cache read / reasoning", () => {
  assert.equal(fmtTokens(null), "—");
  assert.equal(fmtTokens({ input: 12, output: 3, cache_read: null }), "12 / 3 / – / –");
});

test("a run's usage totals", () => {
  assert.equal(fmtUsage(null), "—");
  assert.equal(fmtUsage({ input_tokens: 1850, output_tokens: 65, total_tokens: 1915, reasoning_tokens: 0 }),
    "in 1850 · out 65 · cache read – · cache write – · reasoning 0 · total 1915");
});

test("JSON indented, anything else as it is", () => {
  assert.equal(prettyJson('{"a":[1]}'), '{\n  "a": [\n    1\n  ]\n}');
  assert.equal(prettyJson("{not json"), "{not json");
  assert.equal(prettyJson(""), "");
  assert.equal(prettyJson(null), "");
});

test("provider / api / model of what is known; a time only when there is one", () => {
  assert.equal(fmtTarget({ provider: "anthropic", api: null, model: "claude" }), "anthropic / claude");
  assert.equal(fmtTarget({}), "");
  assert.equal(fmtTime(0), "—");
  assert.equal(fmtTime(null), "—");
  assert.equal(fmtTime(1_700_000_000_000), new Date(1_700_000_000_000).toLocaleString());
});
