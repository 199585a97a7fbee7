// modelevents UI: reading Server-Sent Events from a fetch body (the page and stream-worker.js).
// fetch rather than EventSource: it can send the bearer token.
"use strict";

// One SSE block (the lines between blank lines) as {id, kind, data}; comments are skipped.
function parseSseBlock(block) {
  let id = null, kind = "message", data = "";
  for (const line of block.split(/\r?\n/)) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") id = value;
    else if (field === "event") kind = value;
    else if (field === "data") data += (data ? "\n" : "") + value;
  }
  return { id, kind, data };
}

// Every block of a response body's reader, to onBlock, until the body ends.
async function readSse(reader, onBlock) {
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + (buffer[cut] === "\r" ? 4 : 2));
      onBlock(parseSseBlock(block));
    }
  }
}
