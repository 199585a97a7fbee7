"""Who a proxied request is for, and which run it belongs to, from the proxy's own headers.

The client's ``Authorization`` (or ``x-api-key`` …) is its provider key and passes through, so
the gateway's bearer token travels in a header of its own:

    x-modelevents-token   a token of the gateway's ``api_tokens`` (``Bearer <token>`` or the
                          bare token); required when the gateway has tokens, and it decides
                          the tenant
    x-modelevents-tenant  the tenant (must be the token's; without tokens: any tenant id,
                          default the gateway's ``default_tenant``)
    x-modelevents-run-id  the run the call belongs to (several calls of a tool loop may share
                          one); without it every create call starts a run of its own, whose
                          id the answer's ``x-modelevents-run-id`` header carries
"""

from __future__ import annotations

from collections.abc import Mapping

from modelevents.schemas.errors import InvalidId
from modelevents.schemas.ids import check_id
from modelevents.services.errors import Unauthorized
from modelevents.services.gateway.auth import token_tenant
from modelevents.services.gateway.config import GatewayConfig
from modelevents.services.gateway.problems import ProblemCode
from modelevents.services.gateway.proxy.headers import RUN_ID, TENANT, TOKEN

__all__ = ["Refused", "caller_tenant", "asked_run_id"]


class Refused(Exception):
    """A request the proxy answers itself, in the provider's error shape."""

    def __init__(self, code: ProblemCode, message: str,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.code, self.message = code, message
        self.headers = dict(headers or {})  # beside the code's own (a Retry-After of its own)


def caller_tenant(config: GatewayConfig, headers: Mapping[str, str]) -> str:
    asked = headers.get(TENANT) or None
    if asked is not None:
        try:
            check_id(asked, "tenant")
        except InvalidId as exc:
            raise Refused(ProblemCode.malformed_request, f"{TENANT}: {exc}") from None
    if not config.api_tokens:
        return asked or config.default_tenant
    offered = (headers.get(TOKEN) or "").strip()
    if not offered:
        raise Refused(ProblemCode.unauthorized,
                      f"this modelevents gateway requires its token in the {TOKEN} header "
                      "(a token from api_tokens in its config); the Authorization header "
                      "carries the provider key")
    if not offered.lower().startswith("bearer "):
        offered = f"Bearer {offered}"
    try:
        tenant = token_tenant(config, offered)
    except Unauthorized:
        raise Refused(ProblemCode.unauthorized,
                      f"the {TOKEN} header holds no token of this gateway's api_tokens") from None
    if asked is not None and asked != tenant:
        raise Refused(ProblemCode.forbidden, f"the modelevents token is tenant {tenant!r}'s; it "
                                             f"cannot act for tenant {asked!r}")
    return tenant


def asked_run_id(headers: Mapping[str, str]) -> str | None:
    run_id = headers.get(RUN_ID) or None
    if run_id is not None:
        try:
            check_id(run_id)
        except InvalidId as exc:
            raise Refused(ProblemCode.invalid_id, f"{RUN_ID}: {exc}") from None
    return run_id
