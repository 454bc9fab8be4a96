"""Calling a provider's OpenAI-compatible API, and turning its failures into clear answers."""

from __future__ import annotations

import json
from typing import Any

import httpx

from ..net import BlockedURL, check_base_url
from .providers import Provider


class UpstreamFailure(Exception):
    """The provider could not be reached or did not answer; `status` is ours to return."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def open_chat_completion(
    client: httpx.Client, provider: Provider, body: dict[str, Any], *, allow_local: bool
) -> httpx.Response:
    """POST the body to the provider and return the response with its body still unread.

    The caller must close the response. Refused connections raise UpstreamFailure(502),
    timeouts UpstreamFailure(504); an upstream error status is returned, not raised.
    """
    try:
        base_url = check_base_url(provider.base_url, allow_local=allow_local)
    except BlockedURL as exc:
        raise UpstreamFailure(502, f"Provider {provider.id}'s URL is refused: {exc}") from None
    headers = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
    if provider.api_key:
        headers["Authorization"] = f"Bearer {provider.api_key}"
    request = client.build_request(
        "POST", f"{base_url}/chat/completions", json=body, headers=headers
    )
    try:
        return client.send(request, stream=True)
    except httpx.TimeoutException:
        raise UpstreamFailure(
            504, f"Provider {provider.id} did not answer in time ({base_url})."
        ) from None
    except httpx.HTTPError as exc:
        raise UpstreamFailure(
            502, f"Could not reach provider {provider.id} at {base_url}: {type(exc).__name__}."
        ) from None


def error_body(provider: Provider, response: httpx.Response) -> dict[str, Any]:
    """The upstream's own OpenAI-style error when it sent one, else one that quotes it."""
    raw = response.read()
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = None
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        error = payload["error"]
        error.setdefault("message", f"Provider {provider.id} answered {response.status_code}.")
        error.setdefault("type", "upstream_error")
        error.setdefault("details", [])
        return {"error": error}
    text = raw.decode("utf-8", "replace").strip()[:500]
    return {
        "error": {
            "message": f"Provider {provider.id} answered {response.status_code}: {text}",
            "type": "upstream_error",
            "details": [],
        }
    }
