"""The operator's page, served by the gateway at ``/ui``: static HTML, JavaScript and CSS shipped
in the package (``services/gateway/static/``) — no build step, nothing from a CDN, so it works
offline and behind any firewall.

    GET /ui                 the page (a run list, one run live: ``#/runs/<run id>``, the eval
                            results: ``#/evals``, one result: ``#/evals/<result id>``, the
                            decisions: ``#/decisions``, one: ``#/decisions/<decision id>``)
    GET /ui/{asset}         its ES modules (the entry ``app.js``, the API client, the SSE reader,
                            the formatters, the state folding, the link allow-list, the views
                            under ``views/``, the backoff of a run view waiting for its run, the
                            tabs' shared stream worker) and style sheet

The page only calls the gateway's own API: ``GET /v1/runs`` (the list, polled every second
while it is shown), ``GET /v1/runs/{id}`` (the run's state), ``GET /v1/events?run=…`` (the events of
the runs open in all of the browser's tabs on one SSE connection, read by a SharedWorker — a
browser keeps at most 6 connections to one host — with ``fetch`` so that it can send the bearer
token, and resumed after each run's last seq after a cut; a browser without SharedWorker reads
``GET /v1/runs/{id}/events`` per run view, resumed with ``Last-Event-ID``), ``GET /v1/runs/{id}/events/{seq}`` (an event's raw frame) and
``POST /v1/runs/{id}/approvals/{approval_id}`` (Grant / Deny), ``GET /v1/evals`` and
``GET /v1/evals/{id}`` (the eval results), ``GET /v1/decisions`` and ``GET /v1/decisions/{id}``
(the decision records). A token typed into the page is
kept in the browser's session storage and sent as ``Authorization: Bearer``; the gateway decides
what it shows, as for any API client. Every answer carries a Content-Security-Policy that allows
the gateway's own origin only.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response

from modelevents.services.gateway.problems import GatewayProblem, ProblemCode

__all__ = ["router", "ASSETS"]

router = APIRouter(tags=["ui"])

_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8"}
# Only the files shipped; nothing else can be asked for by name.
ASSETS = ("index.html", "app.css", "app.js", "api.js", "dom.js", "format.js", "links.js", "state.js",
          "sse.js", "shared.js", "run-wait.js", "stream-worker.js", "views/list.js", "views/run.js",
          "views/cards.js", "views/raw.js", "evals.js", "views/evals.js", "views/chart.js",
          "decisions.js", "views/decisions.js")
_HEADERS = {
    "content-security-policy": ("default-src 'self'; img-src 'self' data:; "
                                "style-src 'self'; script-src 'self'; frame-ancestors 'none'"),
    "x-content-type-options": "nosniff", "cache-control": "no-cache",
    "referrer-policy": "no-referrer",
}


def _asset(name: str) -> Response:
    if name not in ASSETS:
        raise GatewayProblem(ProblemCode.not_found, f"no asset {name!r} in the UI; it ships "
                             f"{', '.join(ASSETS)}")
    body = resources.files("modelevents.services.gateway").joinpath("static", name).read_bytes()
    suffix = name[name.rindex("."):]
    return Response(body, media_type=_TYPES[suffix], headers=_HEADERS)


@router.get("/ui", include_in_schema=False)
async def page() -> Response:
    return _asset("index.html")


@router.get("/ui/", include_in_schema=False)
async def page_slash() -> Response:
    return RedirectResponse("/ui", status_code=308)


@router.get("/ui/{name:path}", include_in_schema=False)
async def asset(name: str) -> Response:
    return _asset(name)
