"""Backends made from settings: a `backendConfigs` entry is a generic HTTP backend's
configuration in the reference's camelCase JSON, or, with `"type": "obsidian"`, a vault
behind the Obsidian Local REST API (`{baseUrl, apiKey, folder}`), or with `"type":
"notion"` a Notion database (`{apiKey, databaseId, baseUrl}`)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import httpx
from marshmallow import ValidationError

from omniroute.core.fields import header_value
from omniroute.core.net import HTTP_URL_PATTERN, BlockedURL, check_base_url
from omniroute.memory.backends.generic import (
    DEFAULT_ENDPOINTS,
    DEFAULT_TIMEOUT_MS,
    QUERY_NAMES,
    GenericConfig,
    GenericMemoryBackend,
)
from omniroute.memory.backends.notion import DEFAULT_URL as NOTION_URL
from omniroute.memory.backends.notion import NotionBackend
from omniroute.memory.backends.obsidian import DEFAULT_FOLDER, ObsidianBackend
from omniroute.memory.backends.obsidian import DEFAULT_URL as OBSIDIAN_URL

PATH_NAMES = ("id", "memoryId")
# A backend's id: it names the backend in settings, metrics and answers.
BACKEND_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
BACKEND_ID_SHAPE = "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit"
# An HTTP header's name (RFC 9110's token).
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
GENERIC_FIELDS = frozenset(
    {"type", "baseUrl", "apiKey", "headers", "timeout", "endpoints", "queryParams",
     "pathParams", "displayName"}
)  # fmt: skip


class BadBackendConfig(ValueError):
    """A backend's configuration cannot be used; `field` names the part (`baseUrl`, ...) and
    `status` the HTTP answer."""

    status = 422

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class UnknownBackendName(BadBackendConfig):
    """A setting names a backend that is neither local nor configured."""

    status = 404


class StoredKeyMoved(BadBackendConfig):
    """A masked or left-out key would keep the stored one for a backend's new URL."""

    status = 409


def generic_config(raw: Mapping[str, Any]) -> GenericConfig:
    """A GenericConfig from `{baseUrl, apiKey?, headers?, timeout? (ms), endpoints?,
    queryParams?, pathParams?}`; anything else is a BadBackendConfig naming the field."""
    unknown = sorted(set(raw) - GENERIC_FIELDS)
    if unknown:
        raise BadBackendConfig(unknown[0], "is not a field of a generic backend")
    if not isinstance(raw.get("baseUrl"), str) or not raw["baseUrl"].strip():
        raise BadBackendConfig("baseUrl", "required: the backend's http(s) URL")
    api_key = raw.get("apiKey")
    if api_key is not None and not isinstance(api_key, str):
        raise BadBackendConfig("apiKey", "must be a string")
    timeout = _timeout(raw)
    return GenericConfig(
        base_url=raw["baseUrl"].strip(),
        api_key=api_key or None,
        headers=_strings(raw, "headers", None),
        timeout_ms=timeout,
        endpoints=_strings(raw, "endpoints", DEFAULT_ENDPOINTS),
        query_params=_strings(raw, "queryParams", QUERY_NAMES),
        path_params=_strings(raw, "pathParams", PATH_NAMES),
    )


def _timeout(raw: Mapping[str, Any]) -> int:
    timeout = raw.get("timeout", DEFAULT_TIMEOUT_MS)
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= 120_000:
        raise BadBackendConfig("timeout", "must be whole milliseconds, 1 to 120000")
    return timeout


def _strings(raw: Mapping[str, Any], name: str, allowed) -> dict[str, str]:
    value = raw.get(name) or {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise BadBackendConfig(name, "must be an object of strings")
    unknown = sorted(set(value) - set(allowed)) if allowed is not None else []
    if unknown:
        raise BadBackendConfig(f"{name}.{unknown[0]}", f"is not one of {', '.join(allowed)}")
    if name == "headers":  # sent as they are: what a header cannot carry fails every call
        for header, text in value.items():
            if not HEADER_NAME.match(header):
                raise BadBackendConfig(f"headers.{header}", "is not a header name")
            try:
                header_value(text)
            except ValidationError as exc:
                raise BadBackendConfig(f"headers.{header}", str(exc.messages[0])) from None
    return dict(value)


TYPES = ("generic", "obsidian", "notion")
# Fields of the known backends' configs, and the string fields among them.
KNOWN_FIELDS = {
    "obsidian": ({"type", "baseUrl", "apiKey", "folder", "timeout", "displayName"},
                 ("baseUrl", "apiKey", "folder", "displayName")),
    "notion": ({"type", "baseUrl", "apiKey", "databaseId", "timeout", "displayName"},
               ("baseUrl", "apiKey", "databaseId", "displayName")),
}  # fmt: skip


def config_json_schema() -> dict[str, Any]:
    """One `backendConfigs` entry as JSON Schema, for the OpenAPI spec: what check_config
    takes (a test fuzzes the settings route against it). Where a URL points is the guard's."""
    url = {"type": "string", "pattern": HTTP_URL_PATTERN}
    key = {"type": "string", "pattern": header_value.regex.pattern}
    timeout = {"type": "integer", "minimum": 1, "maximum": 120_000, "description": "ms"}
    text = {"type": "string"}

    def kind(name: str, required: list[str], **fields: dict) -> dict[str, Any]:
        return {
            "type": "object",
            "title": f"{name} backend",
            "required": required,
            "additionalProperties": False,
            "properties": {"type": {"type": "string", "enum": [name]}, "timeout": timeout,
                           "displayName": text, "apiKey": key, **fields},
        }  # fmt: skip

    def names(allowed) -> dict[str, Any]:
        properties = {name: text for name in allowed}
        return {"type": "object", "properties": properties, "additionalProperties": False}

    # OpenAPI 3.0 cannot constrain an object's keys (no propertyNames): said in words.
    headers = {
        "type": "object",
        "description": f"Header names are HTTP tokens ({HEADER_NAME.pattern}).",
        "additionalProperties": key,
    }
    return {
        "oneOf": [
            kind("generic", ["baseUrl"], baseUrl=url, headers=headers,
                 endpoints=names(DEFAULT_ENDPOINTS), queryParams=names(QUERY_NAMES),
                 pathParams=names(PATH_NAMES)),
            kind("obsidian", ["type"], baseUrl=url, folder=text),
            kind("notion", ["type", "databaseId"], baseUrl=url,
                 databaseId={"type": "string", "minLength": 1}),
        ]
    }  # fmt: skip


def check_config(raw: Mapping[str, Any], *, allow_local: bool) -> None:
    """Raise BadBackendConfig naming the field when a backend cannot be made from `raw`, or
    its URL does not pass the outbound guard (not resolved: the host may come up later)."""
    kind = raw.get("type", "generic")
    if kind not in TYPES:
        raise BadBackendConfig("type", f"must be one of {', '.join(TYPES)}")
    if kind == "generic":
        generic_config(raw)
    else:
        _check_known(kind, raw)
    if isinstance(raw.get("apiKey"), str):
        try:
            header_value(raw["apiKey"])
        except ValidationError as exc:
            raise BadBackendConfig("apiKey", str(exc.messages[0])) from None
    if isinstance(raw.get("baseUrl"), str) and raw["baseUrl"].strip():
        try:
            check_base_url(raw["baseUrl"], allow_local=allow_local, resolve=False)
        except BlockedURL as exc:
            raise BadBackendConfig("baseUrl", str(exc)) from None


def _check_known(kind: str, raw: Mapping[str, Any]) -> None:
    fields, strings = KNOWN_FIELDS[kind]
    unknown = sorted(set(raw) - fields)
    if unknown:
        raise BadBackendConfig(unknown[0], f"is not a field of a {kind} backend")
    for name in strings:
        if name in raw and not isinstance(raw[name], str):
            raise BadBackendConfig(name, "must be a string")
    if kind == "notion" and not raw.get("databaseId"):
        raise BadBackendConfig("databaseId", "required: the id of the memories database")
    _timeout(raw)


def make_backend(backend_id: str, raw: Mapping[str, Any], http: httpx.Client, *, allow_local: bool):
    check_config(raw, allow_local=allow_local)
    name = raw.get("displayName") if isinstance(raw.get("displayName"), str) else backend_id
    if raw.get("type") == "obsidian":
        return ObsidianBackend(
            http,
            base_url=raw.get("baseUrl") or OBSIDIAN_URL,
            api_key=raw.get("apiKey") or None,
            folder=raw.get("folder") or DEFAULT_FOLDER,
            allow_local=allow_local,
            backend_id=backend_id,
            display_name=raw.get("displayName") or "Obsidian Vault",
            timeout_seconds=_timeout(raw) / 1000,
        )
    if raw.get("type") == "notion":
        return NotionBackend(
            http,
            database_id=raw["databaseId"],
            api_key=raw.get("apiKey") or None,
            allow_local=allow_local,
            base_url=raw.get("baseUrl") or NOTION_URL,
            backend_id=backend_id,
            display_name=raw.get("displayName") or "Notion",
            timeout_seconds=_timeout(raw) / 1000,
        )
    return GenericMemoryBackend(
        backend_id, name, generic_config(raw), http, allow_local=allow_local
    )
