"""``audit export`` (consumers/audit/export.py) without a broker: JSON lines that give back every
archived record exactly, Parquet, and what the command says without pyarrow. The archive is
test_verify.py's; the receipts' export: test_receipts.py."""

from __future__ import annotations

import base64
import io
import subprocess
import sys
from pathlib import Path

import orjson

from modelevents.consumers.audit import export
from modelevents.consumers.audit.verify import verify_archive
from modelevents.schemas import codec
from tests.consumers.audit.test_verify import archive  # noqa: F401 (the fixture)


def test_jsonl_export_is_exact(archive: Path) -> None:
    out = io.StringIO()
    count = export.export_jsonl(archive, out)
    lines = out.getvalue().splitlines()
    assert count == len(lines) == verify_archive(archive).records
    originals = {(r.topic, r.partition, r.offset): r for r in export.archived_records(archive)}
    for line in lines:
        item = orjson.loads(line)
        original = originals[(item["topic"], item["partition"], item["offset"])]
        value = base64.b64decode(item["value"])
        assert value == original.value and base64.b64decode(item["key"]) == original.key
        assert item["record"] == orjson.loads(orjson.dumps(
            export.record_view(codec.decode(value))))
        if item["type"] == "event":
            assert base64.b64decode(item["record"]["envelope"]["body"]) == \
                codec.decode(value).envelope.body


def test_parquet_export(archive: Path, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    out = tmp_path / "a.parquet"
    count = export.export_parquet(archive, out)
    table = pq.read_table(out)
    assert table.num_rows == count == verify_archive(archive).records
    rows = table.to_pylist()
    events = [r for r in rows if r["type"] == "event"]
    assert {r["tenant"] for r in rows} == {"default", "acme"}
    assert all(codec.decode(r["value"]).seq == r["seq"] for r in events)


def test_parquet_without_pyarrow_says_how(archive: Path, tmp_path: Path) -> None:
    code = ("import sys; sys.modules['pyarrow'] = None\n"
            "from modelevents.services.cli import main\n"
            f"sys.exit(main(['audit', 'export', {str(archive)!r}, '--format', 'parquet', "
            f"'-o', {str(tmp_path / 'x.parquet')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2
    assert "pip install modelevents[audit]" in done.stderr
