"""The one way out to a provider: every outbound call (chat, embeddings, rerank) goes here.

The base URL passes the outbound URL guard before each call (names are resolved and every
address checked) and the connection goes to the address that was checked, with the name kept
as Host and as the TLS server name (no second lookup, so no DNS rebinding). The provider's key
goes in a bearer header, redirects are never followed (the shared httpx client is built that
way), and every failure becomes a ProviderError whose `kind` the caller maps to its own answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from omniroute.core.net import BlockedURL, PinnedURL, pin_base_url
from omniroute.core.providers.registry import Provider

# The kinds of ProviderError, in the order a call can meet them.
REFUSED = "refused"  # the URL guard said no
TIMEOUT = "timeout"
UNREACHABLE = "unreachable"
NO_KEY = "no_key"  # 401 or 403: the provider refused our key for it
RATE_LIMITED = "rate_limited"  # 429
HTTP_ERROR = "http_error"  # any other status that is not a success (redirects included)
BAD_RESPONSE = "bad_response"  # a success whose body is not JSON


class ProviderError(Exception):
    """An outbound call failed; `kind` says how, `status` is the provider's, if it answered."""

    def __init__(self, kind: str, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status


class ProviderClient:
    """Outbound calls to providers: blocking ones on `http`, a relayed chat's on `async_http`
    (the web process's event loop, where a stream waits without holding a thread)."""

    def __init__(
        self, http: httpx.Client, *, allow_local: bool, async_http: httpx.AsyncClient | None = None
    ) -> None:
        self._http = http
        self._async_http = async_http
        self._allow_local = allow_local

    def prepare(
        self,
        provider: Provider,
        path: str,
        body: dict[str, Any],
        *,
        timeout: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Request:
        """The POST of `body` to `{baseUrl}{path}`, its URL checked and pinned (a name lookup:
        do it on a thread, never on the event loop). Raises ProviderError when refused."""
        pinned = self._checked(provider)
        return pinned.request(
            self._http,
            "POST",
            path,
            json=body,
            headers={"Content-Type": "application/json", **_auth(provider), **(headers or {})},
            timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
        )

    def open(self, provider: Provider, path: str, body: dict[str, Any], **options: Any):
        """POST `body` to `{baseUrl}{path}` (`prepare`'s options); return the httpx.Response
        with its body still unread.

        The caller must close it. An error status is returned, not raised: a relay passes the
        provider's own error on. Raises ProviderError when no answer came.
        """
        return self.send(provider, self.prepare(provider, path, body, **options))

    def send(self, provider: Provider, request: httpx.Request) -> httpx.Response:
        """Send a prepared request; the response's body is unread (the caller closes it)."""
        with _transport_errors(provider, provider.base_url):
            return self._http.send(request, stream=True)

    async def send_async(self, provider: Provider, request: httpx.Request) -> httpx.Response:
        """`send` on the event loop: the caller reads and closes the response with `a...`."""
        if self._async_http is None:
            raise RuntimeError("this ProviderClient was built without an async client")
        with _transport_errors(provider, provider.base_url):
            return await self._async_http.send(request, stream=True)

    async def aclose(self) -> None:
        if self._async_http is not None:
            await self._async_http.aclose()

    def post_json(
        self, provider: Provider, path: str, body: dict[str, Any], *, timeout: float | None = None
    ) -> Any:
        """POST `body` and return the decoded JSON answer; any failure raises ProviderError."""
        response = self.open(provider, path, body, timeout=timeout)
        try:
            with _transport_errors(provider, provider.base_url):
                response.read()
        finally:
            response.close()
        status = response.status_code
        if not 200 <= status < 300:  # a redirect too: it is never followed
            kind = {401: NO_KEY, 403: NO_KEY, 429: RATE_LIMITED}.get(status, HTTP_ERROR)
            raise ProviderError(kind, f"Provider {provider.id} answered {status}.", status)
        try:
            return response.json()
        except ValueError:
            raise ProviderError(
                BAD_RESPONSE, f"Provider {provider.id} sent a body that is not JSON.", status
            ) from None

    def _checked(self, provider: Provider) -> PinnedURL:
        try:
            return pin_base_url(provider.base_url, allow_local=self._allow_local)
        except BlockedURL as exc:
            raise ProviderError(
                REFUSED, f"Provider {provider.id}'s URL is refused: {exc}"
            ) from None


@contextmanager
def _transport_errors(provider: Provider, url: str) -> Iterator[None]:
    """httpx's failures to connect, send or receive, as ProviderErrors."""
    try:
        yield
    except httpx.TimeoutException:
        raise ProviderError(
            TIMEOUT, f"Provider {provider.id} did not answer in time ({url})."
        ) from None
    except httpx.HTTPError as exc:
        raise ProviderError(
            UNREACHABLE,
            f"Could not reach provider {provider.id} at {url}: {type(exc).__name__}.",
        ) from None


def _auth(provider: Provider) -> dict[str, str]:
    return {"Authorization": f"Bearer {provider.api_key}"} if provider.api_key else {}
