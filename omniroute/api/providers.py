"""/api/providers: the upstream OpenAI-compatible providers the gateway forwards to."""

from __future__ import annotations

import marshmallow as ma
from flask.views import MethodView
from flask_smorest import Blueprint, abort

from omniroute.api.memory_schemas import SuccessSchema
from omniroute.core.errors import abort_conflict
from omniroute.core.providers.schemas import (
    EmbeddingModelSchema,
    ProviderChangeSchema,
    ProviderCreateSchema,
)
from omniroute.core.sealed import KeyNeeded, keeps_stored_key
from omniroute.services import services

blp = Blueprint("providers", __name__, url_prefix="/api/providers", description="Providers")


class ProviderSchema(ma.Schema):
    id = ma.fields.String()
    baseUrl = ma.fields.String(attribute="base_url")
    hasKey = ma.fields.Boolean(attribute="has_key")
    apiKeyMasked = ma.fields.String(attribute="api_key_masked", allow_none=True)
    models = ma.fields.List(ma.fields.String())
    embeddingModels = ma.fields.List(
        ma.fields.Nested(EmbeddingModelSchema), attribute="embedding_models"
    )
    supportsSystemRole = ma.fields.Boolean(attribute="supports_system_role")
    createdAt = ma.fields.String(attribute="created_at")
    updatedAt = ma.fields.String(attribute="updated_at")


class ProviderEnvelopeSchema(ma.Schema):
    provider = ma.fields.Nested(ProviderSchema)


class ProviderListSchema(ma.Schema):
    data = ma.fields.List(ma.fields.Nested(ProviderSchema))


@blp.route("")
class ProviderCollection(MethodView):
    @blp.response(200, ProviderListSchema)
    def get(self):
        """List providers (keys masked)"""
        return {"data": services().providers.list_providers()}

    @blp.arguments(ProviderCreateSchema)
    @blp.response(201, ProviderEnvelopeSchema)
    def post(self, body):
        """Add a provider"""
        provider_id = body.pop("id")
        if services().providers.get(provider_id) is not None:
            abort(409, message=f"Provider {provider_id} exists; change it with PUT.")
        provider, _ = services().providers.save(provider_id, body)
        return {"provider": provider}


@blp.route("/<provider_id>")
class ProviderItem(MethodView):
    @blp.response(200, ProviderEnvelopeSchema)
    def get(self, provider_id):
        """Get a provider (key masked)"""
        provider = services().providers.get(provider_id)
        if provider is None:
            abort(404, message=f"Provider {provider_id} not found.")
        return {"provider": provider}

    @blp.arguments(ProviderChangeSchema)
    @blp.response(200, ProviderEnvelopeSchema)
    def put(self, body, provider_id):
        """Change a provider

        Only the fields given change; `apiKey: null` (or "") removes the key, and the key
        sent back masked (`...9876`) keeps it. A new `baseUrl` needs the key again (422
        naming `apiKey` otherwise): a stored key never goes to a host it was not given for.
        """
        current = services().providers.get(provider_id)
        if current is None:
            abort(404, message=f"Provider {provider_id} not found.")
        try:
            if keeps_stored_key(
                body.get("api_key"),
                given_present="api_key" in body,
                stored=current.has_key,
                moved=body.get("base_url", current.base_url) != current.base_url,
            ):
                body.pop("api_key", None)
        except KeyNeeded as exc:
            abort_conflict("apiKey", str(exc))
        provider, _ = services().providers.save(provider_id, body)
        return {"provider": provider}

    @blp.response(200, SuccessSchema)
    def delete(self, provider_id):
        """Remove a provider"""
        if not services().providers.delete(provider_id):
            abort(404, message=f"Provider {provider_id} not found.")
        return {"success": True}
