"""When the provider fails: its errors, limits and refusals reach the client as they should
(the official openai SDK -> our server -> the fake upstream, as in test_gateway.py)."""

import httpx
import openai
import pytest

from tests import test_gateway

# The gateway's fixtures, shared with test_gateway.py.
USER, client, key, svc = test_gateway.USER, test_gateway.client, test_gateway.key, test_gateway.svc

pytestmark = pytest.mark.both_stores


def test_upstream_errors_come_back_with_their_status_and_message(client):
    with pytest.raises(openai.RateLimitError, match="Rate limit reached"):
        client.chat.completions.create(model="fake/fail-429", messages=USER)
    with pytest.raises(openai.InternalServerError, match="upstream exploded"):
        client.chat.completions.create(model="fake/fail-500", messages=USER)


def test_the_providers_limits_reach_the_client(client, gateway, key):
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="fake/fail-429", messages=USER)
    headers = caught.value.response.headers
    assert headers["retry-after"] == "7"
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert headers["x-ratelimit-reset-requests"] == "7s"
    answer = client.chat.completions.with_raw_response.create(model="fake/m", messages=USER)
    assert answer.headers["x-ratelimit-limit-requests"] == "500"
    streamed = httpx.post(
        f"{gateway.url}/v1/chat/completions",
        json={"model": "fake/m", "messages": USER, "stream": True},
        headers={"Authorization": f"Bearer {key[1]}"},
    )
    assert streamed.headers["x-ratelimit-remaining-requests"] == "499"


def test_a_provider_refusing_our_key_is_a_502_not_the_clients_401(client):
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="fake/fail-401", messages=USER)
    assert caught.value.status_code == 502
    assert not isinstance(caught.value, openai.AuthenticationError)
    assert "Provider fake refused the gateway's API key for it (401" in caught.value.message
    assert "Incorrect API key provided" in caught.value.message
    assert caught.value.code == "upstream_auth"


def test_a_refused_connection_is_a_502(client, svc):
    svc.providers.save("down", {"base_url": "http://127.0.0.1:1/v1"})
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="down/m", messages=USER)
    assert caught.value.status_code == 502
    assert "Could not reach provider down" in caught.value.message


def test_an_upstream_redirect_is_a_502_and_is_not_followed(client, upstream, svc):
    svc.providers.save("moved", {"base_url": f"{upstream.base_url}/moved"})
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="moved/m", messages=USER)
    assert caught.value.status_code == 502
    assert "redirect" in caught.value.message
    assert [r["path"] for r in upstream.requests] == ["/v1/moved/chat/completions"]


def test_a_slow_upstream_is_a_504(client, upstream, svc):
    svc.http.timeout = httpx.Timeout(0.3, connect=1)
    upstream.slow_seconds = 1.5
    with pytest.raises(openai.APIStatusError) as caught:
        client.chat.completions.create(model="fake/slow", messages=USER)
    assert caught.value.status_code == 504
    assert "did not answer in time" in caught.value.message
