// @ts-check
// modelevents UI: Server-Sent Events read from a fetch body (the page and stream-worker.js).
// fetch rather than EventSource: it can send the bearer token. The parser follows the HTML
// standard's event stream interpretation: lines end in CRLF, LF or CR (mixed freely, and split
// across chunks anywhere, a CRLF too), one leading BOM is dropped, `:` lines are comments, `data`
// lines join with LF, `retry` sets the reconnection time, and an event is dispatched only when a
// blank line ends a block that had data.

/**
 * One dispatched event. `id` is the id field of this event's own block (null without one: the
 * callers tell their events from stream notices by it); `lastEventId` is the stream's last event
 * id as the standard keeps it (what a resume sends as Last-Event-ID).
 * @typedef {{id: string | null, lastEventId: string, kind: string, data: string}} SseEvent
 */

export class SseParser {
  /** @param {(event: SseEvent) => void} onEvent */
  constructor(onEvent) {
    this.onEvent = onEvent;
    this.lastEventId = "";
    /** @type {number | null} the reconnection time (ms) the stream asked for, if it did */
    this.retry = null;
    this.started = false; // the first character seen (a BOM is dropped there only)
    this.afterCR = false; // the last chunk ended in CR: an LF starting the next one is its pair
    this.line = ""; // the unfinished line of the last chunk
    /** @type {string | null} */
    this.blockId = null;
    this.kind = "";
    this.data = "";
    this.hasData = false;
  }

  /** @param {string} chunk text decoded from the stream, any length */
  feed(chunk) {
    let text = chunk;
    if (!this.started && text) {
      this.started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    let at = 0;
    if (this.afterCR && text) {
      if (text[0] === "\n") at = 1;
      this.afterCR = false;
    }
    while (at < text.length) {
      const cr = text.indexOf("\r", at);
      const lf = text.indexOf("\n", at);
      const end = cr < 0 ? lf : lf < 0 ? cr : Math.min(cr, lf);
      if (end < 0) { this.line += text.slice(at); return; }
      const line = this.line + text.slice(at, end);
      this.line = "";
      at = end + 1;
      if (text[end] === "\r") {
        if (at === text.length) this.afterCR = true;
        else if (text[at] === "\n") at += 1;
      }
      this.onLine(line);
    }
  }

  /** @param {string} line one line, its end removed */
  onLine(line) {
    if (!line) { this.dispatch(); return; }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") {
      this.data += (this.hasData ? "\n" : "") + value;
      this.hasData = true;
    } else if (field === "event") this.kind = value;
    else if (field === "id") {
      if (!value.includes("\0")) { this.blockId = value; this.lastEventId = value; }
    } else if (field === "retry") {
      if (/^[0-9]+$/.test(value)) this.retry = Number(value);
    }
  }

  dispatch() {
    const { blockId: id, kind, data, hasData } = this;
    this.blockId = null;
    this.kind = "";
    this.data = "";
    this.hasData = false;
    if (hasData) this.onEvent({ id, lastEventId: this.lastEventId, kind: kind || "message", data });
  }
}

/**
 * Every event of a response body's reader, to onEvent, until the body ends (an unfinished last
 * block is dropped, as the standard says).
 * @param {ReadableStreamDefaultReader<Uint8Array>} reader
 * @param {(event: SseEvent) => void} onEvent
 * @returns {Promise<SseParser>} the parser, for its lastEventId and retry
 */
export async function readSse(reader, onEvent) {
  const decoder = new TextDecoder("utf-8", { ignoreBOM: true }); // the parser drops it
  const parser = new SseParser(onEvent);
  for (;;) {
    const { value, done } = await reader.read();
    if (done) { parser.feed(decoder.decode()); return parser; }
    parser.feed(decoder.decode(value, { stream: true }));
  }
}
