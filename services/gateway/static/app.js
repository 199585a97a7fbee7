// @ts-check
// modelevents UI: the page's entry (index.html loads it as a module): the token form and the
// routing between the run list (#/), one run live (#/runs/<id>), the eval results (#/evals), one
// result (#/evals/<id>), the decisions (#/decisions) and one decision (#/decisions/<id>). Plain
// JavaScript modules, no build step, no library; the page talks only to the gateway that served
// it (services/gateway/routes/ui.py says which routes). docs/ui.md has the modules' map.
import { currentToken, setToken } from "./api.js";
import { $ } from "./dom.js";
import { closeSharedStreams } from "./shared.js";
import { showDecision, showDecisionList } from "./views/decisions.js";
import { showEval, showEvalList } from "./views/evals.js";
import { showList } from "./views/list.js";
import { RunView } from "./views/run.js";

const VIEWS = ["list-view", "run-view", "evals-view", "eval-view", "decisions-view", "decision-view"];
const NAV = ["nav-runs", "nav-evals", "nav-decisions"];

/** @type {{kind: string, stop(): void} | null} the view shown */
let current = null;

/** Whether a hash is the run list's (#/, with or without its filters). @param {string} hash */
const isRunList = (hash) => /^(#\/?(\?.*)?)?$/.test(hash);

function route() {
  if (current) current.stop();
  for (const id of VIEWS) $(id).hidden = true;
  const match = location.hash.match(/^#\/runs\/([^?]+)/);
  const evalMatch = location.hash.match(/^#\/evals\/([^?]+)/);
  const evals = Boolean(evalMatch) || /^#\/evals\/?$/.test(location.hash);
  const decisionMatch = location.hash.match(/^#\/decisions\/([^?]+)/);
  const decisions = Boolean(decisionMatch) || /^#\/decisions\/?$/.test(location.hash);
  const nav = decisions ? "nav-decisions" : evals ? "nav-evals" : "nav-runs";
  for (const id of NAV) $(id).removeAttribute("aria-current");
  $(nav).setAttribute("aria-current", "page");
  if (decisionMatch) {
    current = showDecision(decodeURIComponent(decisionMatch[1]));
    $("main").focus({ preventScroll: true });
  } else if (decisions) {
    current = showDecisionList();
  } else if (evalMatch) {
    current = showEval(decodeURIComponent(evalMatch[1]));
    $("main").focus({ preventScroll: true });
  } else if (evals) {
    current = showEvalList();
  } else if (match) {
    $("run-view").hidden = false;
    const runId = decodeURIComponent(match[1]);
    document.title = `modelevents — ${runId}`;
    const view = new RunView(runId);
    current = view;
    view.start();
    $("main").focus({ preventScroll: true });
  } else {
    current = showList();
  }
}

function init() {
  const input = /** @type {HTMLInputElement} */ ($("token"));
  input.value = currentToken();
  $("whoami").textContent = currentToken() ? "token set" : "";
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(input.value.trim());
    if (current) current.stop();
    current = null;
    closeSharedStreams(); // the next one reads as the new token
    $("whoami").textContent = currentToken() ? "token set" : "no token";
    route();
  });
  window.addEventListener("hashchange", (event) => {
    // A filter change rewrites the list's hash without leaving it.
    const wasList = isRunList(new URL(event.oldURL).hash);
    if (wasList && isRunList(location.hash) && current && current.kind === "list") return;
    route();
  });
  route();
}

init();
