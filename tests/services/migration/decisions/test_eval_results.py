"""A decision reads the eval command's own result record: the Avro value `eval run` writes to
the eval-results topic (schemas/eval_results.py) and its `--json` form give the same figures
for the bundle decided on."""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from modelevents.schemas.eval_results import decode, encode
from modelevents.services.migration.decisions.eval_results import read_eval_file, summary_of

SAMPLE = Path(__file__).parents[1] / "eval" / "samples" / "eval_result.v1.json"


def _record() -> dict:
    record = json.loads(SAMPLE.read_text())
    second = record["bundles"][1]
    second.update(runs=20, rejected=3, error_runs=1, refusal_runs=2, unknown_event_rate=0.05,
                  needs_reconciliation_rate=0.1)
    return record


def test_the_avro_record_gives_the_bundles_own_counts_and_rates() -> None:
    record = _record()
    bundle = record["bundles"][1]["bundle"]
    summary = summary_of(decode(encode(record)), "topic", bundle)
    assert (summary.result_id, summary.bundle_id) == (record["result_id"], bundle)
    assert (summary.runs, summary.rejected, summary.errors, summary.refusals) == (20, 3, 1, 2)
    assert (summary.unknown_event_rate, summary.needs_reconciliation_rate) == (0.05, 0.1)


def test_the_json_form_reads_the_same(tmp_path: Path) -> None:
    record = _record()
    path = tmp_path / "result.json"
    path.write_bytes(orjson.dumps(record))
    bundle = record["bundles"][1]["bundle"]
    assert read_eval_file(path, bundle) == summary_of(decode(encode(record)), "topic", bundle)
