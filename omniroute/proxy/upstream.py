"""Calling a provider's OpenAI-compatible API, and turning its failures into clear answers."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
from flask import Response
from flask_smorest import abort

from ..metrics import UPSTREAM_ERRORS
from ..providers.client import TIMEOUT, ProviderClient, ProviderError
from ..providers.registry import Provider

log = logging.getLogger(__name__)


class UpstreamFailure(Exception):
    """The provider could not be reached or did not answer; `status` is ours to return."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def open_upstream(
    client: ProviderClient, provider: Provider, path: str, body: dict[str, Any]
) -> httpx.Response:
    """POST the body to the provider's `path` and return the response, its body unread.

    The caller must close the response. A refused URL or connection raises
    UpstreamFailure(502), a timeout UpstreamFailure(504); an upstream error status is
    returned, not raised. The bytes are relayed as they come, so they are asked for unencoded.
    """
    try:
        return client.open(provider, path, body, headers={"Accept-Encoding": "identity"})
    except ProviderError as exc:
        UPSTREAM_ERRORS.labels(provider.id, exc.kind).inc()
        log.warning(
            "provider %s failed (%s): %s",
            provider.id,
            exc.kind,
            exc.message,
            extra={"provider": provider.id, "upstream_status": exc.kind},
        )
        raise UpstreamFailure(504 if exc.kind == TIMEOUT else 502, exc.message) from None


# The provider's word on its limits, passed on to the client (the SDK's retries read them).
RELAYED_HEADERS = ("retry-after", "retry-after-ms")
RELAYED_PREFIX = "x-ratelimit-"


def relayed_headers(response: httpx.Response) -> dict[str, str]:
    """The upstream's Retry-After and x-ratelimit-* headers, to answer the client with."""
    return {
        name: value
        for name, value in response.headers.items()
        if name.lower() in RELAYED_HEADERS or name.lower().startswith(RELAYED_PREFIX)
    }


def refused_our_key(provider: Provider, payload: dict[str, Any], status: int) -> dict[str, Any]:
    """A 401 or 403 from the provider refuses the gateway's key for it, not the client's: the
    client gets a 502 that says so (a 401 would make it doubt its own gateway key)."""
    words = payload["error"].get("message", "")
    return {
        "error": {
            "message": f"Provider {provider.id} refused the gateway's API key for it ({status}: "
            f"{words}); an admin must fix the provider's apiKey.",
            "type": "upstream_error",
            "code": "upstream_auth",
            "details": [],
        }
    }


def refusal(provider: Provider, upstream: httpx.Response, headers: dict[str, str]):
    """The answer to give when the provider did not succeed (None when it did): a redirect is
    a 502 (never followed), our key refused a 502 that says so, any other error the
    provider's own status and words. Closes the upstream response when it answers."""
    status = upstream.status_code
    if 300 <= status < 400:
        location = upstream.headers.get("location", "")
        upstream.close()
        abort(
            502,
            message=f"Provider {provider.id} answered {status} (a redirect to "
            f"{location or 'nowhere'}), which the gateway does not follow: fix its baseUrl.",
            code="upstream_redirect",
        )
    if status < 400:
        return None
    UPSTREAM_ERRORS.labels(provider.id, str(status)).inc()
    try:
        payload = error_body(provider, upstream)
    finally:
        upstream.close()
    log.warning(
        "provider %s answered %s: %s",
        provider.id,
        status,
        payload["error"]["message"][:200],
        extra={"provider": provider.id, "upstream_status": status},
    )
    if status in (401, 403):
        payload, status = refused_our_key(provider, payload, status), 502
    return Response(json.dumps(payload), status, headers, mimetype="application/json")


def error_body(provider: Provider, response: httpx.Response) -> dict[str, Any]:
    """The upstream's own OpenAI-style error when it sent one, else one that quotes it."""
    raw = response.read()
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = None
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        error = payload["error"]
        # The provider's own words and fields stay; the ones our error shape names are made
        # to fit it (OpenAI sends "type": null at times).
        if not isinstance(error.get("message"), str):
            error["message"] = f"Provider {provider.id} answered {response.status_code}."
        if not isinstance(error.get("type"), str):
            error["type"] = "upstream_error"
        if not isinstance(error.get("details"), list):
            error["details"] = []
        if "code" in error and not isinstance(error["code"], str | None):
            error["code"] = str(error["code"])
        return {"error": error}
    text = raw.decode("utf-8", "replace").strip()[:500]
    return {
        "error": {
            "message": f"Provider {provider.id} answered {response.status_code}: {text}",
            "type": "upstream_error",
            "details": [],
        }
    }
