"""``modelevents bundle`` (services/cli/commands/bundle.py) as users run it — a subprocess — on
the real broker: create writes the bundle on the bundles topic and prints its id, show / list /
diff read it back by id or unique prefix, writing a bundle twice keeps one, and every mistake
(an invalid file, an unknown id, an ambiguous prefix) exits 2 saying what is wrong and writes
nothing."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from modelevents.schemas import bundle_record
from modelevents.services.kafka import clients
from modelevents.services.kafka.settings import PipelineSettings
from modelevents.services.migration.bundles import store
from modelevents.services.migration.bundles.bundle_file import EXAMPLE_PATH, read_bundle_file

pytestmark = pytest.mark.kafka


def bundle_cli(settings: PipelineSettings, *args: str) -> subprocess.CompletedProcess:
    kafka = [] if args[0] == "example" else ["--bootstrap-servers", settings.bootstrap_servers,
                                             "--prefix", settings.topic_prefix]
    return subprocess.run([sys.executable, "-m", "modelevents.services.cli", "bundle", *args,
                           *kafka], capture_output=True, text=True, timeout=120)


def bundle_file(tmp_path: Path, name: str, **target: str) -> Path:
    doc = yaml.safe_load(EXAMPLE_PATH.read_text())
    doc["name"] = name
    doc["target"].update(target)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def topic_values(settings: PipelineSettings) -> list[tuple[bytes | None, bytes | None]]:
    async def read() -> list[tuple[bytes | None, bytes | None]]:
        return [(r.key, r.raw) async for r in clients.read_records(
            settings, "bundles", to_end=True, timeout=10) if r is not None]
    return asyncio.run(read())


def test_create_writes_the_bundle_and_show_list_read_it_back(pipeline_settings, tmp_path):
    path = bundle_file(tmp_path, "first")
    created = bundle_cli(pipeline_settings, "create", str(path))
    assert created.returncode == 0, created.stderr
    bundle_id = created.stdout.strip()
    assert bundle_id == read_bundle_file(path).bundle_id
    # On the topic: one record, keyed by the id, decoding to the bundle of the file.
    [(key, value)] = topic_values(pipeline_settings)
    assert key == bundle_id.encode()
    assert bundle_record.decode(value).bundle == read_bundle_file(path)

    shown = bundle_cli(pipeline_settings, "show", bundle_id[:12], "--json")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["bundle_id"] == bundle_id
    assert doc["target"]["snapshot"] == "gpt-4o-mini-2024-07-18"
    assert doc["request_adapter"].startswith("requests/openai-responses@")
    assert doc["instruction"]["version"] == "2026-12-01"
    as_yaml = bundle_cli(pipeline_settings, "show", bundle_id)
    assert yaml.safe_load(as_yaml.stdout)["bundle_id"] == bundle_id

    # Created again: the same bundle, still one on the topic's listing.
    assert bundle_cli(pipeline_settings, "create", str(path)).stdout.strip() == bundle_id
    listed = bundle_cli(pipeline_settings, "list")
    assert listed.returncode == 0, listed.stderr
    [line] = listed.stdout.splitlines()
    assert line.split("\t")[0] == bundle_id and "first" in line.split("\t")
    assert [d["bundle_id"] for d in json.loads(
        bundle_cli(pipeline_settings, "list", "--json").stdout)] == [bundle_id]
    # `tail --topic bundles` prints the records as they are on the topic.
    tailed = subprocess.run([sys.executable, "-m", "modelevents.services.cli", "tail", "--topic",
                             "bundles", "--timeout", "3", "--bootstrap-servers",
                             pipeline_settings.bootstrap_servers, "--prefix",
                             pipeline_settings.topic_prefix],
                            capture_output=True, text=True, timeout=120)
    lines = [json.loads(line) for line in tailed.stdout.splitlines()]
    assert [line["bundle_id"] for line in lines] == [bundle_id, bundle_id]
    assert json.loads(lines[0]["capabilities"])["provider"] == "openai"


def test_diff_names_each_field_that_differs(pipeline_settings, tmp_path):
    a = bundle_cli(pipeline_settings, "create", str(bundle_file(tmp_path, "a"))).stdout.strip()
    b = bundle_cli(pipeline_settings, "create", str(bundle_file(
        tmp_path, "b", snapshot="gpt-4o-mini-2099-01-01"))).stdout.strip()
    compared = bundle_cli(pipeline_settings, "diff", a[:14], b, "--json")
    assert compared.returncode == 1, compared.stderr
    changes = {c["path"]: (c["a"], c["b"]) for c in json.loads(compared.stdout)["changes"]}
    assert changes == {"name": ("a", "b"),
                       "target.snapshot": ("gpt-4o-mini-2024-07-18", "gpt-4o-mini-2099-01-01")}
    text = bundle_cli(pipeline_settings, "diff", a, b).stdout
    assert 'target.snapshot: "gpt-4o-mini-2024-07-18" -> "gpt-4o-mini-2099-01-01"' in text
    # A bundle file against the bundle created from it: no difference.
    same = bundle_cli(pipeline_settings, "diff", str(tmp_path / "a.yaml"), a)
    assert same.returncode == 0 and "no differences" in same.stdout


def test_an_unknown_id_and_an_ambiguous_prefix_exit_2(pipeline_settings, tmp_path):
    unknown = bundle_cli(pipeline_settings, "show", "bnd-" + "0" * 64)
    assert unknown.returncode == 2
    assert "no bundle 'bnd-" in unknown.stderr and "bundle list" in unknown.stderr
    assert bundle_cli(pipeline_settings, "show", "gpt-4o").returncode == 2
    # 17 bundles: at least two share their id's first hex digit.
    bundles = [read_bundle_file(bundle_file(tmp_path, f"n{i}")) for i in range(17)]

    async def put_all() -> None:
        for bundle in bundles:
            await store.put(pipeline_settings, bundle)
    asyncio.run(put_all())
    digit, count = Counter(b.bundle_id[4] for b in bundles).most_common(1)[0]
    assert count >= 2
    ambiguous = bundle_cli(pipeline_settings, "show", f"bnd-{digit}")
    assert ambiguous.returncode == 2
    assert f"bundle prefix 'bnd-{digit}' is ambiguous: {count} bundles" in ambiguous.stderr


def test_an_invalid_file_exits_2_naming_the_field_and_writes_nothing(pipeline_settings,
                                                                     tmp_path):
    doc = yaml.safe_load(EXAMPLE_PATH.read_text())
    doc["sampling"]["temperature"] = 9
    del doc["instruction"]["version"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    refused = bundle_cli(pipeline_settings, "create", str(path))
    assert refused.returncode == 2
    assert str(path) in refused.stderr
    assert "instruction.version: Field required" in refused.stderr
    assert "sampling.temperature" in refused.stderr
    assert topic_values(pipeline_settings) == []


def test_the_example_is_a_file_create_accepts(pipeline_settings, tmp_path):
    example = bundle_cli(pipeline_settings, "example")
    assert example.returncode == 0
    path = tmp_path / "mine.yaml"
    path.write_text(example.stdout)
    dry = bundle_cli(pipeline_settings, "create", str(path), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["bundle_id"] == read_bundle_file(EXAMPLE_PATH).bundle_id
    assert topic_values(pipeline_settings) == []
