"""Run the simulator on a real socket: in a thread (tests, the demo) or in the foreground (CLI).

``run_in_thread(app, host, port)`` serves it in a daemon thread (``services/local/asgi_thread.py``) and
returns once it accepts connections; port 0 picks a free port. The handle gives ``base_url`` and
the base URLs each official SDK wants (OpenAI ``…/v1``; Anthropic and google-genai the bare host).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI

from modelevents.services.local.asgi_thread import ServedApp, serve_in_thread
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


class SimulatorHandle(ServedApp):
    """A served simulator: ``base_url``, the SDKs' base URLs, ``simulator`` (its request log)."""

    @property
    def simulator(self) -> Simulator:
        return self.app.state.simulator

    def urls(self) -> dict[str, str]:
        return base_urls(self.base_url)


def run_in_thread(app: FastAPI | None = None, host: str = "127.0.0.1", port: int = 0,
                  *, startup_timeout: float = 15.0) -> SimulatorHandle:
    """Serve ``app`` (default: a fresh simulator) on ``host:port`` in a daemon thread."""
    app = app or Simulator().app
    quiet_cuts()
    served = serve_in_thread(app, host, port, name="simulator", lifespan="off",
                             startup_timeout=startup_timeout)
    return SimulatorHandle(served.server, served.thread, served.host, served.port, served.app)
