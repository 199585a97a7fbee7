"""A proxied background response read through another gateway replica (issue #29): the replica
that did not create it does not know the object's run, so it files the polls under the object
id and the worker finds the run that announced the object. Its own module: the simulator replays
one object id for every run of a recording, and these topics must hold only this run's."""

from __future__ import annotations

import secrets

import openai
import pytest

from tests.integration.gateway.proxy_clients import (
    RUN_ID_HEADER,
    Keeping,
    proxy_urls,
    wait_state,
)
from tests.integration.simulated_gateway import (  # noqa: F401 (fixtures)
    settings,
    sim,
    simulator,
    start_gateway,
)

pytestmark = pytest.mark.kafka

CLIENT_KEY = "sk-client-" + secrets.token_hex(8)


def test_a_background_response_retrieved_through_another_replica_ends_its_run(
        start_gateway, sim) -> None:
    creating, polling = start_gateway(), start_gateway()
    keeping = Keeping()
    created = openai.OpenAI(base_url=proxy_urls(creating)["openai"], api_key=CLIENT_KEY,
                            max_retries=0, http_client=keeping.client()).responses.create(
        model="sim:openai-responses/background-8-polls", input="hi", background=True)
    run_id = keeping.exchanges[0].headers[RUN_ID_HEADER]
    other = openai.OpenAI(base_url=proxy_urls(polling)["openai"], api_key=CLIENT_KEY,
                          max_retries=0)
    response = created
    while response.status in ("queued", "in_progress"):
        response = other.responses.retrieve(created.id)
    assert response.output_text == "Hello, wörld 👋"
    # The replica that did not create it files the polls under the object's run.
    assert wait_state(creating, run_id, ("completed",))["status"] == "completed"
