// The UI's SSE reader (services/gateway/static/sse.js) against the standard's event stream
// interpretation: every line end and every mix of them, split across chunks anywhere.
import assert from "node:assert/strict";
import { test } from "node:test";

import { SseParser, readSse } from "../../services/gateway/static/sse.js";

/** A fetch body's reader over these chunks (strings are UTF-8 encoded, bytes kept as they are). */
function reader(chunks) {
  const encoder = new TextEncoder();
  const queue = chunks.map((c) => (typeof c === "string" ? encoder.encode(c) : c));
  return { read: async () => (queue.length ? { value: queue.shift(), done: false } : { value: undefined, done: true }) };
}

async function events(chunks) {
  const seen = [];
  await readSse(reader(chunks), (event) => seen.push(event));
  return seen;
}

/** What the page's callers read of an event: its own id, its kind and its data. */
async function read(chunks) {
  return (await events(chunks)).map(({ id, kind, data }) => ({ id, kind, data }));
}

/** Every way of cutting the text in two, and one character at a time. */
function cuts(text) {
  const ways = [[text], [...text]];
  for (let at = 1; at < text.length; at += 1) ways.push([text.slice(0, at), text.slice(at)]);
  return ways;
}

const TWO = (end) => `id: 1${end}event: text.delta${end}data: {"a":1}${end}${end}` +
  `id: 2${end}event: run.finished${end}data: {"b":2}${end}${end}`;

const EXPECTED_TWO = [
  { id: "1", kind: "text.delta", data: '{"a":1}' },
  { id: "2", kind: "run.finished", data: '{"b":2}' },
];

for (const [name, end] of [["LF", "\n"], ["CRLF", "\r\n"], ["CR", "\r"]]) {
  test(`events separated by ${name}, cut anywhere`, async () => {
    for (const chunks of cuts(TWO(end))) assert.deepEqual(await read(chunks), EXPECTED_TWO, JSON.stringify(chunks));
  });
}

test("a CRLF line end then an LF blank line (\\r\\n\\n) ends the block and nothing more", async () => {
  const text = 'id: 1\r\nevent: a\r\ndata: {"x":1}\r\n\nid: 2\r\nevent: b\r\ndata: {"y":2}\r\n\n';
  for (const chunks of cuts(text)) {
    assert.deepEqual(await read(chunks), [
      { id: "1", kind: "a", data: '{"x":1}' },
      { id: "2", kind: "b", data: '{"y":2}' },
    ], JSON.stringify(chunks));
  }
});

test("every mix of line ends in one stream", async () => {
  const text = "data: one\r\r\ndata: two\n\r\ndata: three\r\n\rdata: four\n\rdata: five\r\r";
  for (const chunks of cuts(text)) {
    assert.deepEqual((await events(chunks)).map((e) => e.data), ["one", "two", "three", "four", "five"],
      JSON.stringify(chunks));
  }
});

test("data lines join with LF; the space after the colon only is dropped", async () => {
  const seen = await events(["data:  two spaces\ndata\ndata:x\r\ndata: last\n\n"]);
  assert.deepEqual(seen.map((e) => e.data), [" two spaces\n\nx\nlast"]);
});

test("comments are skipped and a block without data is not an event", async () => {
  const seen = await events([": keep-alive\n\nid: 7\n\nevent: nothing\n\n: note\ndata: x\n\n"]);
  assert.deepEqual(seen, [{ id: null, lastEventId: "7", kind: "message", data: "x" }]);
});

test("an empty data line is an event with empty data; an empty event name is message", async () => {
  assert.deepEqual(await events(["event:\ndata:\n\n"]), [{ id: null, lastEventId: "", kind: "message", data: "" }]);
});

test("one leading BOM is dropped, from the bytes or the text, and only one", async () => {
  const bom = new Uint8Array([0xef, 0xbb, 0xbf]);
  assert.deepEqual((await events([bom, "data: a\n\n"])).map((e) => e.data), ["a"]);
  assert.deepEqual((await events([new Uint8Array([0xef]), new Uint8Array([0xbb, 0xbf, 0x64]), "ata: b\n\n"]))
    .map((e) => e.data), ["b"]);
  const seen = [];
  const parser = new SseParser((e) => seen.push(e));
  parser.feed("\ufeff\ufeffdata: c\n\n");
  assert.deepEqual(seen, []); // the second BOM starts a field named "\ufeffdata": ignored
  parser.feed("data: d\n\n");
  assert.deepEqual(seen.map((e) => e.data), ["d"]);
});

test("retry sets the reconnection time when it is all digits", async () => {
  const seen = [];
  const parser = new SseParser((e) => seen.push(e));
  parser.feed("retry: 2500\n\n");
  assert.equal(parser.retry, 2500);
  parser.feed("retry: 1.5\nretry: x\n\n");
  assert.equal(parser.retry, 2500);
  assert.deepEqual(seen, []);
});

test("the last event id carries over; an id with NUL is ignored", async () => {
  const seen = await events(["id: 5\ndata: a\n\ndata: b\n\nid: 6\u0000\ndata: c\n\nid\ndata: d\n\n"]);
  assert.deepEqual(seen.map((e) => [e.id, e.lastEventId]), [["5", "5"], [null, "5"], [null, "5"], ["", ""]]);
});

test("an unfinished last block is dropped when the body ends", async () => {
  assert.deepEqual((await events(["data: a\n\ndata: b\n"])).map((e) => e.data), ["a"]);
});

test("a multi-byte character split between chunks", async () => {
  const bytes = new TextEncoder().encode("data: héllo €\n\n");
  for (let at = 1; at < bytes.length; at += 1) {
    assert.deepEqual((await events([bytes.slice(0, at), bytes.slice(at)])).map((e) => e.data), ["héllo €"]);
  }
});
