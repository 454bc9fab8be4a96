"""/api/keys: the gateway API keys that clients send to /v1 and that own memories."""

from __future__ import annotations

import marshmallow as ma
from flask.views import MethodView
from flask_smorest import Blueprint, abort
from marshmallow.validate import Length, OneOf

from omniroute.api.memory_schemas import SuccessSchema
from omniroute.core.fields import not_blank
from omniroute.core.keys import SCOPES
from omniroute.memory.life.erase import erase_owner
from omniroute.services import services

blp = Blueprint("keys", __name__, url_prefix="/api/keys", description="Gateway API keys")


class KeySchema(ma.Schema):
    id = ma.fields.String()
    name = ma.fields.String()
    prefix = ma.fields.String(metadata={"description": "The first characters of the secret."})
    createdAt = ma.fields.String(attribute="created_at")
    lastUsedAt = ma.fields.String(attribute="last_used_at", allow_none=True)
    scopes = ma.fields.List(
        ma.fields.String(),
        metadata={"description": "What the key may do through the MCP tools (see below)."},
    )


class KeyCreatedSchema(KeySchema):
    key = ma.fields.String(metadata={"description": "The secret. It is shown only this once."})


class KeyListSchema(ma.Schema):
    data = ma.fields.List(ma.fields.Nested(KeySchema))


def scopes_field(**options) -> ma.fields.List:
    return ma.fields.List(
        ma.fields.String(validate=OneOf(SCOPES)),
        metadata={
            "description": "`read:memory` (the MCP tools search and get) and "
            "`write:memory` (add, update, delete, clear); none: no MCP memory access. Chat "
            "through /v1 is never limited by them."
        },
        **options,
    )


class KeyCreateSchema(ma.Schema):
    name = ma.fields.String(required=True, validate=[Length(1, 100), not_blank])
    scopes = scopes_field(load_default=list(SCOPES))


class KeyUpdateSchema(ma.Schema):
    scopes = scopes_field(required=True)


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
        key, secret = services().keys.create(body["name"].strip(), body["scopes"])
        return {**key.__dict__, "key": secret}


class KeyDeleteArgs(ma.Schema):
    erase = ma.fields.Boolean(
        truthy={"true"},
        falsy={"false"},
        load_default=False,
        metadata={"description": "true: also delete everything the key owns (see above)"},
    )


class ErasedSchema(ma.Schema):
    memories = ma.fields.Integer()
    vectors = ma.fields.Integer()
    history = ma.fields.Integer()
    extractionOutbox = ma.fields.Integer()
    qdrantPoints = ma.fields.Integer(metadata={"description": "queued for deletion"})


class KeyDeletedSchema(SuccessSchema):
    erased = ma.fields.Nested(ErasedSchema, metadata={"description": "with erase=true"})


@blp.route("/<key_id>")
class KeyItem(MethodView):
    @blp.arguments(KeyUpdateSchema)
    @blp.response(200, KeySchema)
    def patch(self, body, key_id):
        """Change an API key's scopes

        `{"scopes": ["read:memory"]}` gives the key read-only MCP access from its next call.
        """
        key = services().keys.set_scopes(key_id, body["scopes"])
        if key is None:
            abort(404, message=f"No active API key {key_id}.")
        return key

    @blp.arguments(KeyDeleteArgs, location="query")
    @blp.response(200, KeyDeletedSchema)
    def delete(self, args, key_id):
        """Revoke an API key, or erase it

        The key stops working at once. Its memories stay and can still be managed here,
        unless `erase=true`: then every memory of the key goes with its vectors and keyword
        index rows, its Qdrant points (queued for the sync job), its history and its chat
        texts waiting for extraction, and the answer counts each. Erasing works on a revoked
        key too.
        """
        svc = services()
        if not args["erase"]:
            if not svc.keys.revoke(key_id):
                abort(404, message=f"No active API key {key_id}.")
            return {"success": True}
        if svc.keys.get(key_id, include_revoked=True) is None:
            abort(404, message=f"No API key {key_id}.")
        svc.keys.revoke(key_id)  # first: no request of the key writes while it is erased
        return {"success": True, "erased": erase_owner(svc.memories, key_id).as_dict()}
