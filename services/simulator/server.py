"""Run the simulator on a real socket: in a thread (tests, the demo) or in the foreground (CLI).

``run_in_thread(app, host, port)`` starts ``uvicorn.Server`` in a daemon thread and returns once
it accepts connections; port 0 picks a free port. The handle gives ``base_url`` and the base
URLs each official SDK wants (OpenAI ``…/v1``; Anthropic and google-genai the bare host).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI

from modelevents.schemas.errors import ConfigError
from modelevents.services.simulator.app import SimulatedCut, Simulator


class _HideSimulatedCuts(logging.Filter):
    """A simulated network cut is the point, not a server error: keep it out of the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        while exc is not None:
            if isinstance(exc, SimulatedCut):
                return False
            exc = exc.__cause__ or exc.__context__ or (
                exc.exceptions[0] if isinstance(exc, BaseExceptionGroup) and exc.exceptions
                else None)
        return True


def quiet_cuts() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _HideSimulatedCuts) for f in logger.filters):
        logger.addFilter(_HideSimulatedCuts())


def base_urls(base_url: str) -> dict[str, str]:
    """Where each SDK should point (what `modelevents simulator` prints)."""
    return {
        "openai": f"{base_url}/v1",  # openai.OpenAI(base_url=...)
        "anthropic": base_url,  # anthropic.Anthropic(base_url=...)
        "google-genai": base_url,  # genai.Client(http_options={"base_url": ...})
    }


@dataclass
class SimulatorHandle:
    server: uvicorn.Server
    thread: threading.Thread
    host: str
    port: int
    app: FastAPI

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def simulator(self) -> Simulator:
        return self.app.state.simulator

    def urls(self) -> dict[str, str]:
        return base_urls(self.base_url)

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)

    def __enter__(self) -> "SimulatorHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_in_thread(app: FastAPI | None = None, host: str = "127.0.0.1", port: int = 0,
                  *, startup_timeout: float = 15.0) -> SimulatorHandle:
    """Serve ``app`` (default: a fresh simulator) on ``host:port`` in a daemon thread."""
    app = app or Simulator().app
    quiet_cuts()
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off",
                            access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"simulator-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive():
            raise ConfigError(f"the simulator could not start on {host}:{port} (is the port in "
                              "use? pass another --port, or 0 for a free one)")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise ConfigError(f"the simulator did not start on {host}:{port} within "
                              f"{startup_timeout:.0f} s")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    return SimulatorHandle(server, thread, host, bound, app)
