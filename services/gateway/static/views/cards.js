// @ts-check
// modelevents UI: the cards of a run view that several events fill in: a tool call (its
// arguments as they stream, its results, the executor's receipt), a hosted tool (input,
// evidence, the policy's trust verdicts) and an approval (Grant / Deny).
import { apiJson } from "../api.js";
import { el } from "../dom.js";
import { prettyJson } from "../format.js";
import { collectUrls, linkOrText } from "../links.js";

/**
 * What a card needs of its run view.
 * @typedef {import("./run.js").RunView} RunView
 * @typedef {HTMLElement & {rawButton?: HTMLElement}} ItemNode
 * @typedef {{node: ItemNode, args: HTMLElement, valid: HTMLElement, results: HTMLElement}} ToolCard
 * @typedef {{node: ItemNode, status: HTMLElement, args: HTMLElement, evidence: HTMLElement}} HostedCard
 * @typedef {{node: ItemNode, actions: HTMLElement, resolved: boolean}} ApprovalCard
 * @typedef {Record<string, any>} Payload an event's payload
 */

/** The card of a tool call, made by its first event. @param {RunView} view @param {Payload} e @returns {ToolCard} */
export function toolCard(view, e) {
  let card = view.tools.get(e.tool_call_id);
  if (!card) {
    const args = el("pre", { class: "args" });
    const valid = el("span", { class: "label" });
    const results = el("div", { class: "results" });
    const node = view.item("tool", e.seq, `Tool call: ${e.tool_name}`,
      el("span", { class: "label" }, "id ", el("code", { text: e.tool_call_id })),
      el("span", { class: "label", text: "Arguments" }), args, valid, results);
    node.dataset.toolCallId = e.tool_call_id;
    card = { node, args, valid, results };
    view.tools.set(e.tool_call_id, card);
  }
  view.touch(card.node, e.seq);
  return card;
}

/** The card of a hosted tool's call. @param {RunView} view @param {Payload} e @returns {HostedCard} */
export function hostedCard(view, e) {
  let card = view.hosted.get(e.call_id);
  if (!card) {
    const status = el("span", { class: "label" });
    const args = el("pre", { class: "args" });
    const evidence = el("div", { class: "evidence" });
    const node = view.item("hosted", e.seq, `Hosted tool: ${e.tool_type}${e.name ? ` (${e.name})` : ""} — run by ${e.authority}`,
      status, el("span", { class: "label", text: "Input" }), args, evidence);
    card = { node, status, args, evidence };
    view.hosted.set(e.call_id, card);
  }
  view.touch(card.node, e.seq);
  card.status.textContent = [e.status && `status: ${e.status}`, e.billable_unit && `billed per ${e.billable_unit}`,
    e.quantity !== null && e.quantity !== undefined && `× ${e.quantity}`, e.is_error && "error"].filter(Boolean).join(" · ");
  if (e.arguments) card.args.textContent = prettyJson(e.arguments);
  if (e.evidence) {
    /** @type {string[]} */
    let links = [];
    try { links = collectUrls(JSON.parse(e.evidence)); } catch { links = []; }
    const list = links.length ? [el("ul", {}, ...links.slice(0, 20).map((u) => el("li", {}, linkOrText(u, u))))] : [];
    card.evidence.replaceChildren(el("span", { class: "label", text: "Evidence" }), ...list,
      el("details", {}, el("summary", { text: "all of it" }), el("pre", { text: prettyJson(e.evidence) })));
  }
  markEvidenceTrust(card, e);
  return card;
}

/**
 * The worker's verdicts from the tenant's policy (docs/hosted-tools.md): a blocked source is
 * struck out, an untrusted one marked; unknown (no policy names it) is left as it is.
 * @param {HTMLElement} node @param {string | null | undefined} trust
 */
export function markTrust(node, trust) {
  if (!trust || trust === "unknown" || node.dataset.trust === trust) return;
  node.dataset.trust = trust;
  node.querySelector(":scope > .trust")?.remove();
  node.append(el("span", { class: `tag trust ${trust}`, text: trust }));
}

/** @param {HostedCard} card @param {Payload} e */
function markEvidenceTrust(card, e) {
  const verdicts = e.source_trust || {};
  card.evidence.querySelectorAll(":scope > ul > li").forEach((li) =>
    markTrust(/** @type {HTMLElement} */ (li), verdicts[li.firstElementChild?.textContent || ""]));
  if (e.trust && e.trust !== "unknown") card.node.dataset.trust = e.trust;
}

/** The card of an approval, with Grant / Deny until it is resolved. @param {RunView} view @param {Payload} e @returns {ApprovalCard} */
export function approvalCard(view, e) {
  let card = view.approvals.get(e.approval_id);
  if (!card) {
    const reason = /** @type {HTMLInputElement} */ (el("input", { type: "text", "aria-label": "reason for the decision",
      placeholder: "reason (optional)" }));
    const note = el("span", { class: "muted", "aria-live": "polite" });
    /** @param {boolean} granted */
    const decide = async (granted) => {
      note.textContent = "sending…";
      try {
        await apiJson(`/v1/runs/${encodeURIComponent(view.runId)}/approvals/${encodeURIComponent(e.approval_id)}`, {
          method: "POST", headers: { "content-type": "application/json" },
          body: JSON.stringify({ granted, reason: reason.value }) });
        note.textContent = `${granted ? "granted" : "denied"}: sent, waiting for approval.resolved…`;
      } catch (error) { note.textContent = `not sent: ${/** @type {Error} */ (error).message}`; }
    };
    const actions = el("div", { class: "actions" }, reason,
      el("button", { type: "button", class: "grant", onclick: () => decide(true) }, "Grant"),
      el("button", { type: "button", class: "deny", onclick: () => decide(false) }, "Deny"), note);
    const node = view.item("approval", e.seq, `Approval${e.tool_name ? ` for ${e.tool_name}` : ""}`,
      el("span", { class: "label" }, "id ", el("code", { text: e.approval_id })),
      e.arguments ? el("pre", { text: prettyJson(e.arguments) }) : null, actions);
    node.dataset.approvalId = e.approval_id;
    card = { node, actions, resolved: false };
    view.approvals.set(e.approval_id, card);
    if (e.kind === "approval.requested") view.setWaiting("approval");
  }
  view.touch(card.node, e.seq);
  return card;
}
