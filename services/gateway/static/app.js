// @ts-check
// modelevents UI: the page's entry (index.html loads it as a module): the token form and the
// routing between the run list (#/) and one run live (#/runs/<id>). Plain JavaScript modules, no
// build step, no library; the page talks only to the gateway that served it
// (services/gateway/routes/ui.py says which routes). docs/ui.md has the modules' map.
import { currentToken, setToken } from "./api.js";
import { $ } from "./dom.js";
import { closeSharedStreams } from "./shared.js";
import { showList } from "./views/list.js";
import { RunView } from "./views/run.js";

/** @type {{kind: string, stop(): void} | null} the view shown */
let current = null;

function route() {
  if (current) current.stop();
  const match = location.hash.match(/^#\/runs\/([^?]+)/);
  if (match) {
    $("list-view").hidden = true;
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
    const wasList = !/#\/runs\//.test(new URL(event.oldURL).hash);
    const isList = !/^#\/runs\//.test(location.hash);
    if (wasList && isList && current && current.kind === "list") return;
    route();
  });
  route();
}

init();
