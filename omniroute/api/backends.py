"""/api/memory/backends: the registered memory backends, which serves, and their health."""

from __future__ import annotations

import marshmallow as ma
from flask.views import MethodView
from flask_smorest import Blueprint

from omniroute.services import services

blp = Blueprint("backends", __name__, url_prefix="/api/memory", description="Memory backends")


class BackendHealthSchema(ma.Schema):
    ok = ma.fields.Boolean()
    latencyMs = ma.fields.Float(attribute="latency_ms")
    message = ma.fields.String(allow_none=True)


class BackendSchema(ma.Schema):
    id = ma.fields.String()
    displayName = ma.fields.String()
    backendType = ma.fields.String(
        metadata={"description": "`local`, `obsidian`, `notion` or a generic backend's backendType"}
    )
    isPrimary = ma.fields.Boolean()
    isFallback = ma.fields.Boolean()
    health = ma.fields.Nested(BackendHealthSchema)


class BackendListSchema(ma.Schema):
    data = ma.fields.List(ma.fields.Nested(BackendSchema))


@blp.route("/backends")
class Backends(MethodView):
    @blp.response(200, BackendListSchema)
    def get(self):
        """List the memory backends with their health

        The local store (`local`, also named `sqlite` in settings) and each backend of
        `backendConfigs`, which is primary and which are fallbacks, and a health check of
        each now (a remote one waits up to its timeout).
        """
        manager = services().backends.current()
        health = manager.health()
        return {"data": [{**item, "health": health[item["id"]]} for item in manager.registered()]}
