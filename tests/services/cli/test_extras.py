"""A core install — ``pip install modelevents``, no extra — carries the contract, the adapters and
the consumer API, and every command says which extra it needs instead of a traceback.

Each test runs a fresh interpreter in which the extras' packages cannot be imported (an import
hook refuses them, as a core install lacks them), so what the core imports is tested, not assumed.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib

from tests.paths import FIXTURES, REPO_ROOT

# The top-level modules of every extra's packages (pyproject.toml's optional-dependencies).
EXTRAS_MODULES = ("fastapi", "starlette", "uvicorn", "fastapi_offline", "tenacity", "httpx",
                  "prometheus_client", "faust", "mode", "jsonschema", "confusable_homoglyphs",
                  "pyarrow", "opentelemetry", "openai", "anthropic", "google")

CORE_PYTHON = f"""
import importlib.abc, sys
class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {set(EXTRAS_MODULES)!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _NotInstalled())
"""


def core(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", CORE_PYTHON + code], capture_output=True,
                          text=True, timeout=120, cwd=REPO_ROOT)


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return core(f"from modelevents.services.cli import main; sys.exit(main({list(argv)!r}))")


def test_the_contract_adapters_and_consumer_api_import_without_any_extra() -> None:
    result = core("""
from modelevents.consumers import subscribe, follow_run
from modelevents.adapters.registry import normalize_bytes
from modelevents.schemas import codec
from modelevents.consumers.tools.receipts import decode_receipt
import modelevents.consumers.replay.archive, modelevents.consumers.audit.verify, modelevents.consumers.replay.checks
print("ok")
""")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_core_commands_run_without_any_extra() -> None:
    fixture = FIXTURES / "anthropic-messages" / "pause-turn-then-continuation.sse"
    result = cli("normalize", "--summary", str(fixture))
    assert result.returncode == 0, result.stderr
    assert "completed (end_turn)" in result.stdout
    listed = cli("--help")
    assert listed.returncode == 0, listed.stderr
    for command in ("worker", "gateway", "tools", "audit", "tail", "replay"):
        assert f"    {command}" in listed.stdout, command


def test_a_command_that_needs_an_extra_names_it() -> None:
    for argv, extra, module in ((("worker", "--bootstrap-servers", "k:9092"), "worker", "faust"),
                                (("gateway",), "gateway", "uvicorn"),
                                (("tools", "run", "--policy", "p.yaml"), "tools", "httpx"),
                                (("simulator",), "simulator", "")):
        result = cli(*argv)
        assert result.returncode == 2, (argv, result.stderr)
        line = result.stderr.strip().splitlines()[-1]
        assert line.startswith("modelevents: error: "), (argv, result.stderr)
        assert f"pip install 'modelevents[{extra}]'" in line, (argv, line)
        assert module in line, (argv, line)
        assert "Traceback" not in result.stderr


def test_every_extra_is_in_all_and_the_core_declares_none_of_their_packages() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    (everything,) = extras["all"]
    named = set(everything.removeprefix("modelevents[").removesuffix("]").split(","))
    assert named == set(extras) - {"all", "test", "bench"}
    core_names = {dependency.split(">")[0].split("=")[0] for dependency in project["dependencies"]}
    assert not core_names & {"fastapi", "uvicorn", "faust-streaming", "jsonschema", "httpx"}
