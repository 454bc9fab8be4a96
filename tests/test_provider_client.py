"""ProviderClient: the one way out to a provider, against a real loopback server."""

from __future__ import annotations

import httpx
import pytest

from omniroute.providers.client import (
    BAD_RESPONSE,
    HTTP_ERROR,
    NO_KEY,
    RATE_LIMITED,
    REFUSED,
    TIMEOUT,
    UNREACHABLE,
    ProviderClient,
    ProviderError,
)
from omniroute.providers.registry import Provider


@pytest.fixture
def client():
    http = httpx.Client(follow_redirects=False, timeout=5)
    yield ProviderClient(http, allow_local=True)
    http.close()


@pytest.fixture
def provider(upstream) -> Provider:
    return Provider(id="up", base_url=upstream.base_url, api_key="sk-up-1234")


def test_a_call_sends_json_with_the_providers_key_and_returns_the_answer(
    client, provider, upstream
):
    answer = client.post_json(provider, "/embeddings", {"model": "e", "input": ["hi"]})
    assert len(answer["data"]) == 1
    sent = upstream.requests[-1]
    assert sent["path"] == "/v1/embeddings"
    assert sent["headers"]["Authorization"] == "Bearer sk-up-1234"
    assert sent["headers"]["Content-Type"] == "application/json"


def test_a_provider_without_a_key_sends_no_authorization(client, upstream):
    keyless = Provider(id="up", base_url=upstream.base_url)
    client.post_json(keyless, "/embeddings", {"model": "e", "input": ["hi"]})
    assert "Authorization" not in upstream.requests[-1]["headers"]


@pytest.mark.parametrize(
    ("path", "model", "kind", "status"),
    [
        ("/embeddings", "fail-401", NO_KEY, 401),
        ("/embeddings", "fail-429", RATE_LIMITED, 429),
        ("/rerank", "fail-500", HTTP_ERROR, 500),
        ("/text", "m", BAD_RESPONSE, 200),
        ("/moved", "m", HTTP_ERROR, 307),
    ],
)
def test_each_failure_has_its_kind(client, provider, upstream, path, model, kind, status):
    with pytest.raises(ProviderError) as caught:
        client.post_json(provider, path, {"model": model, "input": ["x"], "documents": ["x"]})
    assert (caught.value.kind, caught.value.status) == (kind, status)
    assert caught.value.message.startswith("Provider up ")


def test_a_redirect_is_never_followed(client, provider, upstream):
    response = client.open(provider, "/moved", {"model": "m"})
    response.close()
    assert response.status_code == 307
    assert [r["path"] for r in upstream.requests] == ["/v1/moved"]


def test_a_slow_provider_is_a_timeout(client, provider, upstream):
    upstream.slow_seconds = 1.0
    with pytest.raises(ProviderError) as caught:
        client.post_json(provider, "/embeddings", {"model": "slow", "input": ["x"]}, timeout=0.2)
    assert caught.value.kind == TIMEOUT and "did not answer in time" in caught.value.message


def test_a_refused_connection_is_unreachable(client):
    down = Provider(id="down", base_url="http://127.0.0.1:1/v1")
    with pytest.raises(ProviderError) as caught:
        client.post_json(down, "/embeddings", {})
    assert caught.value.kind == UNREACHABLE
    assert "Could not reach provider down" in caught.value.message


@pytest.mark.parametrize(
    ("base_url", "allow_local"),
    [
        ("http://169.254.169.254/v1", True),  # metadata: always refused
        ("http://metadata.google.internal/v1", True),
        ("http://127.0.0.1:9/v1", False),  # local, and local is not allowed
        ("file:///etc/passwd", True),
    ],
)
def test_the_url_guard_refuses_before_anything_is_sent(base_url, allow_local):
    with httpx.Client() as http:
        guarded = ProviderClient(http, allow_local=allow_local)
        with pytest.raises(ProviderError) as caught:
            guarded.open(Provider(id="p", base_url=base_url), "/chat/completions", {})
    assert caught.value.kind == REFUSED and "URL is refused" in caught.value.message
