"""The drop-in proxy's upstreams (services/gateway/upstreams.py, proxy/hub.py): the built-in
names stand for the gateway's providers, a named one needs a base URL, keys are per tenant, and
every key is a secret an input packet never holds."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from modelevents.services.gateway.config import GatewayConfig, ProviderConfig
from modelevents.services.gateway.proxy.hub import ProxyHub
from modelevents.services.gateway.upstreams import ProxyConfig


class _Gateway:
    def __init__(self, config: GatewayConfig) -> None:
        self.config = config


def hub(**proxy: object) -> ProxyHub:
    config = GatewayConfig(
        providers={"openai": ProviderConfig(base_url="https://api.openai.com/v1",
                                            api_key="sk-openai-gateway")},
        proxy=ProxyConfig.model_validate(proxy))
    return ProxyHub(_Gateway(config), tee=None)  # type: ignore[arg-type]


def test_a_built_in_name_is_the_gateways_provider() -> None:
    target = hub().upstream("openai")
    assert target is not None
    assert target.base_url == "https://api.openai.com"
    assert target.key_for("acme") == "sk-openai-gateway"
    assert target.provider("openai-chat") == "openai"
    assert hub().upstream("anthropic") is None  # not configured on this gateway


def test_a_named_upstream_takes_its_base_url_name_and_tenant_keys() -> None:
    proxy = hub(upstreams={"groq": {"base_url": "https://api.groq.com/openai/v1/",
                                    "api_key": "gsk-default", "tenant_keys": {"acme": "gsk-acme"}},
                           "openai": {"tenant_keys": {"acme": "sk-acme"}}})
    groq = proxy.upstream("groq")
    assert groq is not None and groq.base_url == "https://api.groq.com/openai"
    assert groq.provider("openai-chat") == "groq"
    assert (groq.key_for("acme"), groq.key_for("other")) == ("gsk-acme", "gsk-default")
    openai = proxy.upstream("openai")
    assert openai is not None and openai.key_for("acme") == "sk-acme"
    assert openai.key_for("other") == "sk-openai-gateway"
    assert proxy.upstream_names() == ["groq", "openai"]
    assert "sk-acme" in proxy.gateway.config.held_secrets()
    assert "gsk-default" in proxy.gateway.config.held_secrets()


@pytest.mark.parametrize(("upstreams", "says"), [
    ({"vllm": {}}, "upstream 'vllm' needs a base_url"),
    ({"Bad Name": {"base_url": "http://x"}}, "upstream name"),
    ({"x": {"base_url": "localhost:8000"}}, "must start with http"),
    ({"x": {"base_url": "http://x", "provider": "X Y"}}, "not a provider name"),
])
def test_a_bad_upstream_is_refused_with_what_to_change(upstreams, says) -> None:
    with pytest.raises(ValidationError, match=says):
        ProxyConfig.model_validate({"upstreams": upstreams})
