// @ts-check
// modelevents UI: the eval results (#/evals, GET /v1/evals, asked again every few seconds) and
// one result (#/evals/<id>, GET /v1/evals/{id}): the hard gates first — per bundle the runs and
// the rejected by each gate, then every rejection with its evidence and its run — then the
// comparison of accepted runs only, each figure with its interval and the rejected count
// beside it, the paired differences and a chart per metric; then what the runs were observed
// to run on (model snapshots, API revisions).
import { apiJson, currentToken } from "../api.js";
import { $, el, sleep } from "../dom.js";
import { bundleLabel, fmtInterval, fmtMetric, fmtSigned, gateColumns, gateLabel, metricLabel, metrics,
  rejections } from "../evals.js";
import { fmtTime } from "../format.js";
import { metricChart } from "./chart.js";

const LIST_EVERY_MS = 5000;

/** @typedef {{kind: string, stop(): void}} View */
/** @typedef {import("../evals.js").EvalResult} EvalResult */

/** @param {string} id */
const evalHref = (id) => `#/evals/${encodeURIComponent(id)}`;
/** @param {string} id */
const runHref = (id) => `#/runs/${encodeURIComponent(id)}`;

/** A header cell of a column. @param {string} text @param {string} [cls] */
const th = (text, cls) => el("th", { scope: "col", class: cls || null }, text);

/** "name@version" of a list row. @param {Record<string, any>} row */
const corpusOf = (row) => (row.corpus_version ? `${row.corpus}@${row.corpus_version}` : row.corpus);

/** @param {Record<string, any>[]} rows */
function renderList(rows) {
  $("evals-body").replaceChildren(...rows.map((row) => el("tr", { dataset: { resultId: row.result_id } },
    el("td", { class: "run" }, el("a", { href: evalHref(row.result_id) }, row.result_id.slice(0, 20) + "…")),
    el("td", {}, corpusOf(row)),
    el("td", {}, fmtTime(row.created_at)),
    el("td", {}, row.mode),
    el("td", {}, el("ul", { class: "plain" }, ...row.bundles.map((/** @type {{bundle: string, name: string | null, accepted: number, rejected: number}} */ b) => el("li", {},
      `${bundleLabel(b)}: ${b.accepted} accepted, ${b.rejected} rejected`)))),
    el("td", { class: "num" }, row.accepted),
    el("td", { class: "num" }, row.rejected))));
}

/** Shows the list of results, asked again every few seconds until stopped. @returns {View} */
export function showEvalList() {
  $("evals-view").hidden = false;
  document.title = "modelevents — eval results";
  let stopped = false;
  (async () => {
    while (!stopped) {
      try {
        const answer = await apiJson("/v1/evals");
        if (stopped) return;
        renderList(answer.results);
        const n = answer.results.length;
        $("evals-status").textContent = (n ? `${n} result${n === 1 ? "" : "s"}` : "No eval result yet: `modelevents eval run` writes them")
          + (answer.complete ? "" : " (still reading the topic…)")
          + (currentToken() ? " — those of the token's tenant" : "");
      } catch (error) {
        $("evals-status").textContent = `Could not list eval results: ${/** @type {Error} */ (error).message}; trying again…`;
      }
      await sleep(LIST_EVERY_MS);
    }
  })();
  return { kind: "evals", stop() { stopped = true; } };
}

/** @param {string} title @param {string} id @param {...(Node | null)} body */
const section = (title, id, ...body) => el("section", { class: "eval-part", "aria-labelledby": id, id: `${id}-part` },
  el("h2", { id }, title), ...body);

/** The gates table and every rejection with its evidence. @param {EvalResult} result */
function gatesPart(result) {
  const gates = gateColumns(result);
  const table = el("table", { id: "gates-table" },
    el("caption", { class: "muted" }, "A run that fails any gate is rejected, whatever its score; rejected runs are left out of the comparison below."),
    el("thead", {}, el("tr", {}, th("Bundle"), th("Runs", "num"), th("Not started", "num"), th("Accepted", "num"),
      th("Rejected", "num"), ...gates.map((g) => th(gateLabel(g), "num")))),
    el("tbody", {}, ...result.bundles.map((b) => el("tr", { dataset: { bundle: b.bundle } },
      el("th", { scope: "row", title: b.bundle }, bundleLabel(b)),
      el("td", { class: "num" }, b.runs), el("td", { class: "num" }, b.not_started.length),
      el("td", { class: "num" }, b.accepted),
      el("td", { class: b.rejected ? "num bad" : "num" }, b.rejected),
      ...gates.map((g) => el("td", { class: b.gate_failures[g] ? "num bad" : "num", dataset: { gate: g } },
        b.gate_failures[g] || 0))))));
  const names = Object.fromEntries(result.bundles.map((b) => [b.bundle, bundleLabel(b)]));
  const rows = rejections(result);
  const evidence = rows.length ? el("table", { id: "rejections" },
    el("caption", {}, `Rejected runs: the evidence of each gate they failed (${rows.length})`),
    el("thead", {}, el("tr", {}, th("Run"), th("Bundle"), th("Task"), th("Gate"), th("Evidence"))),
    el("tbody", {}, ...rows.map((r) => el("tr", { dataset: { runId: r.run_id, gate: r.gate } },
      el("td", { class: "run" }, el("a", { href: runHref(r.run_id) }, r.run_id)),
      el("td", { title: r.bundle }, names[r.bundle] || r.bundle),
      el("td", {}, r.repeat ? `${r.task} (repeat ${r.repeat})` : r.task),
      el("td", {}, gateLabel(r.gate)),
      el("td", { class: "evidence" }, r.evidence)))))
    : el("p", { id: "rejections" }, "No run was rejected.");
  const refused = result.bundles.filter((b) => b.not_started.length);
  const notStarted = refused.length ? el("div", {}, el("h3", {}, "Not started (the gateway refused them: no run)"),
    el("ul", {}, ...refused.flatMap((b) => b.not_started.map((why) => el("li", {}, `${bundleLabel(b)}: ${why}`)))))
    : null;
  return section("Hard gates", "gates-title", el("div", { class: "table-wrap" }, table),
    el("div", { class: "table-wrap" }, evidence), notStarted);
}

/** The figures of accepted runs, the paired differences, the charts. @param {EvalResult} result */
function comparisonPart(result) {
  const byId = Object.fromEntries(result.bundles.map((b) => [b.bundle, b]));
  const all = metrics(result);
  const pairs = result.comparisons.map((c) => ({ c, label: `${bundleLabel(byId[c.a] || { bundle: c.a })} − ${bundleLabel(byId[c.b] || { bundle: c.b })}` }));
  const table = el("table", { id: "comparison" },
    el("caption", { class: "muted" }, "Means over accepted runs with their 95 % bootstrap interval (resampling tasks), the accepted runs counted and the rejected beside every figure; the paired difference is over the tasks both bundles have accepted runs of."),
    el("thead", {}, el("tr", {}, th("Metric"), ...result.bundles.map((b) => el("th", { scope: "col", title: b.bundle }, bundleLabel(b))),
      ...pairs.map((p) => th(`Paired difference ${p.label}`)))),
    el("tbody", {}, ...all.map(({ name, figures }) => el("tr", { dataset: { metric: name } },
      el("th", { scope: "row" }, metricLabel(name)),
      ...figures.map((f, i) => el("td", { dataset: { bundle: result.bundles[i].bundle } },
        f ? el("span", {}, el("strong", {}, fmtMetric(name, f.value)), " ", el("span", { class: "muted" }, fmtInterval(name, f.low, f.high)),
          el("br"), el("span", { class: "small" }, `${f.n} accepted · `), el("span", { class: f.rejected ? "small bad" : "small" }, `rejected ${f.rejected}`))
          : "—")),
      ...pairs.map(({ c }) => {
        const d = c.figures.find((f) => f.name === name);
        return el("td", { class: "paired" }, d ? el("span", {}, el("strong", {}, fmtSigned(name, d.difference)), " ",
          el("span", { class: "muted" }, fmtInterval(name, d.low, d.high, true)), el("br"),
          el("span", { class: "small" }, `${d.tasks} tasks · rejected ${d.rejected_a} vs ${d.rejected_b}`)) : "—");
      })))));
  const charts = el("div", { class: "charts", id: "charts" },
    ...all.map(({ name, figures }) => metricChart(name, result.bundles, figures, `chart-${name}`)));
  return section("Comparison of accepted runs", "comparison-title", el("div", { class: "table-wrap" }, table), charts);
}

/** What the runs ran on, as their events reported it. @param {EvalResult} result */
function observedPart(result) {
  const pct = (/** @type {number} */ v) => `${Math.round(v * 100)}%`;
  return section("Observed", "observed-title", el("div", { class: "table-wrap" }, el("table", { id: "observed" },
    el("thead", {}, el("tr", {}, th("Bundle"), th("Model snapshots"), th("API revisions (event adapters)"),
      th("Errors", "num"), th("Refusals", "num"), th("Runs with unknown events", "num"), th("Needs reconciliation", "num"))),
    el("tbody", {}, ...result.bundles.map((b) => el("tr", { dataset: { bundle: b.bundle } },
      el("th", { scope: "row", title: b.bundle }, bundleLabel(b)),
      el("td", {}, b.model_snapshots.join(", ") || "—",
        b.unpriced.length ? el("span", { class: "small bad" }, ` (no price for ${b.unpriced.join(", ")}: cost left out)`) : null),
      el("td", {}, b.api_revisions.join(", ") || "—"),
      el("td", { class: "num" }, b.error_runs), el("td", { class: "num" }, b.refusal_runs),
      el("td", { class: "num" }, pct(b.unknown_event_rate)), el("td", { class: "num" }, pct(b.needs_reconciliation_rate))))))));
}

/** Shows one result. @param {string} resultId @returns {View} */
export function showEval(resultId) {
  $("eval-view").hidden = false;
  $("eval-id").textContent = resultId;
  $("eval-facts").replaceChildren();
  $("eval-body").replaceChildren();
  $("eval-status").textContent = "Loading…";
  document.title = `modelevents — ${resultId}`;
  let stopped = false;
  (async () => {
    try {
      /** @type {EvalResult} */
      const result = await apiJson(`/v1/evals/${encodeURIComponent(resultId)}`);
      if (stopped) return;
      const [corpus, version] = result.corpus.includes("@") ? [result.corpus.slice(0, result.corpus.lastIndexOf("@")),
        result.corpus.slice(result.corpus.lastIndexOf("@") + 1)] : [result.corpus, "—"];
      $("eval-id").textContent = result.result_id;
      const fact = (/** @type {string} */ term, /** @type {string} */ value) => el("div", {}, el("dt", {}, term), el("dd", {}, value));
      $("eval-facts").replaceChildren(fact("Corpus", corpus), fact("Corpus version", version),
        fact("Date", fmtTime(result.created_at)), fact("Mode", result.mode === "frozen" ? "frozen (re-scored, no provider call)" : result.mode));
      $("eval-body").replaceChildren(gatesPart(result), comparisonPart(result), observedPart(result));
      $("eval-status").textContent = "";
    } catch (error) {
      if (!stopped) $("eval-status").textContent = `Could not load the result: ${/** @type {Error} */ (error).message}`;
    }
  })();
  return { kind: "eval", stop() { stopped = true; } };
}
