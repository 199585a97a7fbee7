// @ts-check
// modelevents UI: the decision records (#/decisions, GET /v1/decisions, asked again every few
// seconds; a historical one marked) and one decision (#/decisions/<id>, GET /v1/decisions/{id},
// asked again every 2 s and drawn again when its revision changes, so a demotion the watcher
// writes appears on the open page): when demoted, the trigger, the reason, expected against
// observed and the evidence (the run, linked; the event; topic, partition, offset) first; then
// the bundle and target, required capabilities, availability, the eval results (linked),
// evidence URLs, exceptions, owner and the retest triggers watched.
import { apiJson, currentToken } from "../api.js";
import { $, el, sleep } from "../dom.js";
import { changed, fmtDecisionTarget, fmtRate, recordPlace, retestTriggers, triggerLabel } from "../decisions.js";
import { fmtTime, prettyJson } from "../format.js";
import { linkOrText } from "../links.js";

const LIST_EVERY_MS = 3000;
const DECISION_EVERY_MS = 2000;

/** @typedef {{kind: string, stop(): void}} View */
/** @typedef {import("../decisions.js").Decision} Decision */

/** @param {string} id */
const decisionHref = (id) => `#/decisions/${encodeURIComponent(id)}`;
/** @param {string} id */
const runHref = (id) => `#/runs/${encodeURIComponent(id)}`;
/** @param {string} id */
const evalHref = (id) => `#/evals/${encodeURIComponent(id)}`;

/** A decision's status as a badge. @param {string} status */
const statusBadge = (status) => el("span", { class: `badge d-${status}`, dataset: { status } }, status);

/** @param {Record<string, any>[]} rows */
function renderList(rows) {
  $("decisions-body").replaceChildren(...rows.map((row) => el("tr", {
    class: row.status === "historical" ? "historical" : null, dataset: { decisionId: row.decision_id, status: row.status },
  },
  el("td", { class: "run" }, el("a", { href: decisionHref(row.decision_id) }, row.decision_id.slice(0, 16) + "…")),
  el("td", {}, statusBadge(row.status), row.trigger ? el("span", { class: "small" }, ` ${triggerLabel(row.trigger)}`) : null),
  el("td", { title: row.bundle_id }, row.bundle_name, el("br"), el("code", { class: "small" }, row.bundle_id.slice(0, 16))),
  el("td", {}, fmtDecisionTarget(row.target)),
  el("td", {}, row.owner),
  el("td", { class: "num" }, row.revision),
  el("td", {}, fmtTime(row.decided_at)),
  el("td", {}, row.demoted_at ? fmtTime(row.demoted_at) : "—"))));
}

/** Shows the list of decisions, asked again every few seconds until stopped. @returns {View} */
export function showDecisionList() {
  $("decisions-view").hidden = false;
  document.title = "modelevents — decisions";
  let stopped = false;
  (async () => {
    while (!stopped) {
      try {
        const answer = await apiJson("/v1/decisions");
        if (stopped) return;
        renderList(answer.decisions);
        const n = answer.decisions.length;
        const historical = answer.decisions.filter((/** @type {{status: string}} */ d) => d.status === "historical").length;
        $("decisions-status").textContent = (n ? `${n} decision${n === 1 ? "" : "s"}, ${historical} historical`
          : "No decision yet: `modelevents decide` records them")
          + (answer.complete ? "" : " (still reading the topic…)")
          + (currentToken() ? " — those of the token's tenant" : "");
      } catch (error) {
        $("decisions-status").textContent = `Could not list decisions: ${/** @type {Error} */ (error).message}; trying again…`;
      }
      await sleep(LIST_EVERY_MS);
    }
  })();
  return { kind: "decisions", stop() { stopped = true; } };
}

/** @param {string} title @param {string} id @param {...(Node | null)} body */
const section = (title, id, ...body) => el("section", { class: "eval-part", "aria-labelledby": id, id: `${id}-part` },
  el("h2", { id }, title), ...body);

/** @param {string} term @param {Node | string} value @param {string} [id] */
const fact = (term, value, id) => el("div", {}, el("dt", {}, term), el("dd", { id: id || null }, value));

/** A list of items, or "none". @param {string} id @param {(Node | string)[]} items */
const listOrNone = (id, items) => (items.length ? el("ul", { id }, ...items.map((i) => el("li", {}, i)))
  : el("p", { id, class: "muted" }, "None."));

/** Why the decision is historical and on what evidence. @param {Decision} decision */
function demotionPart(decision) {
  const d = decision.demotion;
  if (!d) return null;
  const place = recordPlace(d);
  const withheld = d.withheld && d.withheld.length;
  return el("section", { id: "demotion", class: "demotion", role: "status", "aria-labelledby": "demotion-title" },
    el("h2", { id: "demotion-title" }, `Historical evidence: demoted by ${triggerLabel(d.trigger).toLowerCase()}`),
    el("p", { id: "demotion-reason" }, d.reason),
    el("dl", { class: "facts" },
      fact("Trigger", triggerLabel(d.trigger), "demotion-trigger"),
      fact("Expected", d.expected === null ? "—" : d.expected, "demotion-expected"),
      fact("Observed", d.observed === null ? "—" : d.observed, "demotion-observed"),
      fact("Demoted", fmtTime(d.at), "demotion-at"),
      fact("Run", d.run_id ? el("a", { href: runHref(d.run_id) }, d.run_id)
        : (withheld ? "another tenant's run (withheld)" : "—"), "demotion-run"),
      fact("Event", d.event_id || (withheld ? "withheld" : "—"), "demotion-event"),
      fact("Record", place || "— (seen in the capability manifest)", "demotion-record")),
    el("p", { class: "small" }, "A new eval that passes, and a new decision on it, make the bundle current again."));
}

/** The retest triggers: what each watches; the one that fired marked. @param {Decision} decision */
function triggersPart(decision) {
  return section("Retest triggers", "triggers-title", el("div", { class: "table-wrap" }, el("table", { id: "triggers" },
    el("caption", { class: "muted" }, "Live traffic that differs from what a trigger records demotes the decision to historical evidence."),
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Trigger"), el("th", { scope: "col" }, "Recorded"))),
    el("tbody", {}, ...retestTriggers(decision).map((t) => el("tr", { dataset: { trigger: t.trigger }, class: t.fired ? "fired" : null },
      el("th", { scope: "row" }, t.label, t.fired ? el("span", { class: "small bad" }, " (fired)") : null),
      el("td", {}, !t.watched.length ? el("span", { class: "muted" }, "not watched")
        : t.trigger === "capabilities" ? el("details", {}, el("summary", {}, "the recorded manifest entry"),
          el("pre", { class: "small" }, prettyJson(t.watched[0])))
          : el("ul", { class: "plain" }, ...t.watched.map((w) => el("li", {}, w))))))))));
}

/** The page of one decision. @param {Decision} decision */
function render(decision) {
  $("decision-id").textContent = decision.decision_id;
  $("decision-view").classList.toggle("historical", decision.status === "historical");
  $("decision-facts").replaceChildren(
    fact("Status", statusBadge(decision.status), "decision-status"),
    fact("Revision", String(decision.revision), "decision-revision"),
    fact("Owner", decision.owner, "decision-owner"),
    fact("Recorded", fmtTime(decision.decided_at)),
    fact("Bundle", el("span", {}, decision.bundle_name, " ", el("code", { class: "small" }, decision.bundle_id)), "decision-bundle"),
    fact("Target", fmtDecisionTarget(decision.target), "decision-target"));
  const a = decision.availability;
  $("decision-body").replaceChildren(...[
    demotionPart(decision),
    section("Required capabilities", "required-title", listOrNone("required", decision.required_capabilities)),
    section("Observed availability", "availability-title", el("dl", { id: "availability", class: "facts" },
      fact("Runs", String(a.runs)), fact("Rejected by a hard gate", String(a.rejected)),
      fact("Error rate", fmtRate(a.error_rate)), fact("Refusal rate", fmtRate(a.refusal_rate)))),
    section("Eval results", "results-title", listOrNone("eval-results",
      decision.eval_results.map((id) => el("a", { href: evalHref(id), class: "run" }, id)))),
    section("Evidence", "evidence-title", listOrNone("evidence", decision.evidence.map((url) => linkOrText(url, url)))),
    section("Exceptions", "exceptions-title", listOrNone("exceptions", decision.exceptions)),
    triggersPart(decision),
  ].filter((part) => part !== null));
}

/** Shows one decision, asked again every 2 s until stopped. @param {string} decisionId @returns {View} */
export function showDecision(decisionId) {
  $("decision-view").hidden = false;
  $("decision-view").classList.remove("historical");
  $("decision-id").textContent = decisionId;
  $("decision-facts").replaceChildren();
  $("decision-body").replaceChildren();
  $("decision-status-line").textContent = "Loading…";
  document.title = `modelevents — ${decisionId}`;
  let stopped = false;
  /** @type {Decision | null} */
  let shown = null;
  (async () => {
    while (!stopped) {
      try {
        /** @type {Decision} */
        const decision = await apiJson(`/v1/decisions/${encodeURIComponent(decisionId)}`);
        if (stopped) return;
        if (changed(shown, decision)) {
          render(decision);
          shown = decision;
        }
        $("decision-status-line").textContent = "";
      } catch (error) {
        if (stopped) return;
        $("decision-status-line").textContent = `Could not load the decision: ${/** @type {Error} */ (error).message}; trying again…`;
      }
      await sleep(DECISION_EVERY_MS);
    }
  })();
  return { kind: "decision", stop() { stopped = true; } };
}
