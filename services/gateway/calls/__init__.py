"""The provider calls the gateway makes for runs it starts: routed, sent, read, recorded, and
shared by every replica.

* ``router.py``       — which provider API and model a neutral request goes to
* ``capabilities.py`` — the capability manifest the router reads (``capabilities.yaml`` beside it)
* ``egress.py``       — the hosted-tool egress policy, decided before anything is sent
* ``runner.py``       — one provider call: send it, read it (stream, resume, poll), publish frames
* ``http.py``         — the providers' HTTP: endpoints, credentials, retries
* ``fetch.py``        — fetching an object a webhook names but does not carry
* ``in_flight.py``    — the calls this process made, per run (``LocalRuns``)
* ``records.py``      — the calls records on the compacted ``calls`` topic (``CallsView``)
* ``handover.py``     — what replicas do with those records: claim, lease, take up, cancel
* ``idempotency.py``  — ``Idempotency-Key`` of ``POST /v1/runs`` on every replica
* ``host.py``         — what ``handover`` and ``idempotency`` need of the running gateway
"""
