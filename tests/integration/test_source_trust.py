"""Source trust and violations through the real worker on the real broker: the worker started
with ``--policy``, one hand-written stream per provider API (tests/source_trust_cases.py) fed as
tenant ``acme``; the events read back carry their verdicts and violations, and the run state is
flagged needs_reconciliation and counts its untrusted and blocked sources; replay parity still
holds."""

from __future__ import annotations

import pytest

from modelevents.adapters.registry import normalize_file
from modelevents.consumers import replay
from modelevents.services.kafka.settings import PipelineSettings
from tests.helpers import of_kind
from tests.integration.conftest import broker_fixture
from tests.integration.pipeline import collect, feed, fixture_frames, run
from tests.source_trust_cases import CASES, COUNTS, POLICY_YAML, TENANT, VERDICTS, found

pytestmark = pytest.mark.kafka

kafka_broker = broker_fixture(base_port=19960, scope="module")


def test_the_worker_judges_each_apis_sources_and_flags_violations(
        settings: PipelineSettings, start_worker, tmp_path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY_YAML)
    worker = start_worker(extra=("--policy", str(policy)))
    runs = {}
    for path in CASES:
        run_id, frames = fixture_frames(path, tenant=TENANT)
        runs[run_id] = path
        run(feed(settings, frames))
    # Every event of the stream, plus one policy.violation per finding.
    counts = {run_id: len(normalize_file(path).events) + len(CASES[path])
              for run_id, path in runs.items()}
    published = run(collect(settings, lambda p: all(p.complete(r, n) for r, n in counts.items()),
                            worker.log_text))
    assert published.dead == []
    for run_id, path in runs.items():
        by_seq = published.deduped(run_id)
        events = [by_seq[seq] for seq in sorted(by_seq)]
        assert len(events) == counts[run_id], path.name
        citations = of_kind(events, "citation")
        assert [c.trust for c in citations] == [VERDICTS[c.url] for c in citations]
        for hosted in of_kind(events, "hosted.result"):
            if hosted.tool_type in ("web_search", "web_fetch"):
                assert (hosted.trust, hosted.source_trust) == ("blocked", VERDICTS), path.name
        assert found(of_kind(events, "policy.violation")) == CASES[path], path.name
        state = published.runs[run_id]
        assert state.status == "completed" and state.needs_reconciliation, path.name
        assert {n.split(":")[0] for n in state.reconciliation_notes} == {
            f"policy violation {v}" for v, _, _ in CASES[path]}, path.name
        assert (state.untrusted_sources, state.blocked_sources) == COUNTS[path.parent.name]
        assert state.policy_violations == len(CASES[path])
    # Replay parity re-normalizes the frames without the policy: the verdicts and violations
    # are the worker's, not the adapters', and are not differences.
    parity = run(replay.check_parity(settings))
    assert parity.ok and {r.run_id for r in parity.runs} == set(runs), parity
    assert worker.terminate() == 0
