"""The gateway's keys: who may chat through /v1, checked once per request (the brake included)."""

import httpx
import openai
import pytest

from omniroute.core.brake import GuessBrake
from omniroute.mcp.auth import GatewayTokenVerifier

pytestmark = pytest.mark.both_stores

USER = [{"role": "user", "content": "Hello there"}]


@pytest.fixture
def svc(gateway_app):
    return gateway_app.extensions["omniroute"]


@pytest.mark.parametrize("secret", ["", "sk-omr-not-a-key", "admin-token"])
def test_a_missing_or_wrong_key_is_a_401(sdk, secret):
    with pytest.raises(openai.AuthenticationError) as caught:
        sdk(secret or "x").chat.completions.create(model="fake/m", messages=USER)
    assert caught.value.body["code"] == "invalid_api_key"


def test_wrong_keys_on_v1_meet_the_guessing_brake(sdk, gateway):
    # The brake lets a held address try once a second: the first try after the limit counts.
    for n in range(GuessBrake.MAX_FAILURES + 1):
        with pytest.raises(openai.AuthenticationError):
            sdk(f"sk-omr-guess-{n}").chat.completions.create(model="fake/m", messages=USER)
    with pytest.raises(openai.RateLimitError) as caught:
        sdk("sk-omr-guess-last").chat.completions.create(model="fake/m", messages=USER)
    assert int(caught.value.response.headers["Retry-After"]) >= 1
    # The brake is the one /api shares: the admin token's guesses from here wait too.
    held = httpx.get(f"{gateway.url}/api/keys", headers={"Authorization": "Bearer wrong"})
    assert held.status_code == 429


def test_a_v1_request_never_meets_the_mcp_token_check(sdk, svc, monkeypatch):
    """Only /mcp passes MCP's bearer middleware: a chat's key is checked once, by Flask."""

    async def refuse(self, token):
        raise AssertionError("MCP's verifier ran for a /v1 request")

    monkeypatch.setattr(GatewayTokenVerifier, "verify_token", refuse)
    _, secret = svc.keys.create("alice")
    assert sdk(secret).chat.completions.create(model="fake/m", messages=USER).choices


def test_a_revoked_key_stops_working(sdk, svc):
    key, secret = svc.keys.create("alice")
    client = sdk(secret)
    client.chat.completions.create(model="fake/m", messages=USER)
    svc.keys.revoke(key.id)
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="fake/m", messages=USER)
