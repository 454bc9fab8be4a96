"""/api/settings: the runtime memory and gateway settings."""

from __future__ import annotations

import marshmallow as ma
from flask.views import MethodView
from flask_smorest import Blueprint, abort
from marshmallow.validate import Length, OneOf

from ..memory.settings import EMBEDDING_SOURCES, STRATEGIES, VECTOR_STORES
from ..proxy.providers import DEFAULT_PROVIDER_SETTING
from ..services import services
from .fields import StrictBoolean, StrictNumber, plain_json
from .providers import guarded_url

blp = Blueprint("settings", __name__, url_prefix="/api/settings", description="Settings")


class MemorySettingsSchema(ma.Schema):
    enabled = ma.fields.Boolean(
        metadata={"description": "Retrieve, inject and extract memories in /v1 requests."}
    )
    maxTokens = ma.fields.Integer(metadata={"description": "Injection budget, 0..16000."})
    retentionDays = ma.fields.Integer(metadata={"description": "1..365 days."})
    strategy = ma.fields.String(metadata={"description": "recent, semantic or hybrid."})
    skillsEnabled = ma.fields.Boolean()
    embeddingSource = ma.fields.String()
    embeddingProviderModel = ma.fields.String(allow_none=True)
    transformersEnabled = ma.fields.Boolean()
    staticEnabled = ma.fields.Boolean()
    rerankEnabled = ma.fields.Boolean()
    rerankProviderModel = ma.fields.String(allow_none=True)
    vectorStore = ma.fields.String()
    primaryBackend = ma.fields.String()
    fallbackBackends = ma.fields.List(ma.fields.String())
    backendConfigs = ma.fields.Dict()
    customBaseUrl = ma.fields.String(
        allow_none=True,
        metadata={"description": "A memory-only OpenAI-compatible /embeddings endpoint."},
    )
    customModelId = ma.fields.String(allow_none=True)


class MemorySettingsUpdateSchema(ma.Schema):
    """Every field is optional; numbers are rounded and clamped to their range."""

    enabled = StrictBoolean()
    maxTokens = StrictNumber()
    retentionDays = StrictNumber()
    strategy = ma.fields.String(validate=OneOf(STRATEGIES))
    skillsEnabled = StrictBoolean()
    embeddingSource = ma.fields.String(validate=OneOf(EMBEDDING_SOURCES))
    embeddingProviderModel = ma.fields.String(allow_none=True, validate=Length(min=1))
    transformersEnabled = StrictBoolean()
    staticEnabled = StrictBoolean()
    rerankEnabled = StrictBoolean()
    rerankProviderModel = ma.fields.String(allow_none=True, validate=Length(min=1))
    vectorStore = ma.fields.String(validate=OneOf(VECTOR_STORES))
    primaryBackend = ma.fields.String(validate=Length(min=1))
    fallbackBackends = ma.fields.List(ma.fields.String())
    backendConfigs = ma.fields.Dict(keys=ma.fields.String(), validate=plain_json)
    customBaseUrl = ma.fields.String(allow_none=True, validate=guarded_url)
    customModelId = ma.fields.String(allow_none=True, validate=Length(min=1))


@blp.route("/memory")
class MemorySettingsResource(MethodView):
    @blp.response(200, MemorySettingsSchema)
    def get(self):
        """Get the memory settings"""
        return services().memory_settings.get()

    @blp.arguments(MemorySettingsUpdateSchema)
    @blp.response(200, MemorySettingsSchema)
    def put(self, body):
        """Change memory settings

        Writes only the fields given and returns all settings, normalised. A change of
        embedding source starts the backfill at once (and the static model's build, the
        first time static is enabled).
        """
        settings = services().memory_settings.update(body)
        services().request_backfill()
        return settings


class GatewaySettingsSchema(ma.Schema):
    defaultProvider = ma.fields.String(
        allow_none=True,
        metadata={"description": "Provider for models given without a 'provider/' prefix."},
    )


def gateway_settings() -> dict:
    return {"defaultProvider": services().settings.all().get(DEFAULT_PROVIDER_SETTING)}


@blp.route("/gateway")
class GatewaySettingsResource(MethodView):
    @blp.response(200, GatewaySettingsSchema)
    def get(self):
        """Get the gateway settings"""
        return gateway_settings()

    @blp.arguments(GatewaySettingsSchema)
    @blp.response(200, GatewaySettingsSchema)
    def put(self, body):
        """Change the gateway settings"""
        if "defaultProvider" in body:
            provider_id = body["defaultProvider"] or None
            if provider_id and services().providers.get(provider_id) is None:
                abort(422, errors={"json": {"defaultProvider": ["No provider has this id."]}})
            services().settings.put({DEFAULT_PROVIDER_SETTING: provider_id})
        return gateway_settings()
