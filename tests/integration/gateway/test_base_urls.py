"""A provider's base URL as its SDK takes it (issue #16): ``OPENAI_BASE_URL`` ends with ``/v1``
(``https://api.openai.com/v1``, and what ``modelevents simulator`` prints), a Gemini one may
end with ``/v1beta``; the gateway's paths start with the version, so it must not call
``/v1/v1/responses``. Runs against the simulator over real HTTP, with a real worker."""

from __future__ import annotations

import pytest

from modelevents.services.gateway.config import ProviderConfig
from tests.integration.simulated_gateway import (  # noqa: F401 (fixtures)
    GEMINI_KEY,
    OPENAI_KEY,
    neutral,
    settings,
    settled,
    sim,
    simulator,
    start_gateway,
    start_run,
    wait_run,
)

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize(("configured", "provider", "suffix", "key", "api", "scenario"), [
    ("openai", "openai", "/v1", OPENAI_KEY, "openai-responses",
     "sim:openai-responses/text-with-usage"),
    ("openai", "openai", "/v1/", OPENAI_KEY, "openai-chat", "sim:openai-chat/text"),
    ("gemini", "google", "/v1beta", GEMINI_KEY, "gemini-interactions",
     "sim:gemini-interactions/google-search-cited-event-ids"),
], ids=["openai-responses", "openai-chat", "gemini-interactions"])  # not the random keys: xdist
def test_a_base_url_with_its_api_version_reaches_the_provider(
        start_gateway, sim, configured, provider, suffix, key, api, scenario) -> None:
    config = ProviderConfig(base_url=sim.base_url + suffix, api_key=key)
    assert config.base_url == sim.base_url
    gateway = start_gateway(providers={configured: config})
    started = start_run(gateway, neutral(provider, api, scenario))
    body = wait_run(gateway, started["run_id"], settled("completed"), "completion")
    assert body["calls"][-1]["error"] is None, body


def test_a_base_url_that_is_not_http_is_refused_with_the_setting() -> None:
    with pytest.raises(ValueError, match="base_url 'api.openai.com/v1' must start with http"):
        ProviderConfig(base_url="api.openai.com/v1")
