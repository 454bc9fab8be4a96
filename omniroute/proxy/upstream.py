"""Calling a provider's OpenAI-compatible API, and turning its failures into clear answers."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

import anyio
import httpx

from omniroute.core.errors import error_payload
from omniroute.core.metrics import UPSTREAM_ERRORS
from omniroute.core.providers.client import TIMEOUT, UNREACHABLE, ProviderClient, ProviderError
from omniroute.core.providers.registry import Provider

log = logging.getLogger(__name__)


class UpstreamFailure(Exception):
    """The provider could not be reached or did not answer; `status` is ours to return."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def prepare_upstream(
    client: ProviderClient, provider: Provider, path: str, body: dict[str, Any]
) -> httpx.Request:
    """The POST of the body to the provider's `path`, its URL checked (a refused one raises
    UpstreamFailure(502)). The bytes are relayed as they come, so they are asked for
    unencoded."""
    try:
        return client.prepare(provider, path, body, headers={"Accept-Encoding": "identity"})
    except ProviderError as exc:
        raise _failure(provider, exc) from None


def open_upstream(client: ProviderClient, provider: Provider, request: httpx.Request):
    """Send a prepared request and return the response, its body unread (the caller closes
    it). A refused connection raises UpstreamFailure(502), a timeout UpstreamFailure(504); an
    upstream error status is returned, not raised."""
    try:
        return client.send(provider, request)
    except ProviderError as exc:
        raise _failure(provider, exc) from None


async def open_upstream_async(client: ProviderClient, provider: Provider, request: httpx.Request):
    """`open_upstream` on the event loop."""
    try:
        return await client.send_async(provider, request)
    except ProviderError as exc:
        raise _failure(provider, exc) from None


def fetch(client: ProviderClient, provider: Provider, request: httpx.Request) -> Answer:
    """Send a prepared request and read its whole answer (UpstreamFailure if none came)."""
    upstream = open_upstream(client, provider, request)
    return answer_of(provider, upstream, read_whole(provider, upstream))


async def fetch_async(client: ProviderClient, provider: Provider, request: httpx.Request):
    """`fetch` on the event loop."""
    upstream = await open_upstream_async(client, provider, request)
    return answer_of(provider, upstream, await read_whole_async(provider, upstream))


def read_whole(provider: Provider, upstream: httpx.Response) -> bytes:
    """The response's whole body; closes it. A connection that breaks raises UpstreamFailure."""
    try:
        return upstream.read()
    except httpx.HTTPError as exc:
        raise _broken(provider, exc) from None
    finally:
        upstream.close()


async def read_whole_async(provider: Provider, upstream: httpx.Response) -> bytes:
    """`read_whole` on the event loop."""
    try:
        return await upstream.aread()
    except httpx.HTTPError as exc:
        raise _broken(provider, exc) from None
    finally:
        with anyio.CancelScope(shield=True):  # a cancelled read still closes the connection
            await upstream.aclose()


def _broken(provider: Provider, exc: httpx.HTTPError) -> UpstreamFailure:
    kind = TIMEOUT if isinstance(exc, httpx.TimeoutException) else UNREACHABLE
    message = f"Provider {provider.id}'s answer broke off: {type(exc).__name__}."
    return _failure(provider, ProviderError(kind, message))


def _failure(provider: Provider, exc: ProviderError) -> UpstreamFailure:
    UPSTREAM_ERRORS.labels(provider.id, exc.kind).inc()
    log.warning(
        "provider %s failed (%s): %s",
        provider.id,
        exc.kind,
        exc.message,
        extra={"provider": provider.id, "upstream_status": exc.kind},
    )
    return UpstreamFailure(504 if exc.kind == TIMEOUT else 502, exc.message)


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


def refused(upstream: httpx.Response) -> bool:
    """Whether the provider did not succeed: an error status, or a redirect (never followed)."""
    return upstream.status_code >= 300


def refusal(provider: Provider, upstream: httpx.Response, raw: bytes) -> tuple[int, dict]:
    """The status and error body to answer when the provider did not succeed (its body read
    as `raw`): a redirect is a 502, our key refused a 502 that says so, any other error the
    provider's own status and words."""
    status = upstream.status_code
    if status < 400:
        location = upstream.headers.get("location", "")
        payload = error_payload(
            502,
            f"Provider {provider.id} answered {status} (a redirect to "
            f"{location or 'nowhere'}), which the gateway does not follow: fix its baseUrl.",
        )
        payload["error"]["code"] = "upstream_redirect"
        return 502, payload
    UPSTREAM_ERRORS.labels(provider.id, str(status)).inc()
    payload = error_body(provider, status, raw)
    log.warning(
        "provider %s answered %s: %s",
        provider.id,
        status,
        payload["error"]["message"][:200],
        extra={"provider": provider.id, "upstream_status": status},
    )
    if status in (401, 403):
        payload, status = refused_our_key(provider, payload, status), 502
    return status, payload


@dataclass(frozen=True)
class Answer:
    """A provider's whole answer as the client gets it: its own on success, else an error."""

    status: int
    headers: dict[str, str]
    body: bytes
    content_type: str

    @property
    def ok(self) -> bool:
        return self.status < 300


def answer_of(provider: Provider, upstream: httpx.Response, raw: bytes) -> Answer:
    """What to answer for a provider response whose whole body is `raw`."""
    headers = relayed_headers(upstream)
    if refused(upstream):
        status, payload = refusal(provider, upstream, raw)
        return Answer(status, headers, json.dumps(payload).encode(), "application/json")
    content_type = upstream.headers.get("content-type", "application/json")
    return Answer(upstream.status_code, headers, raw, content_type)


def error_body(provider: Provider, status: int, raw: bytes) -> dict[str, Any]:
    """The upstream's own OpenAI-style error when it sent one, else one that quotes it."""
    try:
        payload = json.loads(raw)
    except ValueError:
        payload = None
    if isinstance(payload, dict) and isinstance(payload.get("error"), dict):
        error = payload["error"]
        # The provider's own words and fields stay; the ones our error shape names are made
        # to fit it (OpenAI sends "type": null at times).
        if not isinstance(error.get("message"), str):
            error["message"] = f"Provider {provider.id} answered {status}."
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
            "message": f"Provider {provider.id} answered {status}: {text}",
            "type": "upstream_error",
            "details": [],
        }
    }
