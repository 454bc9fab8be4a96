"""Backends made from settings: a `backendConfigs` entry names a generic HTTP backend's
configuration, in the reference's camelCase JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from .generic import (
    DEFAULT_ENDPOINTS,
    DEFAULT_TIMEOUT_MS,
    QUERY_NAMES,
    GenericConfig,
    GenericMemoryBackend,
)

PATH_NAMES = ("id", "memoryId")


class BadBackendConfig(ValueError):
    """A backend's configuration cannot be used; `field` names the part (`baseUrl`, ...)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def generic_config(raw: Mapping[str, Any]) -> GenericConfig:
    """A GenericConfig from `{baseUrl, apiKey?, headers?, timeout? (ms), endpoints?,
    queryParams?, pathParams?}`; anything else is a BadBackendConfig naming the field."""
    if not isinstance(raw.get("baseUrl"), str) or not raw["baseUrl"].strip():
        raise BadBackendConfig("baseUrl", "required: the backend's http(s) URL")
    api_key = raw.get("apiKey")
    if api_key is not None and not isinstance(api_key, str):
        raise BadBackendConfig("apiKey", "must be a string")
    timeout = raw.get("timeout", DEFAULT_TIMEOUT_MS)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 120_000:
        raise BadBackendConfig("timeout", "must be whole milliseconds, 1 to 120000")
    return GenericConfig(
        base_url=raw["baseUrl"].strip(),
        api_key=api_key or None,
        headers=_strings(raw, "headers", None),
        timeout_ms=timeout,
        endpoints=_strings(raw, "endpoints", DEFAULT_ENDPOINTS),
        query_params=_strings(raw, "queryParams", QUERY_NAMES),
        path_params=_strings(raw, "pathParams", PATH_NAMES),
    )


def _strings(raw: Mapping[str, Any], name: str, allowed) -> dict[str, str]:
    value = raw.get(name) or {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise BadBackendConfig(name, "must be an object of strings")
    unknown = sorted(set(value) - set(allowed)) if allowed is not None else []
    if unknown:
        raise BadBackendConfig(f"{name}.{unknown[0]}", f"is not one of {', '.join(allowed)}")
    return dict(value)


def make_backend(
    backend_id: str, raw: Mapping[str, Any], http: httpx.Client, *, allow_local: bool
) -> GenericMemoryBackend:
    name = raw.get("displayName") if isinstance(raw.get("displayName"), str) else backend_id
    return GenericMemoryBackend(
        backend_id, name, generic_config(raw), http, allow_local=allow_local
    )
