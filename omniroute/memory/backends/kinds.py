"""The registry of backend kinds: kind -> its config's fields, its factory, what the
environment can configure. A `backendConfigs` entry names its kind in `type`:

- `generic` (the default): any HTTP memory service, in the reference's camelCase JSON;
- `obsidian`: a vault behind the Obsidian Local REST API (`{baseUrl, apiKey, folder}`);
- `notion`: a Notion database (`{apiKey, databaseId, baseUrl}`).

The local store is the one backend not made here: the database DATABASE_URL names is
always registered, as `local`. To add a kind, implement the seven calls of
`base.MemoryBackend` (subclass `guarded.RemoteBackend`: the rest is derived) and add a
BackendKind to KINDS; settings, the checks, the OpenAPI spec and the studio follow.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from marshmallow import ValidationError

from omniroute.core.fields import header_value
from omniroute.core.net import HTTP_URL_PATTERN, BlockedURL, check_base_url
from omniroute.memory.backends.base import MemoryBackend
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
BACKEND_TYPE = BACKEND_ID  # a generic backend's backendType (for logs) has the same shape
# An HTTP header's name (RFC 9110's token).
HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
GENERIC_FIELDS = frozenset(
    {"type", "baseUrl", "apiKey", "headers", "timeout", "endpoints", "queryParams",
     "pathParams", "displayName", "backendType"}
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
    for name in ("apiKey", "displayName", "backendType"):
        if raw.get(name) is not None and not isinstance(raw[name], str):
            raise BadBackendConfig(name, "must be a string")
    backend_type = (raw.get("backendType") or "generic").strip()
    if not BACKEND_TYPE.fullmatch(backend_type):
        raise BadBackendConfig("backendType", BACKEND_ID_SHAPE)
    api_key = raw.get("apiKey")
    timeout = _timeout(raw)
    return GenericConfig(
        base_url=raw["baseUrl"].strip(),
        api_key=api_key or None,
        headers=_strings(raw, "headers", None),
        timeout_ms=timeout,
        endpoints=_strings(raw, "endpoints", DEFAULT_ENDPOINTS),
        query_params=_strings(raw, "queryParams", QUERY_NAMES),
        path_params=_strings(raw, "pathParams", PATH_NAMES),
        backend_type=backend_type,
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


@dataclass(frozen=True)
class BackendKind:
    """A kind of memory backend.

    `fields` are its config's own JSON Schema properties (`type`, `timeout`, `displayName`
    and `apiKey` every kind has), `required` the ones it cannot do without; `check` raises
    BadBackendConfig naming what else is wrong; `make(backend_id, config, http, allow_local)`
    builds one; `from_env(env)` is the config the environment gives it (None: none)."""

    name: str
    fields: Mapping[str, dict[str, Any]]
    required: tuple[str, ...]
    check: Callable[[Mapping[str, Any]], object]
    make: Callable[[str, Mapping[str, Any], httpx.Client, bool], MemoryBackend]
    default_url: str | None = None
    from_env: Callable[[Mapping[str, Any]], dict[str, Any] | None] = field(default=lambda env: None)

    def json_schema(self) -> dict[str, Any]:
        timeout = {"type": "integer", "minimum": 1, "maximum": 120_000, "description": "ms"}
        key = {"type": "string", "pattern": header_value.regex.pattern}
        return {
            "type": "object",
            "title": f"{self.name} backend",
            "required": list(self.required),
            "additionalProperties": False,
            "properties": {"type": {"type": "string", "enum": [self.name]}, "timeout": timeout,
                           "displayName": {"type": "string"}, "apiKey": key, **self.fields},
        }  # fmt: skip


COMMON_FIELDS = frozenset({"type", "timeout", "displayName", "apiKey"})
URL = {"type": "string", "pattern": HTTP_URL_PATTERN}
TEXT = {"type": "string"}


def _names(allowed) -> dict[str, Any]:
    properties = {name: TEXT for name in allowed}
    return {"type": "object", "properties": properties, "additionalProperties": False}


def _check_fields(kind: str, fields: Mapping[str, Any], raw: Mapping[str, Any]) -> None:
    """Unknown fields, and string fields that are not strings, named."""
    unknown = sorted(set(raw) - COMMON_FIELDS - set(fields))
    if unknown:
        raise BadBackendConfig(unknown[0], f"is not a field of a {kind} backend")
    strings = ["displayName", "apiKey", *(n for n, f in fields.items() if f["type"] == "string")]
    for name in strings:
        if name in raw and not isinstance(raw[name], str):
            raise BadBackendConfig(name, "must be a string")
    _timeout(raw)


def _display_name(raw: Mapping[str, Any], default: str) -> str:
    return raw.get("displayName") or default


def _make_generic(backend_id: str, raw: Mapping[str, Any], http: httpx.Client, allow_local: bool):
    name = _display_name(raw, backend_id)
    config = generic_config(raw)
    return GenericMemoryBackend(backend_id, name, config, http, allow_local=allow_local)


def _make_obsidian(backend_id: str, raw: Mapping[str, Any], http: httpx.Client, allow_local: bool):
    return ObsidianBackend(
        http,
        base_url=raw.get("baseUrl") or OBSIDIAN_URL,
        api_key=raw.get("apiKey") or None,
        folder=raw.get("folder") or DEFAULT_FOLDER,
        allow_local=allow_local,
        backend_id=backend_id,
        display_name=_display_name(raw, "Obsidian Vault"),
        timeout_seconds=_timeout(raw) / 1000,
    )


def _make_notion(backend_id: str, raw: Mapping[str, Any], http: httpx.Client, allow_local: bool):
    return NotionBackend(
        http,
        database_id=raw["databaseId"],
        api_key=raw.get("apiKey") or None,
        allow_local=allow_local,
        base_url=raw.get("baseUrl") or NOTION_URL,
        backend_id=backend_id,
        display_name=_display_name(raw, "Notion"),
        timeout_seconds=_timeout(raw) / 1000,
    )


def _obsidian_env(env: Mapping[str, Any]) -> dict[str, Any] | None:
    if not env.get("OBSIDIAN_API_KEY"):
        return None
    return {
        "type": "obsidian",
        "baseUrl": env.get("OBSIDIAN_API_URL") or OBSIDIAN_URL,
        "apiKey": env["OBSIDIAN_API_KEY"],
    }


def _notion_env(env: Mapping[str, Any]) -> dict[str, Any] | None:
    if not (env.get("NOTION_API_KEY") and env.get("NOTION_DATABASE_ID")):
        return None
    return {
        "type": "notion",
        "baseUrl": env.get("NOTION_API_URL") or NOTION_URL,
        "apiKey": env["NOTION_API_KEY"],
        "databaseId": env["NOTION_DATABASE_ID"],
    }


def _check_notion(raw: Mapping[str, Any]) -> None:
    _check_fields("notion", NOTION.fields, raw)
    if not raw.get("databaseId"):
        raise BadBackendConfig("databaseId", "required: the id of the memories database")


# OpenAPI 3.0 cannot constrain an object's keys (no propertyNames): said in words.
_HEADERS = {
    "type": "object",
    "description": f"Header names are HTTP tokens ({HEADER_NAME.pattern}).",
    "additionalProperties": {"type": "string", "pattern": header_value.regex.pattern},
}
GENERIC = BackendKind(
    "generic",
    fields={"baseUrl": URL, "headers": _HEADERS, "endpoints": _names(DEFAULT_ENDPOINTS),
            "queryParams": _names(QUERY_NAMES), "pathParams": _names(PATH_NAMES),
            "backendType": {"type": "string", "pattern": BACKEND_TYPE.pattern}},
    required=("baseUrl",),
    check=generic_config,
    make=_make_generic,
)  # fmt: skip
OBSIDIAN = BackendKind(
    "obsidian",
    fields={"baseUrl": URL, "folder": TEXT},
    required=("type",),
    check=lambda raw: _check_fields("obsidian", OBSIDIAN.fields, raw),
    make=_make_obsidian,
    default_url=OBSIDIAN_URL,
    from_env=_obsidian_env,
)
NOTION = BackendKind(
    "notion",
    fields={"baseUrl": URL, "databaseId": {"type": "string", "minLength": 1}},
    required=("type", "databaseId"),
    check=_check_notion,
    make=_make_notion,
    default_url=NOTION_URL,
    from_env=_notion_env,
)
KINDS = {kind.name: kind for kind in (GENERIC, OBSIDIAN, NOTION)}


def config_json_schema() -> dict[str, Any]:
    """One `backendConfigs` entry as JSON Schema, for the OpenAPI spec: what check_config
    takes (a test fuzzes the settings route against it). Where a URL points is the guard's."""
    return {"oneOf": [kind.json_schema() for kind in KINDS.values()]}


def env_configs(env: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The backends the environment configures, by kind name (a `backendConfigs` entry of
    the same id wins)."""
    configs = {name: kind.from_env(env) for name, kind in KINDS.items()}
    return {name: config for name, config in configs.items() if config is not None}


def default_url(raw: Mapping[str, Any]) -> str | None:
    kind = raw.get("type", "generic")
    return KINDS[kind].default_url if isinstance(kind, str) and kind in KINDS else None


def check_config(raw: Mapping[str, Any], *, allow_local: bool) -> None:
    """Raise BadBackendConfig naming the field when a backend cannot be made from `raw`, or
    its URL does not pass the outbound guard (not resolved: the host may come up later)."""
    kind = raw.get("type", "generic")
    if not isinstance(kind, str) or kind not in KINDS:
        raise BadBackendConfig("type", f"must be one of {', '.join(KINDS)}")
    KINDS[kind].check(raw)
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


def make_backend(backend_id: str, raw: Mapping[str, Any], http: httpx.Client, *, allow_local: bool):
    check_config(raw, allow_local=allow_local)
    return KINDS[raw.get("type", "generic")].make(backend_id, raw, http, allow_local)
