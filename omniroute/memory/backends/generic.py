"""GenericMemoryBackend: any REST memory service as a backend (REFERENCE section 13).

`backendType` (default `generic`) says what the service is (`mem0`, `zep`, ...): logs and
the backend list name it beside the id. Endpoints (defaults: `/memories/search`,
`/memories` to create and list, `/memories/{id}` to get, update and delete, `/health`)
may be changed in the config; a `{name}` in one is the memory's id when the name is `id`,
`memoryId` or one `pathParams` maps them to. Query parameter names may be remapped with
`queryParams`. Requests carry JSON, the custom `headers`, then `Authorization: Bearer
<apiKey>`. A 404 reads as "no such memory"; any other answer outside 2xx is a BackendError
with its status and body; 204 is no body. Before its first call, and after a failed one,
the backend checks `/health` and refuses with "Cannot connect to ..." while that fails.

Unlike the reference, every request goes through the outbound URL guard (metadata
addresses always refused, local ones unless allowed), to the address the guard checked,
and a redirect is an error, never followed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from omniroute.memory.backends.base import (
    BackendError,
    BackendUnavailable,
    Health,
    ListQuery,
    NewMemory,
    SearchQuery,
)
from omniroute.memory.backends.guarded import NotFound, RemoteBackend
from omniroute.memory.backends.wire import (
    changes_json,
    memories_from_json,
    memory_from_json,
    new_memory_json,
    page_from_json,
)
from omniroute.memory.model import Memory, MemoryPage

DEFAULT_TIMEOUT_MS = 30_000
DEFAULT_ENDPOINTS = {
    "search": "/memories/search",
    "create": "/memories",
    "list": "/memories",
    "get": "/memories/{id}",
    "update": "/memories/{id}",
    "delete": "/memories/{id}",
    "health": "/health",
}
QUERY_NAMES = (
    "query", "apiKeyId", "limit", "offset", "strategy", "maxTokens", "type", "sessionId",
    "orderBy", "orderDir", "options", "category", "userId",
)  # fmt: skip
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class GenericConfig:
    base_url: str
    api_key: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    endpoints: Mapping[str, str] = field(default_factory=dict)
    query_params: Mapping[str, str] = field(default_factory=dict)
    path_params: Mapping[str, str] = field(default_factory=dict)
    backend_type: str = "generic"  # what the service is, for logs and the backend list

    def endpoint(self, name: str) -> str:
        return self.endpoints.get(name) or DEFAULT_ENDPOINTS[name]


class GenericMemoryBackend(RemoteBackend):
    def __init__(
        self,
        backend_id: str,
        display_name: str,
        config: GenericConfig,
        http: httpx.Client,
        *,
        allow_local: bool,
    ) -> None:
        super().__init__(
            backend_id,
            display_name,
            config.base_url,
            http,
            allow_local=allow_local,
            api_key=config.api_key,
            timeout_seconds=config.timeout_ms / 1000,
            headers={"Content-Type": "application/json", **config.headers},
        )
        self.backend_type = config.backend_type
        self.config = config
        self._ready = False

    # -- life cycle -----------------------------------------------------------------------

    def initialize(self) -> None:
        """Check /health; raise BackendUnavailable while it fails."""
        health = self.health()
        if not health.ok:
            raise BackendUnavailable(
                f"Cannot connect to {self.display_name} at {self.config.base_url}: {health.message}"
            )
        self._ready = True

    def shutdown(self) -> None:
        self._ready = False

    def health(self) -> Health:
        return self._http.check(self.config.endpoint("health"))[0]

    # -- memories -------------------------------------------------------------------------

    def create(self, memory: NewMemory) -> Memory:
        answer = self._call("POST", self.config.endpoint("create"), json=new_memory_json(memory))
        return memory_from_json(answer)

    def get(self, memory_id: str) -> Memory | None:
        answer = self._call("GET", self._path("get", memory_id), missing=None)
        return None if answer is None else memory_from_json(answer)

    def update(self, memory_id: str, changes: Mapping[str, Any]) -> bool:
        path = self._path("update", memory_id)
        return self._call("PATCH", path, json=changes_json(changes), missing=False) is not False

    def delete(self, memory_id: str) -> bool:
        return self._call("DELETE", self._path("delete", memory_id), missing=False) is not False

    def list(self, query: ListQuery) -> MemoryPage:
        params = self._params(
            apiKeyId=query.api_key_id,
            type=query.type,
            sessionId=query.session_id,
            query=query.query,
            limit=query.limit,
            offset=query.offset,
            orderBy=query.order_by,
            orderDir=query.order_dir,
            userId=query.user_id,
        )
        return page_from_json(self._call("GET", self.config.endpoint("list"), params=params))

    def search(self, query: SearchQuery) -> list[Memory]:
        params = self._params(
            query=query.query,
            apiKeyId=query.api_key_id,
            userId=query.user_id,
            limit=query.limit or None,
            maxTokens=query.max_tokens or None,
            strategy=query.strategy or None,
            options=json.dumps(dict(query.options)) if query.options else None,
        )
        return memories_from_json(self._call("GET", self.config.endpoint("search"), params=params))

    # -- HTTP -----------------------------------------------------------------------------

    def _path(self, endpoint: str, memory_id: str) -> str:
        names = {"id", "memoryId", *self.config.path_params.values()}
        value = quote(memory_id, safe="")
        return _PLACEHOLDER.sub(
            lambda m: value if m[1] in names else m[0], self.config.endpoint(endpoint)
        )

    def _params(self, **values: Any) -> dict[str, str]:
        """The given values under their (remapped) query names; None and "" left out."""
        names = self.config.query_params
        return {
            names.get(name, name): str(value)
            for name, value in values.items()
            if value is not None and value != ""
        }

    def _call(self, method: str, path: str, *, missing: Any = ..., **options: Any) -> Any:
        """A memory call: initialised first; a 404 is `missing` when given, else an error."""
        if not self._ready:
            self.initialize()
        try:
            return self._http.json(method, path, **options)
        except NotFound as exc:
            if missing is ...:
                raise BackendError(str(exc)) from None
            return missing
        except BackendError:
            self._ready = False  # the next call checks health again
            raise
