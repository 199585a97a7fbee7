// @ts-check
// modelevents UI: how often a run view asks again for a run the gateway does not know yet (the
// page and stream-worker.js).
//
// A link opened right after a run was started (`modelevents feed`, POST /v1/runs) can come before
// the run's first event reached the gateway's views: the gateway answers 404 — the answer it
// also gives for another tenant's run, so the page cannot tell the two apart — and the view
// waits for the run, asking again less and less often, so that an id that never appears costs
// the gateway one small request every few seconds, not a stream of them.

export const RUN_WAIT_FIRST_MS = 500;
export const RUN_WAIT_MAX_MS = 5000;

/**
 * The pause before the next try after `previous` ms (0: after the first 404): doubled each
 * time, at most RUN_WAIT_MAX_MS.
 * @param {number} previous
 * @returns {number}
 */
export function nextRunWait(previous) {
  return previous ? Math.min(previous * 2, RUN_WAIT_MAX_MS) : RUN_WAIT_FIRST_MS;
}
