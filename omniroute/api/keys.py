"""/api/keys: the gateway API keys that clients send to /v1 and that own memories."""

from __future__ import annotations

import marshmallow as ma
from flask.views import MethodView
from flask_smorest import Blueprint, abort
from marshmallow.validate import And, Length

from ..fields import not_blank
from ..services import services
from .memory_schemas import SuccessSchema

blp = Blueprint("keys", __name__, url_prefix="/api/keys", description="Gateway API keys")


class KeySchema(ma.Schema):
    id = ma.fields.String()
    name = ma.fields.String()
    prefix = ma.fields.String(metadata={"description": "The first characters of the secret."})
    createdAt = ma.fields.String(attribute="created_at")
    lastUsedAt = ma.fields.String(attribute="last_used_at", allow_none=True)


class KeyCreatedSchema(KeySchema):
    key = ma.fields.String(metadata={"description": "The secret. It is shown only this once."})


class KeyListSchema(ma.Schema):
    data = ma.fields.List(ma.fields.Nested(KeySchema))


class KeyCreateSchema(ma.Schema):
    name = ma.fields.String(required=True, validate=And(Length(1, 100), not_blank))


@blp.route("")
class KeyCollection(MethodView):
    @blp.response(200, KeyListSchema)
    def get(self):
        """List active API keys (never their secrets)"""
        return {"data": services().keys.list_keys()}

    @blp.arguments(KeyCreateSchema)
    @blp.response(201, KeyCreatedSchema)
    def post(self, body):
        """Create an API key

        The response holds the secret (`sk-omr-...`) under `key`; only its hash is kept,
        so it cannot be shown again.
        """
        key, secret = services().keys.create(body["name"].strip())
        return {**key.__dict__, "key": secret}


@blp.route("/<key_id>")
class KeyItem(MethodView):
    @blp.response(200, SuccessSchema)
    def delete(self, key_id):
        """Revoke an API key

        The key stops working at once. Its memories stay and can still be managed here.
        """
        if not services().keys.revoke(key_id):
            abort(404, message=f"No active API key {key_id}.")
        return {"success": True}
