"""What every response leaves behind: its request id, its log line and its metrics; and
GET /metrics (Prometheus text).

/metrics is never public by accident: it takes the admin token (or a studio session), or the
`METRICS_TOKEN` a scraper is given instead, as `Authorization: Bearer`.
"""

from __future__ import annotations

import functools
import hmac
import re
import time

from flask import Flask, Response, current_app, g, request
from flask.views import MethodView
from flask_smorest import Api, Blueprint

from omniroute.core.handoff import handoff_of
from omniroute.core.logs import REQUEST_ID_HEADER, log_request, request_id_from
from omniroute.core.metrics import (
    EMBEDDING_CACHE,
    HTTP_LATENCY,
    HTTP_REQUESTS,
    QUEUE_DEPTH,
    exposition,
)
from omniroute.services import services
from omniroute.web.auth import bearer_token, require_admin

blp = Blueprint("observe", __name__, description="Metrics")
# `<converter:name>` in a rule: logs and metrics show `<name>`.
CONVERTER = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")
METRICS_RESPONSE = {
    "200": {
        "description": "Prometheus text exposition format 0.0.4.",
        "content": {"text/plain": {"schema": {"type": "string"}}},
    }
}


def init_app(app: Flask, rest: Api) -> None:
    app.before_request(_started)
    app.after_request(_counted)
    rest.register_blueprint(blp)  # in the OpenAPI spec


def _started() -> None:
    g.started = time.perf_counter()
    g.request_id = request_id_from(request.headers.get(REQUEST_ID_HEADER))


def _route_name(rule: str) -> str:
    """A rule as logs and metrics name it: its variables without their converters
    (`/api/memory/<memory_id:memory_id>` is `/api/memory/<memory_id>`)."""
    return CONVERTER.sub(r"<\1>", rule)


def _counted(response: Response) -> Response:
    """Count, time and log the request (a stream: until its headers go out); a chat handed
    to the front is counted and logged by it, once its answer's status is known."""
    # The rule, not the path: /api/memory/<memory_id> is one series, and unknown paths one.
    route = _route_name(request.url_rule.rule) if request.url_rule is not None else "unmatched"
    started = g.get("started")
    if started is not None:
        response.headers[REQUEST_ID_HEADER] = g.request_id
    handoff = handoff_of(request.environ)
    report = functools.partial(_report, route, request.method, started, _log_fields())
    if handoff is not None and handoff.relay is not None:
        handoff.report = report
    else:
        report(response.status_code)
    return response


def _log_fields() -> dict:
    api_key = g.get("api_key")
    return {
        "key_id": api_key.id if api_key is not None else None,
        "provider": g.get("provider"),
        "model": g.get("model"),
        "memories_injected": g.get("memories_injected"),
        "memory_backend": g.get("memory_backend"),
        "memory_fallback": g.get("memory_fallback"),
    }


def _report(route: str, method: str, started: float | None, fields: dict, status: int) -> None:
    HTTP_REQUESTS.labels(route, method, str(status)).inc()
    if started is None:  # a request refused before the app's first hook ran
        return
    HTTP_LATENCY.labels(route, method).observe(time.perf_counter() - started)
    log_request(method, route, status, started, **fields)


@blp.route("/metrics")
class Metrics(MethodView):
    @blp.doc(responses=METRICS_RESPONSE)
    def get(self):
        """The gateway's metrics in Prometheus text format

        Takes the admin token (or a studio session), or `METRICS_TOKEN` as a bearer token.
        """
        token = bearer_token()
        scraper = current_app.config["METRICS_TOKEN"]
        if not (token and scraper and hmac.compare_digest(token.encode(), scraper.encode())):
            require_admin()
        svc = services()
        queued = svc.jobs.status().get("queued") or {}
        for queue, depth in queued.items():
            QUEUE_DEPTH.labels(queue).set(depth)
        QUEUE_DEPTH.labels("extraction-outbox").set(svc.outbox.pending())
        for result, count in svc.embeddings.cache_stats().items():
            EMBEDDING_CACHE.labels(result).set(count)
        body, content_type = exposition(current_app.config["PROMETHEUS_MULTIPROC_DIR"])
        return Response(body, 200, content_type=content_type)
