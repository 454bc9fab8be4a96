"""A loopback HTTP server that answers like a Qdrant server, for the client's HTTP path.

It keeps collections and points in memory and answers the REST calls the tier makes
(readyz, collection exists/create/index, upsert, delete by ids, query, count, facet, scroll)
in Qdrant's envelope `{"result", "status", "time"}`. Queries rank by cosine over the points
whose `apiKeyId` matches the filter's first condition (enough for the tests that use it: the
tier's behaviour is tested against qdrant-client's local mode). It records every request with
its headers, and misbehaves on demand: `mode` "ok", "down" (503 to everything), "slow" (waits
`slow_seconds`), or "unauthorized" (401 unless the api-key header equals `api_key`).
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

import numpy as np

from tests.loopback import LoopbackServer


class FakeQdrant(LoopbackServer):
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.collections: dict[str, dict[str, Any]] = {}
        self.mode = "ok"
        self.api_key: str | None = None
        self.slow_seconds = 2.0
        self._lock = threading.Lock()
        super().__init__(_handler_for(self))

    def paths(self, method: str | None = None) -> list[str]:
        return [r["path"] for r in self.requests if method is None or r["method"] == method]

    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        route = path.split("?")[0]
        if route == "/readyz":
            return 200, "all shards are ready"
        match = re.match(r"^/collections/([^/]+)(/.*)?$", route)
        if not match:
            return 404, {"status": {"error": f"no route {route}"}}
        name, rest = match.group(1), match.group(2) or ""
        with self._lock:
            collection = self.collections.get(name)
            if rest == "/exists":
                return 200, {"exists": collection is not None}
            if rest == "" and method == "PUT":
                self.collections[name] = {"config": body, "points": {}, "indexes": []}
                return 200, True
            if collection is None:
                return 404, {"status": {"error": f"Collection `{name}` doesn't exist!"}}
            points = collection["points"]
            if rest == "" and method == "GET":
                return 200, _info(collection)
            if rest == "" and method == "PATCH":
                for part in ("quantization_config", "hnsw_config"):
                    if part in body:
                        collection["config"][part] = body[part]
                return 200, True
            if rest == "/index":
                collection["indexes"].append(body["field_name"])
                return 200, {"operation_id": 1, "status": "completed"}
            if rest == "/points" and method == "PUT":
                for point in body["points"]:
                    points[str(point["id"])] = point
                return 200, {"operation_id": 1, "status": "completed"}
            if rest == "/points/delete":
                for point_id in body.get("points", []):
                    points.pop(str(point_id), None)
                return 200, {"operation_id": 1, "status": "completed"}
            if rest == "/points/query":
                return 200, {"points": _query(points, body)}
            if rest == "/points/count":
                return 200, {"count": len(_matching(points, body.get("filter")))}
            if rest == "/facet":
                counts: dict[str, int] = {}
                for point in points.values():
                    value = point["payload"]["apiKeyId"]
                    counts[value] = counts.get(value, 0) + 1
                return 200, {"hits": [{"value": v, "count": c} for v, c in counts.items()]}
            if rest == "/points/scroll":
                found = _matching(points, body.get("filter"))
                return 200, {"points": [{"id": p["id"]} for p in found], "next_page_offset": None}
        return 404, {"status": {"error": f"no route {method} {route}"}}


def _info(collection: dict) -> dict:
    """A CollectionInfo as Qdrant 1.x answers it (the fields qdrant-client requires)."""
    created = collection["config"]
    quantization = created.get("quantization_config")
    ef_construct = (created.get("hnsw_config") or {}).get("ef_construct", 100)
    return {
        "status": "green",
        "optimizer_status": "ok",
        "segments_count": 1,
        "points_count": len(collection["points"]),
        "payload_schema": {},
        "config": {
            "params": {"vectors": created["vectors"]},
            "hnsw_config": {"m": 16, "ef_construct": ef_construct, "full_scan_threshold": 10000},
            "optimizer_config": {"default_segment_number": 0, "flush_interval_sec": 5},
            "quantization_config": None if quantization == "Disabled" else quantization,
        },
    }


def _tenant(where: dict | None) -> str | None:
    for condition in (where or {}).get("must", []):
        if condition.get("key") == "apiKeyId":
            return condition["match"]["value"]
    return None


def _matching(points: dict, where: dict | None) -> list[dict]:
    tenant = _tenant(where)
    return [p for p in points.values() if tenant is None or p["payload"]["apiKeyId"] == tenant]


def _query(points: dict, body: dict) -> list[dict]:
    vector = body["query"]
    query = np.asarray(vector.get("nearest") if isinstance(vector, dict) else vector, "float32")
    scored = []
    for point in _matching(points, body.get("filter")):
        vector = np.asarray(point["vector"], dtype=np.float32)
        score = float(query @ vector / (np.linalg.norm(query) * np.linalg.norm(vector) or 1.0))
        scored.append({"id": point["id"], "version": 0, "score": score})
    return sorted(scored, key=lambda hit: hit["score"], reverse=True)[: body.get("limit", 10)]


def _handler_for(fake: FakeQdrant) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length", 0) or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            fake.requests.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": dict(self.headers),
                    "body": body,
                }
            )
            if fake.mode == "down":
                return self._send(503, {"status": {"error": "Service Unavailable"}})
            if fake.mode == "slow":
                time.sleep(fake.slow_seconds)
            if fake.api_key is not None and self.headers.get("api-key") != fake.api_key:
                return self._send(401, {"status": {"error": "Must provide an API key"}})
            try:
                status, result = fake.answer(self.command, self.path, body)
            except Exception as exc:  # a request this fake does not know: say so, loudly
                return self._send(500, {"status": {"error": f"fake Qdrant: {exc!r}"}})
            if status != 200:
                return self._send(status, result)
            if self.path == "/readyz":
                return self._send(200, result, raw=True)
            return self._send(200, {"result": result, "status": "ok", "time": 0.0001})

        do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _handle

        def _send(self, status: int, payload: Any, raw: bool = False) -> None:
            data = payload.encode() if raw else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if raw else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                pass

    return Handler
