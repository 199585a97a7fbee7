"""Who calls ``/v1/runs…``: the tenant a request acts for.

Without ``api_tokens`` in the gateway config the API is open (the gateway listens on
127.0.0.1 by default) and a request names its tenant itself (default: the gateway's default
tenant). With ``api_tokens`` (tenant → tokens, several during rotation; or
``MODELEVENTS_API_TOKEN`` for the default tenant) every ``/v1/runs…`` request needs
``Authorization: Bearer <token>``: the token decides the tenant, a request naming another tenant
is refused (403), and runs of other tenants are not found (404), so one tenant can neither spend
the providers' keys for another nor read its runs. Tokens are compared in constant time, each
against every configured token.
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request

from modelevents.services.gateway.state import gateway_of

__all__ = ["caller_tenant", "may_see"]


def caller_tenant(request: Request, asked: str | None = None) -> str:
    """The request's tenant (see the module docstring); raises 401/403."""
    config = gateway_of(request).config
    if not config.api_tokens:
        return asked or config.default_tenant
    header = request.headers.get("authorization", "")
    scheme, _, offered = header.partition(" ")
    if scheme.lower() != "bearer" or not offered:
        raise HTTPException(401, detail="this gateway requires Authorization: Bearer <token> on "
                                        "/v1/runs (a token from api_tokens in its config)",
                            headers={"WWW-Authenticate": "Bearer"})
    found = None
    for tenant, tokens in config.api_tokens.items():
        for token in tokens:
            # No early exit: the time taken does not say which token (or whether one) matched.
            if hmac.compare_digest(token.get_secret_value().encode(), offered.strip().encode()):
                found = tenant
    if found is None:
        raise HTTPException(401, detail="the bearer token is not one of this gateway's "
                                        "api_tokens", headers={"WWW-Authenticate": "Bearer"})
    if asked is not None and asked != found:
        raise HTTPException(403, detail=f"the token is tenant {found!r}'s; it cannot act for "
                                        f"tenant {asked!r}")
    return found


def may_see(request: Request, run_tenant: str | None) -> bool:
    """Whether the caller may see a run of ``run_tenant`` (None: not known yet)."""
    if not gateway_of(request).config.api_tokens or run_tenant is None:
        return True
    return caller_tenant(request) == run_tenant
