"""Every error an operation can answer, declared in the spec with the one error shape.

The admin API's guard, the guess brake, the body limit and a locked database answer on every
/api route alike, so those are declared once here by rule rather than route by route:

- every /api operation: 401 (no credentials), 403 (wrong ones, or no CSRF token with a
  session), 429 (the guess brake, with Retry-After), 503 (the database stayed locked);
- one that takes a body: 413 (over MAX_BODY_BYTES) and 400 (not JSON);
- one with an id in its path, or a body that names another item (a key, a provider, a
  backend): 404; the upserts and renames that can meet another's key: 409;
  the memory operations a remote primary backend serves: 502 (it failed);
- mem0's routes (docs/mem0.md): 400, 401, 403, 429, 502, 503 (404 with an id, 413 with a
  body) in mem0's error shape, and the key as mem0 sends it (`mem0Token`);
- /v1: 400, 401, 404 (a model no provider serves: OpenAI's `model_not_found`), 413, 429 and
  502/503/504 (the provider failed, or could not be reached in time). The probes: /readyz's
  503; /metrics: 401, 403 and 429, as the admin API's.
"""

from __future__ import annotations

from typing import Any

from apispec import APISpec, BasePlugin

from omniroute.core.fields import ChangeSchema

ERRORS = {
    400: ("BAD_REQUEST", "The body is not JSON, or (on /v1) a field is wrong; `details` name it."),
    401: ("UNAUTHORIZED", "No credentials, or (on /v1) no valid gateway key."),
    403: ("FORBIDDEN", "Wrong admin token, or a session's change without its CSRF token."),
    404: ("NOT_FOUND", "No such item: the one in the path, or one the body names (`details` "
          "say which field; on /v1, a model no provider serves: `model_not_found`)."),
    409: ("CONFLICT", "Another memory of the key has this `key`, the item exists, or Qdrant "
          "cannot be used now (not enabled for a backfill; unreachable, or the test query "
          "failed, when enabling it)."),
    413: ("PAYLOAD_TOO_LARGE", "The body is larger than MAX_BODY_BYTES."),
    429: ("TOO_MANY_REQUESTS", "Too many wrong tokens from this address, or the provider's "
          "rate limit; see Retry-After."),
    502: ("BAD_GATEWAY", "The provider (on /v1) or the primary memory backend (on /api/memory) "
          "failed: unreachable, a redirect, our key refused, or an error it answered."),
    503: ("SERVICE_UNAVAILABLE", "The database stayed locked by other writers; try again."),
    504: ("GATEWAY_TIMEOUT", "The provider did not answer in time."),
}  # fmt: skip
CONFLICTS = {
    ("post", "/api/memory"),
    ("put", "/api/memory/{memory_id}"),
    ("post", "/api/providers"),
    ("post", "/api/settings/qdrant/backfill"),
    ("put", "/api/settings/qdrant"),
}
# The bodies that name another item by its id (a key, a provider, a backend).
NAMES_ITEMS = {
    ("post", "/api/memory"),
    ("put", "/api/settings/gateway"),
    ("put", "/api/settings/memory"),
}
# The operations served by the primary memory backend, which may be a remote service.
BACKEND_SERVED = {
    ("get", "/api/memory"),
    ("post", "/api/memory"),
    ("delete", "/api/memory"),
    ("get", "/api/memory/{memory_id}"),
    ("put", "/api/memory/{memory_id}"),
    ("delete", "/api/memory/{memory_id}"),
}
WITH_BODY = {"post", "put", "patch"}


# mem0's platform routes (docs/mem0.md) answer errors in mem0's shape, Mem0Error.
MEM0_PREFIXES = ("/v1/ping/", "/v1/memories/", "/v1/entities/", "/v2/entities/", "/v3/")
MEM0_ERRORS = {
    400: ("MEM0_BAD_REQUEST", "mem0's 400: the body or a filter is wrong; `details` name it."),
    401: ("MEM0_UNAUTHORIZED", "No valid gateway key as `Authorization: Token <key>`."),
    403: ("MEM0_FORBIDDEN", "The key lacks the scope: read:memory to read, write:memory to write."),
    404: ("MEM0_NOT_FOUND", "No memory of this key has this id."),
    413: ("MEM0_PAYLOAD_TOO_LARGE", "The body is larger than MAX_BODY_BYTES."),
    429: ("MEM0_TOO_MANY_REQUESTS", "Too many wrong keys from this address; see Retry-After."),
    502: ("MEM0_BAD_GATEWAY", "The primary memory backend failed."),
    503: ("MEM0_SERVICE_UNAVAILABLE", "The database stayed locked by other writers; try again."),
}  # fmt: skip


def is_mem0(path: str) -> bool:
    return path.startswith(MEM0_PREFIXES)


def register_error_responses(spec: APISpec) -> None:
    """The error responses as components: ours of the shared Error schema, mem0's routes'
    of Mem0Error."""
    for table, schema in ((ERRORS, "Error"), (MEM0_ERRORS, "Mem0Error")):
        for name, description in table.values():
            spec.components.response(
                name,
                {
                    "description": description,
                    "content": {
                        "application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}
                    },
                },
            )


def codes_for(method: str, path: str) -> list[int]:
    if is_mem0(path):
        codes = [400, 401, 403, 429, 502, 503]
        if method in WITH_BODY:
            codes.append(413)
        if "{" in path:
            codes.append(404)
        return sorted(codes)
    if path.startswith("/v1/"):
        codes = [401, 429, 502, 503, 504]
        if method in WITH_BODY or "{" in path:  # a model no provider serves
            codes.append(404)
        return sorted([400, 413, *codes] if method in WITH_BODY else codes)
    if path == "/metrics":
        return [401, 403, 429]
    if not path.startswith("/api/"):
        return [503] if path == "/readyz" else []
    codes = [401, 403, 429, 503]
    if method in WITH_BODY:
        codes += [400, 413]
    if "{" in path or (method, path) in NAMES_ITEMS:
        codes.append(404)
    if (method, path) in CONFLICTS:
        codes.append(409)
    if (method, path) in BACKEND_SERVED:
        codes.append(502)
    return sorted(codes)


class ErrorResponses(BasePlugin):
    def operation_helper(
        self, path: str | None = None, operations: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        for method, operation in (operations or {}).items():
            if not isinstance(operation, dict) or path is None:
                continue
            responses = operation.setdefault("responses", {})
            if is_mem0(path):  # mem0's key and shape, whatever flask-smorest declared
                operation["security"] = [{"mem0Token": []}]
                for code in codes_for(method, path):
                    responses[str(code)] = {
                        "$ref": f"#/components/responses/{MEM0_ERRORS[code][0]}"
                    }
                continue
            for code in codes_for(method, path):
                responses.setdefault(
                    str(code), {"$ref": f"#/components/responses/{ERRORS[code][0]}"}
                )


class ChangesNeedAField(BasePlugin):
    """A change schema (fields.ChangeSchema) refuses an empty object: the spec says so too."""

    def schema_helper(self, name: str, definition: dict, **kwargs: Any) -> dict | None:
        schema = kwargs.get("schema")
        schema_class = schema if isinstance(schema, type) else type(schema)
        if isinstance(schema_class, type) and issubclass(schema_class, ChangeSchema):
            return {"minProperties": 1}
        return None
