"""The gateway's HTTP routes, one module per resource, each an ``APIRouter`` named ``router``
that ``app.py`` mounts (``ROUTERS``). A route reads the request, asks the packages below
(``calls``, ``events``, ``inputs``) and answers; it holds no state of its own.

* ``runs.py``             — ``POST /v1/runs`` (start), ``GET /v1/runs/{id}[/events|/messages]``,
  ``POST /v1/runs/{id}/cancel`` and ``/reconcile``
* ``run_list.py``         — ``GET /v1/runs``: the runs a caller may see, paged (and watched)
* ``event_frames.py``     — ``GET /v1/runs/{id}/events/{seq}``: one event and its raw frame
* ``event_streams.py``    — ``GET /v1/events?run=…``: several runs' events on one SSE stream
* ``approvals.py``        — ``POST /v1/runs/{id}/approvals/{approval_id}``: grant or deny
* ``webhooks.py``         — ``POST /webhooks/{provider}[/{tenant}]``: signed provider webhooks
* ``forwarded_frames.py`` — ``POST /v1/runs/{id}/frames``: streams an application tees to us
* ``forwarded_input.py``  — ``POST /v1/runs/{id}/input``: the input packet of such a run
* ``proxy_openai.py``, ``proxy_anthropic.py``, ``proxy_gemini.py`` — ``/proxy/{upstream}/…``:
  the providers' own endpoints, relayed and teed (``../proxy/``, docs/drop-in.md)
* ``health.py``           — ``GET /healthz``, ``GET /readyz`` (and the readiness check runs use)
* ``ui.py``               — ``GET /ui``: the operator's page (``../static/``)
* ``openapi.py``          — ``GET /openapi.json`` and ``GET /docs``, offline
"""
