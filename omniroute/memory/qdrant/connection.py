"""The Qdrant client: a server through the outbound URL guard, or local mode on disk.

Clients are made when first needed and again when the configuration changes, never at start:
local mode locks its folder against every other process (`db upgrade` in a release process
must not take it from the web process). A server's URL is checked by the guard and pinned to
the checked address, the name kept as Host and TLS server name, as provider calls are.
Searches get a client with a short timeout (QDRANT_TIMEOUT_MS), writes one with 10 s. Local
mode is plain Python and not thread-safe: its calls take turns under a lock.

Every failure becomes QdrantUnavailable with a sentence fit for a report; the API key never
appears in one.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from qdrant_client import QdrantClient
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from omniroute.core.net import BlockedURL, PinnedURL, pin_base_url
from omniroute.memory.qdrant.config import QdrantConfig

log = logging.getLogger(__name__)

WRITE_TIMEOUT_SECONDS = 10.0
ERROR_CHARS = 200  # as the reference cuts a health error
T = TypeVar("T")


class QdrantUnavailable(RuntimeError):
    """Qdrant could not do what was asked; the message says why, in one sentence."""


@dataclass(frozen=True)
class Health:
    ok: bool
    latency_ms: float
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        found = {"ok": self.ok, "latencyMs": round(self.latency_ms, 1)}
        return found if self.error is None else {**found, "error": self.error}


class _PinnedTransport(httpx.HTTPTransport):
    """Sends every request to the checked address, with its own timeout."""

    def __init__(self, pinned: PinnedURL, timeout: float) -> None:
        super().__init__()
        self._host = pinned.host
        self._sni = urlsplit(pinned.base_url).hostname if pinned.is_https else None
        self._timeout = httpx.Timeout(timeout).as_dict()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["Host"] = self._host
        request.extensions["timeout"] = self._timeout
        if self._sni:
            request.extensions["sni_hostname"] = self._sni
        return super().handle_request(request)


class QdrantConnection:
    def __init__(self, *, allow_local: bool, search_timeout: float) -> None:
        self._allow_local = allow_local
        self._search_timeout = search_timeout
        self._clients: dict[tuple, QdrantClient] = {}
        self._lock = threading.Lock()  # guards _clients
        self._local_turns = threading.Lock()  # local mode: one call at a time

    def run(self, config: QdrantConfig, work: Callable[[QdrantClient], T], *, search=False) -> T:
        """`work(client)`, its failures as QdrantUnavailable."""
        client = self._client(config, search)
        turns: AbstractContextManager = self._local_turns if config.path else nullcontext()
        try:
            with turns:
                return work(client)
        except QdrantUnavailable:
            raise
        except Exception as exc:  # qdrant-client raises many kinds; each is named below
            raise QdrantUnavailable(describe(exc, config)) from None

    def health(self, config: QdrantConfig) -> Health:
        """A server's GET /readyz (the reference's probe), or local mode's folder opening.

        The probe is a plain request: qdrant-client reads /readyz's text answer as JSON."""
        started = time.perf_counter()
        try:
            if config.path:
                self.run(config, lambda client: client.get_collections())
            else:
                self._ready(config)
        except QdrantUnavailable as exc:
            return Health(False, _ms(started), str(exc)[:ERROR_CHARS])
        return Health(True, _ms(started))

    def _ready(self, config: QdrantConfig) -> None:
        if not config.url:
            raise QdrantUnavailable(
                "Qdrant is not configured: set a host, QDRANT_URL or QDRANT_PATH"
            )
        pinned = self._pinned(config)
        headers = {"api-key": config.api_key} if config.api_key else {}
        transport = _PinnedTransport(pinned, WRITE_TIMEOUT_SECONDS)
        try:
            with httpx.Client(transport=transport, follow_redirects=False) as http:
                response = http.get(f"{pinned.connect_url}/readyz", headers=headers)
        except httpx.HTTPError as exc:
            raise QdrantUnavailable(describe(exc, config)) from None
        if response.status_code != 200:
            raise QdrantUnavailable(
                describe(
                    UnexpectedResponse(
                        response.status_code,
                        response.reason_phrase,
                        response.content,
                        response.headers,
                    ),
                    config,
                )
            )

    def _pinned(self, config: QdrantConfig) -> PinnedURL:
        try:
            return pin_base_url(config.url or "", allow_local=self._allow_local)
        except BlockedURL as exc:
            raise QdrantUnavailable(f"the Qdrant URL is refused: {exc}") from None

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def _client(self, config: QdrantConfig, search: bool) -> QdrantClient:
        if not config.configured:
            raise QdrantUnavailable(
                "Qdrant is not configured: set a host, QDRANT_URL or QDRANT_PATH"
            )
        # One client per configuration (two for a server: searches and writes time out apart).
        current = ("local", config.path) if config.path else ("server", config.url, config.api_key)
        role = False if config.path else search
        with self._lock:
            client = self._clients.get((current, role))
            if client is None:
                for old in [k for k in self._clients if k[0] != current]:
                    self._clients.pop(old).close()  # a configuration that is no longer
                client = self._open(config, search)
                self._clients[(current, role)] = client
            return client

    def _open(self, config: QdrantConfig, search: bool) -> QdrantClient:
        if config.path:
            try:
                if config.path == ":memory:":
                    return QdrantClient(location=":memory:")
                return QdrantClient(path=config.path)
            except RuntimeError as exc:  # "already accessed by another instance"
                raise QdrantUnavailable(
                    f"local mode could not open {config.path}: another process has it open "
                    "(local mode serves one process; use a Qdrant server to share it)"
                ) from exc
        pinned = self._pinned(config)
        timeout = self._search_timeout if search else WRITE_TIMEOUT_SECONDS
        with warnings.catch_warnings():  # "Api key is used with an insecure connection"
            warnings.simplefilter("ignore", UserWarning)
            return QdrantClient(
                url=pinned.connect_url,
                api_key=config.api_key,
                timeout=max(1, int(timeout)),  # its own rounding; the transport's rules
                check_compatibility=False,  # no request behind our back at start
                transport=_PinnedTransport(pinned, timeout),
            )


def describe(exc: Exception, config: QdrantConfig) -> str:
    """One sentence for a failure of a call to Qdrant."""
    where = config.where
    if isinstance(exc, httpx.TimeoutException) or "timed out" in str(exc).lower():
        return f"Qdrant at {where} did not answer in time"
    if isinstance(exc, UnexpectedResponse):
        if exc.status_code in (401, 403):
            return f"Qdrant at {where} refused the API key ({exc.status_code})"
        body = exc.content.decode("utf-8", "replace")[:ERROR_CHARS]
        return f"Qdrant at {where} answered {exc.status_code}: {body}"
    if isinstance(exc, ResponseHandlingException | httpx.HTTPError):
        cause = getattr(exc, "source", None) or exc
        if isinstance(cause, httpx.TimeoutException):
            return f"Qdrant at {where} did not answer in time"
        return f"could not reach Qdrant at {where}: {type(cause).__name__}"
    return f"Qdrant at {where} failed: {type(exc).__name__}: {str(exc)[:ERROR_CHARS]}"


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000
