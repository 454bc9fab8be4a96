"""/api/providers: the upstream OpenAI-compatible providers the gateway forwards to."""

from __future__ import annotations

from typing import Any

import marshmallow as ma
from flask import current_app
from flask.views import MethodView
from flask_smorest import Blueprint, abort
from marshmallow.validate import Length, Range, Regexp

from ..config import ConfigError
from ..net import BlockedURL, check_base_url
from ..services import services
from .fields import StrictBoolean
from .memory_schemas import SuccessSchema

blp = Blueprint("providers", __name__, url_prefix="/api/providers", description="Providers")

PROVIDER_ID = Regexp(
    r"^[a-z0-9][a-z0-9._-]{0,63}$",
    error="Use 1 to 64 lowercase letters, digits, '.', '_' or '-' (no '/').",
)


def guarded_url(value: str) -> None:
    """Validate an outbound base URL with the outbound URL guard (without resolving it)."""
    try:
        check_base_url(
            value,
            allow_local=current_app.config["OMNIROUTE_ALLOW_LOCAL_PROVIDER_URLS"],
            resolve=False,
        )
    except BlockedURL as exc:
        raise ma.ValidationError(str(exc)) from None


class EmbeddingModelSchema(ma.Schema):
    id = ma.fields.String(required=True, validate=Length(1, 200))
    dimensions = ma.fields.Integer(required=True, strict=True, validate=Range(1, 65536))


class ProviderFieldsSchema(ma.Schema):
    """The changeable fields; every one optional (PUT)."""

    baseUrl = ma.fields.String(attribute="base_url", validate=guarded_url)
    apiKey = ma.fields.String(
        attribute="api_key",
        allow_none=True,
        metadata={"description": 'Never returned. null or "" removes it.'},
    )
    models = ma.fields.List(ma.fields.String(validate=Length(1, 200)))
    embeddingModels = ma.fields.List(
        ma.fields.Nested(EmbeddingModelSchema), attribute="embedding_models"
    )
    supportsSystemRole = StrictBoolean(
        attribute="supports_system_role",
        metadata={"description": "false: memory goes in a user message, not a system one."},
    )

    @ma.post_load
    def _normalise(self, data: dict[str, Any], **kwargs) -> dict[str, Any]:
        if "base_url" in data:
            data["base_url"] = data["base_url"].strip().rstrip("/")
        if "api_key" in data and not data["api_key"]:
            data["api_key"] = None
        return data


class ProviderCreateSchema(ProviderFieldsSchema):
    id = ma.fields.String(required=True, validate=PROVIDER_ID)
    baseUrl = ma.fields.String(attribute="base_url", required=True, validate=guarded_url)


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

    @blp.arguments(ProviderFieldsSchema)
    @blp.response(200, ProviderEnvelopeSchema)
    def put(self, body, provider_id):
        """Change a provider

        Only the fields given change; `apiKey: null` (or "") removes the key.
        """
        if services().providers.get(provider_id) is None:
            abort(404, message=f"Provider {provider_id} not found.")
        provider, _ = services().providers.save(provider_id, body)
        return {"provider": provider}

    @blp.response(200, SuccessSchema)
    def delete(self, provider_id):
        """Remove a provider"""
        if not services().providers.delete(provider_id):
            abort(404, message=f"Provider {provider_id} not found.")
        return {"success": True}


def seed_providers(entries: list[Any]) -> None:
    """Create or update the providers of OMNIROUTE_PROVIDERS (needs an app context)."""
    schema = ProviderCreateSchema()
    for number, entry in enumerate(entries):
        try:
            fields = schema.load(entry)
        except ma.ValidationError as exc:
            raise ConfigError(f"OMNIROUTE_PROVIDERS[{number}] is invalid: {exc.messages}") from None
        services().providers.save(fields.pop("id"), fields)
