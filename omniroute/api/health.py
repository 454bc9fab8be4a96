"""/healthz and /readyz: probes for process managers and load balancers (no auth)."""

from __future__ import annotations

import marshmallow as ma
from flask.views import MethodView
from flask_smorest import Blueprint, abort

from omniroute.services import services
from omniroute.web.auth import bearer_token, is_admin_token

RETRY_AFTER_SECONDS = 5

blp = Blueprint("health", __name__, description="Probes")


class LivenessSchema(ma.Schema):
    status = ma.fields.String()


class ReadinessSchema(ma.Schema):
    status = ma.fields.String()
    checks = ma.fields.Dict(keys=ma.fields.String(), values=ma.fields.String())


@blp.route("/healthz")
class Liveness(MethodView):
    @blp.doc(security=[])
    @blp.response(200, LivenessSchema)
    def get(self):
        """Tell that the process is alive"""
        return {"status": "ok"}


@blp.route("/readyz")
class Readiness(MethodView):
    @blp.doc(security=[])
    @blp.response(200, ReadinessSchema)
    @blp.alt_response(
        503,
        description="The database does not answer; with the admin token, the details say why.",
    )
    def get(self):
        """Tell whether this process can serve requests: whether the database answers

        Redis and vectors are reported, but neither makes the process unready: without
        Redis jobs run in this process, without sqlite-vec or pgvector search is by keyword
        only. A load
        balancer should not pull every instance for either.
        """
        svc = services()
        token = bearer_token()
        detailed = token is not None and is_admin_token(token)
        checks, failures = {}, {}
        try:
            svc.db.ping()
            checks["database"] = "ok"
        except Exception as exc:
            # A driver's words name the host and port: only the admin reads them.
            failures["database"] = [f"{type(exc).__name__}: {exc}" if detailed else "unavailable"]
        if svc.redis is None:
            checks["redis"] = "not configured (jobs run in-process)"
        else:
            try:
                svc.redis.ping()
                checks["redis"] = "ok"
            except Exception as exc:
                checks["redis"] = f"unavailable (jobs run in-process): {type(exc).__name__}"
        checks["vectors"] = svc.db.vectors.label
        if failures:
            abort(
                503,
                message="Not ready: " + ", ".join(failures),
                errors={"checks": failures},
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        return {"status": "ready", "checks": checks}
