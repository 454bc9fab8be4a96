"""HTTP for remote backends: every request through the outbound URL guard, sent to the
checked address, never following a redirect, its failures as BackendErrors; and what every
remote backend is made of (RemoteBackend)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import httpx

from omniroute.core.net import BlockedURL, pin_base_url
from omniroute.memory.backends.base import BackendError, Derived, Health, elapsed_ms


class NotFound(BackendError):
    """The backend answered 404."""


class GuardedHttp:
    def __init__(
        self,
        name: str,
        base_url: str,
        http: httpx.Client,
        *,
        allow_local: bool,
        headers: Mapping[str, str],
        timeout_seconds: float,
    ) -> None:
        self.name = name
        self.base_url = base_url
        self._http = http
        self._allow_local = allow_local
        self._headers = dict(headers)
        self._timeout = timeout_seconds

    def send(self, method: str, path: str, **options: Any) -> httpx.Response:
        """The answer to a 2xx; NotFound on 404, BackendError on any other status (a
        redirect too), a refused URL, a timeout or no connection."""
        try:
            pinned = pin_base_url(self.base_url, allow_local=self._allow_local)
        except BlockedURL as exc:
            raise BackendError(f"{self.name}'s URL is refused: {exc}") from None
        headers = {**self._headers, **options.pop("headers", {})}
        try:
            request = pinned.request(
                self._http, method, path, headers=headers, timeout=self._timeout, **options
            )
        except (ValueError, httpx.InvalidURL) as exc:  # a header or path stored before checks
            raise BackendError(f"{self.name}'s request cannot be made: {exc}") from None
        try:
            response = self._http.send(request, follow_redirects=False)
        except httpx.TimeoutException:
            raise BackendError(f"{self.name} did not answer in time.") from None
        except httpx.HTTPError as exc:
            raise BackendError(
                f"Could not reach {self.name} at {self.base_url}: {type(exc).__name__}."
            ) from None
        if response.status_code == 404:
            raise NotFound(f"HTTP 404: {response.text[:500]}")
        if not 200 <= response.status_code < 300:
            raise BackendError(f"HTTP {response.status_code}: {response.text[:500]}")
        return response

    def check(self, path: str) -> tuple[Health, Any]:
        """A GET of `path` as a health check: its Health (with latency), and its JSON (None
        for a body that is not JSON: a plain "OK" is healthy too)."""
        started = time.perf_counter()
        try:
            response = self.send("GET", path)
        except BackendError as exc:
            return Health(False, elapsed_ms(started), str(exc)), None
        try:
            answer = response.json() if response.content else None
        except ValueError:
            answer = None
        return Health(True, elapsed_ms(started)), answer

    def json(self, method: str, path: str, **options: Any) -> Any:
        """The decoded JSON of a 2xx answer; None for 204 or an empty body."""
        response = self.send(method, path, **options)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise BackendError(f"{self.name} sent a body that is not JSON.") from None


class RemoteBackend(Derived):
    """A remote backend's id, name and GuardedHttp, with its API key as a Bearer token; the
    calls beyond its seven are derived from them."""

    def __init__(
        self,
        backend_id: str,
        display_name: str,
        base_url: str,
        http: httpx.Client,
        *,
        allow_local: bool,
        api_key: str | None,
        timeout_seconds: float,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.id = backend_id
        self.display_name = display_name
        sent = {**(headers or {}), **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
        self._http = GuardedHttp(
            display_name,
            base_url,
            http,
            allow_local=allow_local,
            headers=sent,
            timeout_seconds=timeout_seconds,
        )
