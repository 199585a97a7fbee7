"""LiteLLM's proxy for bench/proxy.py: its own venv, its config, its server as a subprocess.

LiteLLM pins versions of libraries that modelevents also uses, so it is never installed beside
modelevents: the first run creates a venv of its own under ``~/.cache/modelevents/litellm-venv``
(``pip install 'litellm[proxy]'``, a few minutes, progress on stderr) and later runs reuse it.
``--litellm-version`` pins another release; a venv holding another version is reinstalled.

    .venv/bin/python bench/litellm_proxy.py        # only prepare the venv, print its litellm

The proxy is started as LiteLLM documents it (``litellm --config FILE --port N``), every model
an OpenAI-compatible upstream at the provider simulator (``openai/<model>`` with ``api_base``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "modelevents"
VENV = CACHE / "litellm-venv"
STAMP = VENV / ".modelevents-litellm"


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def installed_version(venv: Path = VENV) -> str | None:
    """The litellm version the venv holds, None when it holds none."""
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    found = subprocess.run([str(python), "-c", "import importlib.metadata as m; "
                            "print(m.version('litellm'))"], capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else None


def ensure_venv(version: str | None = None, venv: Path = VENV) -> Path:
    """The ``litellm`` executable of the cached venv; the venv is created and LiteLLM installed
    (``litellm[proxy]``, ``==version`` when given) on first use."""
    executable = venv / "bin" / "litellm"
    want = f"litellm[proxy]=={version}" if version else "litellm[proxy]"
    if executable.exists() and STAMP.exists() and STAMP.read_text().strip() == want:
        return executable
    started = time.monotonic()
    if not (venv / "bin" / "python").exists():
        say(f"LiteLLM: creating its own venv at {venv} (once; its pins conflict with ours) ...")
        venv.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    log = venv / "install.log"
    say(f"LiteLLM: pip install '{want}' into {venv} (a few minutes the first time; "
        f"log: {log}) ...")
    with log.open("w") as out:
        for step in (["install", "--upgrade", "pip"], ["install", want]):
            done = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", *step],
                                  stdout=out, stderr=subprocess.STDOUT)
            if done.returncode != 0:
                tail = log.read_text().splitlines()[-20:]
                raise SystemExit("LiteLLM could not be installed:\n" + "\n".join(tail))
    STAMP.write_text(want + "\n")
    say(f"LiteLLM {installed_version(venv)} installed in {time.monotonic() - started:.0f} s")
    return executable


def write_config(path: Path, upstream: str, models: list[str], master_key: str) -> Path:
    """A LiteLLM proxy config: each model routed to the OpenAI-compatible ``upstream``
    (``…/v1``) under its own name; no database, no callbacks, no retries. Clients send
    ``master_key`` as their bearer token (LiteLLM refuses to start without one)."""
    lines = ["model_list:"]
    for model in models:
        lines += [f"  - model_name: {model}",
                  "    litellm_params:",
                  f"      model: openai/{model}",
                  f"      api_base: {upstream}",
                  "      api_key: sk-bench-not-a-key",
                  "      num_retries: 0"]
    lines += ["litellm_settings:",
              "  drop_params: true",
              "  num_retries: 0",
              "  request_timeout: 600",
              "  telemetry: false",
              "  set_verbose: false",
              "general_settings:",
              f"  master_key: {master_key}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def environment() -> dict[str, str]:
    """LiteLLM's environment: the model cost map read from the package (no download), no
    telemetry, quiet logs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LITELLM_"))}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_LOG="ERROR",
               LITELLM_TELEMETRY="False", DISABLE_SCHEMA_UPDATE="True",
               PYTHONUNBUFFERED="1")
    env.pop("VIRTUAL_ENV", None)
    return env


def start(executable: Path, config: Path, port: int, log: Path) -> subprocess.Popen:
    """``litellm --config FILE --port N`` (one worker), its output in ``log``."""
    return subprocess.Popen([str(executable), "--config", str(config), "--host", "127.0.0.1",
                             "--port", str(port), "--num_workers", "1"],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, env=environment(),
                            cwd=config.parent)


if __name__ == "__main__":
    ensure_venv(sys.argv[1] if len(sys.argv) > 1 else None)
    print(installed_version())
