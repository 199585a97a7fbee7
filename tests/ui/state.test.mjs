// The UI's folding of what the gateway sends (services/gateway/static/state.js): the live run
// list, each event once, cited spans, the statuses events and states imply.
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  RunList, SeqCursor, awaitingStatus, blockKey, citedSegments, citesBlock, listSummary, locateCited,
  receiptSummary, stateShowsStatus,
} from "../../services/gateway/static/state.js";

const page = (runs, extra = {}) => ({ kind: "page", data: JSON.stringify({ runs, complete: true, next_cursor: null, ...extra }) });
const row = (run_id, started_at, status = "in_progress") => ({ run_id, started_at, status });

test("the list: a page, then changes, newest first, ties by run id", () => {
  const list = new RunList();
  assert.equal(list.apply(page([row("a", 1), row("b", 3)], { complete: false, next_cursor: "c1" })), true);
  assert.deepEqual(list.rows().map((r) => r.run_id), ["b", "a"]);
  assert.equal(list.complete, false);
  assert.equal(list.nextCursor, "c1");
  list.apply({ kind: "run", data: JSON.stringify(row("c", 3)) });
  list.apply({ kind: "run", data: JSON.stringify(row("a", 1, "completed")) });
  assert.deepEqual(list.rows().map((r) => [r.run_id, r.status]),
    [["c", "in_progress"], ["b", "in_progress"], ["a", "completed"]]);
  list.apply({ kind: "gone", data: JSON.stringify({ run_id: "b" }) });
  assert.deepEqual(list.rows().map((r) => r.run_id), ["c", "a"]);
});

test("the list: notices without data or of another kind change nothing", () => {
  const list = new RunList();
  assert.equal(list.apply({ kind: "page", data: "" }), false);
  assert.equal(list.apply({ kind: "heartbeat", data: "{}" }), false);
  assert.deepEqual(list.rows(), []);
});

test("the list: older pages follow the live rows, without the runs that changed since", () => {
  const list = new RunList();
  list.apply(page([row("new", 10)], { next_cursor: "c1" }));
  list.addPage({ runs: [row("old", 2), row("older", 1)], next_cursor: "c2" });
  assert.deepEqual(list.rows().map((r) => r.run_id), ["new", "old", "older"]);
  list.apply({ kind: "run", data: JSON.stringify(row("old", 2, "completed")) });
  assert.deepEqual(list.rows().map((r) => r.run_id), ["new", "old", "older"]);
  assert.equal(list.extra.length, 1);
  list.apply(page([row("new", 10)], { next_cursor: "other" })); // older pages asked for: their cursor stays
  assert.equal(list.nextCursor, "c2");
  list.restart();
  list.apply(page([row("new", 10)], { next_cursor: "c9" }));
  assert.equal(list.nextCursor, "c9");
  assert.deepEqual(list.rows().map((r) => r.run_id), ["new"]);
});

test("the list's summary line", () => {
  assert.equal(listSummary(1, true, false), "1 run");
  assert.equal(listSummary(2, false, false), "2 runs (still reading the runs topic)");
  assert.equal(listSummary(0, true, false), "No runs to show.");
  assert.equal(listSummary(0, true, true), "No runs to show for this token.");
});

test("each event once, whatever a resume repeats", () => {
  const seen = new SeqCursor();
  assert.deepEqual([0, 1, 1, 0, 2, 5, 3].map((seq) => seen.accept(seq)), [true, true, false, false, true, true, false]);
  assert.equal(seen.lastSeq, 5);
});

test("statuses: what run.awaiting implies, and when the state from runs may set the badge", () => {
  assert.equal(awaitingStatus("approval"), "waiting_for_approval");
  assert.equal(awaitingStatus("tool_results"), "waiting_for_tool");
  assert.equal(awaitingStatus("continuation"), "waiting_for_tool");
  assert.equal(stateShowsStatus({ status: "in_progress", last_seq: 4 }, { finished: false, lastSeq: 4 }), true);
  assert.equal(stateShowsStatus({ status: "in_progress", last_seq: 3 }, { finished: false, lastSeq: 4 }), false);
  assert.equal(stateShowsStatus({ status: "in_progress", last_seq: 9 }, { finished: true, lastSeq: 4 }), false);
  assert.equal(stateShowsStatus({ status: "completed", last_seq: 9 }, { finished: true, lastSeq: 9 }), true);
});

test("a citation's block: same call and output item, and part when named", () => {
  const key = blockKey(2, "text", { output_index: 1, part_index: 0 });
  assert.equal(key, "2:text:1:0");
  assert.equal(citesBlock(key, 2, 1, 0), true);
  assert.equal(citesBlock(key, 2, 1, null), true);
  assert.equal(citesBlock(key, 2, 1, 1), false);
  assert.equal(citesBlock(key, 1, 1, 0), false);
  assert.equal(citesBlock("2:reasoning:1:0", 2, 1, 0), false);
});

test("cited text located in code points, not UTF-16 units", () => {
  assert.deepEqual(locateCited("🌊 High tide is at 06:12.", "High tide"), { start: 2, end: 11 });
  assert.equal(locateCited("text", "absent"), null);
});

test("cited spans cut the text; of overlapping spans the first is marked", () => {
  const a = { number: 1, start: 2, end: 6 };
  const b = { number: 2, start: 4, end: 8 };
  const c = { number: 3, start: 9, end: 10 };
  const segments = citedSegments("🌊 tide table!", [c, b, a, { number: 4, start: null, end: null }]);
  assert.deepEqual(segments.map((s) => [s.text, s.citation ? s.citation.number : null]),
    [["🌊 ", null], ["tide", 1], [" ta", null], ["b", 3], ["le!", null]]);
  assert.deepEqual(citedSegments("plain", []), [{ text: "plain" }]);
});

test("the executor's receipt summary from a tool result's frame", () => {
  assert.equal(receiptSummary(JSON.stringify({ operation_id: "op-1", outcome: "succeeded", repeated: false })),
    "Receipt — operation id: op-1 · outcome: succeeded · repeated: false");
  assert.equal(receiptSummary('{"type":"response.output_item.done"}'), "");
  assert.equal(receiptSummary("not json"), "");
  assert.equal(receiptSummary("null"), "");
});
