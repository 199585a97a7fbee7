"""An ASGI app served by uvicorn on a real loopback socket, in a thread of this process.

For what runs the gateway or the provider simulator beside other work in one process: the demo,
the benchmarks and the tests. ``serve_in_thread(app)`` returns once the server accepts
connections (port 0 picks a free port) and gives a :class:`ServedApp` with the bound ``port``,
the ``base_url`` and ``stop()``. ``lifespan="on"`` runs the app's startup and shutdown (the
gateway needs it: its Kafka producer starts there).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Literal

import uvicorn

from modelevents.schemas.errors import ConfigError

__all__ = ["ServedApp", "serve_in_thread"]


@dataclass
class ServedApp:
    server: uvicorn.Server
    thread: threading.Thread
    host: str
    port: int
    app: Any

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    url = base_url

    def stop(self, timeout: float = 15.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise RuntimeError(f"the server on port {self.port} did not stop within {timeout:g} s")

    def __enter__(self) -> ServedApp:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_in_thread(app: Any, host: str = "127.0.0.1", port: int = 0, *, name: str = "server",
                    lifespan: Literal["auto", "on", "off"] = "on",
                    startup_timeout: float = 30.0) -> ServedApp:
    """Serve ``app`` on ``host:port`` in a daemon thread; raises ConfigError saying why when it
    does not start (a port in use, a failing startup: uvicorn logged the cause)."""
    # A bounded graceful stop: open SSE followers would otherwise hold it up for ever. An app
    # that names uvicorn options of its own (the gateway's: services/gateway/connections.py)
    # is served with them.
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan=lifespan,
                            access_log=False, timeout_graceful_shutdown=5,
                            **getattr(app, "server_options", {}))
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"{name}-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive():
            raise ConfigError(f"the {name} could not start on {host}:{port} (is the port in use? "
                              "pass another port, or 0 for a free one; the log above says why)")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise ConfigError(f"the {name} did not start on {host}:{port} within "
                              f"{startup_timeout:.0f} s")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    return ServedApp(server, thread, host, bound, app)
