"""Who calls ``/v1/runs…``: the tenant a request acts for.

Without ``api_tokens`` in the gateway config the API is open (the gateway listens on
127.0.0.1 by default) and a request names its tenant itself (default: the gateway's default
tenant). With ``api_tokens`` (tenant → tokens, several during rotation; or
``MODELEVENTS_API_TOKEN`` for the default tenant) every ``/v1/runs…`` request needs
``Authorization: Bearer <token>``: the token decides the tenant, a request naming another tenant
is refused (403), and runs of other tenants are not found (404), so one tenant can neither spend
the providers' keys for another nor read its runs. Tokens are compared in constant time, each
against every configured token.

The token is checked twice: by the app's edge (``services/gateway/app.py``, :func:`token_tenant`)
for every ``/v1/`` request before any of its body is read — an unauthenticated caller cannot make
the gateway hold a body — and by the routes (:func:`caller_tenant`), which need the tenant.
"""

from __future__ import annotations

import hmac

from fastapi import Request

from modelevents.services.errors import Unauthorized
from modelevents.services.gateway.config import GatewayConfig
from modelevents.services.gateway.dependencies import running_gateway
from modelevents.services.gateway.problems import GatewayProblem, ProblemCode

__all__ = ["Unauthorized", "caller_tenant", "may_see", "token_tenant"]

def token_tenant(config: GatewayConfig, authorization: str) -> str:
    """The tenant whose token the ``Authorization`` header value carries; :class:`Unauthorized`
    when it carries none of ``config.api_tokens`` (which must not be empty)."""
    scheme, _, offered = authorization.partition(" ")
    if scheme.lower() != "bearer" or not offered.strip():
        raise Unauthorized("this gateway requires Authorization: Bearer <token> on /v1/ "
                           "(a token from api_tokens in its config)")
    offered_bytes = offered.strip().encode("utf-8", "surrogateescape")
    found = None
    for tenant, tokens in config.api_tokens.items():
        for token in tokens:
            # No early exit: the time taken does not say which token (or whether one) matched.
            if hmac.compare_digest(token.get_secret_value().encode(), offered_bytes):
                found = tenant
    if found is None:
        raise Unauthorized("the bearer token is not one of this gateway's api_tokens; send a "
                           "token from its config")
    return found


def caller_tenant(request: Request, asked: str | None = None) -> str:
    """The request's tenant (see the module docstring); raises 401/403."""
    config = running_gateway(request).config
    if not config.api_tokens:
        return asked or config.default_tenant
    try:
        found = token_tenant(config, request.headers.get("authorization", ""))
    except Unauthorized as exc:
        raise GatewayProblem(ProblemCode.unauthorized, str(exc)) from None
    if asked is not None and asked != found:
        raise GatewayProblem(ProblemCode.forbidden, f"the token is tenant {found!r}'s; it cannot "
                             f"act for tenant {asked!r}")
    return found


def may_see(request: Request, run_tenant: str | None) -> bool:
    """Whether the caller may see a run of ``run_tenant`` (None: not known yet)."""
    if not running_gateway(request).config.api_tokens or run_tenant is None:
        return True
    return caller_tenant(request) == run_tenant
