"""The drop-in proxy: provider-compatible endpoints under ``/proxy/{upstream}/…``, so an
application adopts modelevents by changing its SDK's base URL (docs/drop-in.md).

* ``relay.py``        — one proxied request: checked, sent, relayed byte for byte, teed
* ``framer.py``       — the relayed bytes cut into ProviderFrames as they arrive
* ``tee.py``          — ``FrameTee``: frames to Kafka without the client waiting (``ProducerTee``)
* ``hub.py``          — what proxied requests share: upstreams, the tee, objects' runs
* ``headers.py``      — which headers cross, each way; the proxy's own header names
* ``identity.py``     — the caller's tenant and run id from the proxy's headers
* ``requirements.py`` — what a provider-native request needs, for the capability router
* ``errors.py``       — the proxy's refusals in each provider's error shape

The routes are ``routes/proxy_openai.py``, ``proxy_anthropic.py`` and ``proxy_gemini.py``.
"""
