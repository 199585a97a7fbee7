"""`modelevents decide` refuses what it cannot record with a clear error and exit status 2,
before anything is written: a bundle that is no file and no id, a bundle file that is no
bundle, an eval result of another bundle, an evidence that is no URL, a missing owner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from modelevents.services.cli.main import main
from tests.services.migration.decisions import examples

# An address nothing listens on: every refusal here comes before Kafka is reached.
NO_KAFKA = ["--bootstrap-servers", "127.0.0.1:1"]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    bundle = examples.bundle()
    bundle_file = tmp_path / "bundle.yaml"
    bundle_file.write_text(yaml.safe_dump(bundle.model_dump(mode="json")))
    result_file = tmp_path / "other.json"
    result_file.write_text(json.dumps({"result_id": "evr-x", "bundle": "bnd-someone-else",
                                       "runs": 3}))
    return bundle_file, result_file


def _refused(capsys, *argv: str) -> str:
    assert main(["decide", *argv, *NO_KAFKA]) == 2
    return capsys.readouterr().err


def test_a_bundle_that_is_neither_file_nor_id_is_named(capsys):
    err = _refused(capsys, "--bundle", "missing.yaml", "--eval", "x.json", "--owner", "me")
    assert "--bundle missing.yaml: no such file, and not a bundle id" in err


def test_a_file_that_is_no_bundle_is_named_with_the_field(capsys, tmp_path: Path):
    path = tmp_path / "b.yaml"
    path.write_text("name: only-a-name\n")
    err = _refused(capsys, "--bundle", str(path), "--eval", "x.json", "--owner", "me")
    assert "does not fit — instruction" in err


def test_an_eval_result_of_another_bundle_is_refused(capsys, files):
    bundle_file, result_file = files
    err = _refused(capsys, "--bundle", str(bundle_file), "--eval", str(result_file),
                   "--owner", "me")
    assert "evr-x is of bundle bnd-someone-else" in err


@pytest.mark.parametrize("extra, message", [
    (["--evidence", "not a url"], "is not a URL"),
    (["--owner", ""], "needs an owner")])
def test_bad_evidence_or_no_owner_is_refused(capsys, files, extra, message):
    bundle_file, result_file = files
    argv = ["--bundle", str(bundle_file), "--eval", str(result_file), "--owner", "me", *extra]
    assert message in _refused(capsys, *argv)


def test_show_without_an_id_says_how(capsys):
    assert "decide show needs a decision id" in _refused(capsys, "show")
