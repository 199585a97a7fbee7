// @ts-check
// modelevents UI: the folding of what the gateway sends into what the page shows, apart from
// the DOM: the live run list, the resume point of a run's events, the spans of cited text, the
// statuses events imply. Pure, so node's unit tests run it (tests/ui/).

/**
 * A row of GET /v1/runs (services/gateway/routes/run_list.py), the fields the page reads.
 * @typedef {{run_id: string, status: string, started_at?: number | null, updated_at?: number | null,
 *   [field: string]: any}} RunRow
 */

export const TERMINAL_STATUSES = ["completed", "incomplete", "failed", "cancelled"];

/**
 * The list as pushed by GET /v1/runs?watch=true: its first page, then every change of a run the
 * filters show; with the older pages asked for by "Older runs" after it.
 */
export class RunList {
  constructor() {
    /** @type {Map<string, RunRow>} run id → row, of the first page and the changes since */
    this.live = new Map();
    /** @type {RunRow[]} rows of older pages */
    this.extra = [];
    this.complete = true;
    /** @type {string | null} */
    this.nextCursor = null;
  }

  /** New filters: the older pages go. */
  restart() {
    this.extra = [];
  }

  /**
   * One event of the watch stream; false when it changes nothing shown.
   * @param {{kind: string, data: string}} event
   */
  apply({ kind, data }) {
    if (!data) return false;
    const body = JSON.parse(data);
    if (kind === "page") {
      this.live.clear();
      for (const row of body.runs) this.live.set(row.run_id, row);
      this.complete = body.complete;
      if (!this.extra.length) this.nextCursor = body.next_cursor;
    } else if (kind === "run") {
      this.live.set(body.run_id, body);
      this.extra = this.extra.filter((r) => r.run_id !== body.run_id);
    } else if (kind === "gone") {
      this.live.delete(body.run_id);
      this.extra = this.extra.filter((r) => r.run_id !== body.run_id);
    } else return false;
    return true;
  }

  /** @param {{runs: RunRow[], next_cursor: string | null}} page an older page */
  addPage(page) {
    this.extra = this.extra.concat(page.runs);
    this.nextCursor = page.next_cursor;
  }

  /** The rows shown: the live ones newest first (run id breaks ties), then the older pages'. */
  rows() {
    /** @param {RunRow} r @returns {[number, string]} */
    const sortKey = (r) => [r.started_at || r.updated_at || 0, r.run_id];
    /** @param {RunRow} a @param {RunRow} b */
    const newestFirst = (a, b) => {
      const [x, y] = [sortKey(a), sortKey(b)];
      return y[0] - x[0] || (y[1] > x[1] ? 1 : y[1] < x[1] ? -1 : 0);
    };
    return [...this.live.values()].sort(newestFirst)
      .concat(this.extra.filter((r) => !this.live.has(r.run_id)));
  }
}

/** What the "runs" line under the filters says. @param {number} count @param {boolean} complete @param {boolean} withToken */
export function listSummary(count, complete, withToken) {
  return count
    ? `${count} run${count === 1 ? "" : "s"}${complete ? "" : " (still reading the runs topic)"}`
    : "No runs to show" + (withToken ? " for this token." : ".");
}

/** The seqs of one run's events seen so far: each is applied once, whatever a resume repeats. */
export class SeqCursor {
  constructor() {
    this.lastSeq = -1;
  }

  /** @param {number} seq @returns {boolean} whether the event is new (and now seen) */
  accept(seq) {
    if (seq <= this.lastSeq) return false;
    this.lastSeq = seq;
    return true;
  }
}

/**
 * The status a run.awaiting puts a run in.
 * @param {string} reason
 */
export const awaitingStatus = (reason) => (reason === "approval" ? "waiting_for_approval" : "waiting_for_tool");

/**
 * Whether the run's state from `runs` may set the badge: the events are the live truth and the
 * state may lag them, so it does only when it has caught up with them — and, once run.finished
 * was seen, only when it is terminal too.
 * @param {{status: string, last_seq: number}} state
 * @param {{finished: boolean, lastSeq: number}} seen
 */
export function stateShowsStatus(state, seen) {
  if (seen.finished && !TERMINAL_STATUSES.includes(state.status)) return false;
  return state.last_seq >= seen.lastSeq;
}

/**
 * The key of a text or reasoning block: the provider call, the kind, the output item and part.
 * @param {number} call @param {string} kind @param {{output_index: number, part_index: number | null}} e
 */
export const blockKey = (call, kind, e) => `${call}:${kind}:${e.output_index}:${e.part_index}`;

/**
 * Whether a block's key is the text a citation refers to: the same call and output item, and the
 * same part when the citation names one.
 * @param {string} key @param {number} call @param {number} outputIndex @param {number | null | undefined} partIndex
 */
export function citesBlock(key, call, outputIndex, partIndex) {
  const [blockCall, kind, output, part] = key.split(":");
  return Number(blockCall) === call && kind === "text" && Number(output) === outputIndex &&
    (partIndex === null || partIndex === undefined || Number(part) === partIndex);
}

/**
 * Where cited text is in a block's text, in code points (as a citation's start and end count);
 * null when it is not there.
 * @param {string} text @param {string} cited
 * @returns {{start: number, end: number} | null}
 */
export function locateCited(text, cited) {
  const at = text.indexOf(cited);
  if (at < 0) return null;
  const start = Array.from(text.slice(0, at)).length;
  return { start, end: start + Array.from(cited).length };
}

/**
 * @typedef {{number: number, start?: number | null, end?: number | null, [field: string]: any}} Cited
 * @typedef {{text: string, citation?: Cited}} Segment
 */

/**
 * A block's text cut at its citations' spans (code points): plain segments, and marked ones
 * with their citation. Of overlapping spans the first one is marked.
 * @param {string} text @param {Cited[]} citations
 * @returns {Segment[]}
 */
export function citedSegments(text, citations) {
  const chars = Array.from(text);
  const spans = citations.filter((c) => c.start !== null && c.start !== undefined &&
    c.end !== null && c.end !== undefined && c.end > c.start)
    .sort((a, b) => Number(a.start) - Number(b.start));
  /** @type {Segment[]} */
  const segments = [];
  let at = 0;
  for (const c of spans) {
    const start = Number(c.start), end = Number(c.end);
    if (start < at) continue;
    segments.push({ text: chars.slice(at, start).join("") });
    segments.push({ text: chars.slice(start, end).join(""), citation: c });
    at = end;
  }
  segments.push({ text: chars.slice(at).join("") });
  return segments;
}

/**
 * The tool executor's receipt summary that a tool result's frame carries (operation id,
 * outcome…), "" when the frame is a provider's own.
 * @param {string} frameBody
 */
export function receiptSummary(frameBody) {
  let doc;
  try { doc = JSON.parse(frameBody); } catch { return ""; }
  if (!doc || typeof doc !== "object") return "";
  const bits = ["operation_id", "outcome", "error_class", "reconciled", "repeated"]
    .filter((k) => doc[k] !== undefined).map((k) => `${k.replaceAll("_", " ")}: ${doc[k]}`);
  return bits.length ? "Receipt — " + bits.join(" · ") : "";
}
