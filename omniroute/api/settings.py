"""/api/settings: the runtime memory and gateway settings.

The memory settings' schemas are built from the one registry in omniroute.memory.settings.
"""

from __future__ import annotations

import marshmallow as ma
from flask.views import MethodView
from flask_smorest import Blueprint, abort
from marshmallow.validate import Length, OneOf

from omniroute.core.errors import abort_unknown
from omniroute.core.fields import ChangeSchema, StrictBoolean, StrictNumber, plain_json
from omniroute.core.providers.schemas import HTTP_URL, guarded_url
from omniroute.jobs import request_backfill
from omniroute.memory import settings as registry
from omniroute.memory.backends.kinds import BadBackendConfig, config_json_schema
from omniroute.services import services

blp = Blueprint("settings", __name__, url_prefix="/api/settings", description="Settings")


def _served(setting: registry.Setting) -> ma.fields.Field:
    """How GET shows a setting."""
    metadata = {"description": setting.help}
    if setting.kind == registry.BOOLEAN:
        return ma.fields.Boolean(metadata=metadata)
    if setting.kind == registry.INTEGER:
        return ma.fields.Integer(metadata=metadata)
    if setting.kind == registry.STRINGS:
        return ma.fields.List(ma.fields.String(), metadata=metadata)
    if setting.kind == registry.OBJECT:
        return ma.fields.Dict(metadata=metadata)
    return ma.fields.String(allow_none=setting.nullable, metadata=metadata)


def _accepted(setting: registry.Setting) -> ma.fields.Field:
    """How PUT reads a setting: only values of its kind (numbers are clamped afterwards)."""
    metadata = {"description": f"{setting.help} Accepts: {setting.accepted()}."}
    if setting.kind == registry.BOOLEAN:
        return StrictBoolean(metadata=metadata)
    if setting.kind == registry.INTEGER:
        return StrictNumber(metadata=metadata)
    if setting.kind == registry.CHOICE:
        return ma.fields.String(validate=OneOf(setting.choices), metadata=metadata)
    if setting.kind == registry.STRINGS:
        return ma.fields.List(ma.fields.String(), metadata=metadata)
    if setting.kind == registry.OBJECT:
        if setting.name == "backendConfigs":
            metadata["additionalProperties"] = config_json_schema()
        return ma.fields.Dict(keys=ma.fields.String(), validate=plain_json, metadata=metadata)
    validate = [HTTP_URL, guarded_url] if setting.kind == registry.URL else Length(min=1)
    return ma.fields.String(allow_none=setting.nullable, validate=validate, metadata=metadata)


MemorySettingsSchema = ma.Schema.from_dict(
    {setting.name: _served(setting) for setting in registry.SETTINGS},
    name="MemorySettingsSchema",
)
MemorySettingsUpdateSchema = ChangeSchema.from_dict(
    {setting.name: _accepted(setting) for setting in registry.SETTINGS},
    name="MemorySettingsUpdateSchema",
)


@blp.route("/memory")
class MemorySettingsResource(MethodView):
    @blp.response(200, MemorySettingsSchema)
    def get(self):
        """Get the memory settings

        Backend API keys in `backendConfigs` show as `***` and their last four characters.
        """
        svc = services()
        return svc.backends.public(svc.memory_settings.get())

    @blp.arguments(MemorySettingsUpdateSchema)
    @blp.response(200, MemorySettingsSchema)
    def put(self, body):
        """Change memory settings

        Writes only the fields given and returns all settings, normalised: every field is
        optional, numbers are rounded and clamped to their range. A change of embedding
        source starts the backfill at once (and the static model's build, the first time
        static is enabled). Memory backends are checked before anything is stored: an
        unknown `primaryBackend` or fallback, or a `backendConfigs` entry a backend cannot
        use, is a 422 naming the field; a backend's `apiKey` is sealed (sending back the
        masked value keeps the stored key).
        """
        svc = services()
        try:
            body = svc.backends.checked(body)
        except BadBackendConfig as exc:
            abort(exc.status, message=str(exc), errors={"json": {exc.field: [str(exc)]}})
        settings = svc.memory_settings.update(body)
        svc.backends.current()  # this process at once; the others at their next use
        request_backfill(svc.jobs)
        return svc.backends.public(settings)


class GatewaySettingsSchema(ma.Schema):
    defaultProvider = ma.fields.String(
        allow_none=True,
        metadata={"description": "Provider for models given without a 'provider/' prefix."},
    )


class GatewaySettingsChangeSchema(GatewaySettingsSchema, ChangeSchema):
    pass


@blp.route("/gateway")
class GatewaySettingsResource(MethodView):
    @blp.response(200, GatewaySettingsSchema)
    def get(self):
        """Get the gateway settings"""
        return {"defaultProvider": services().providers.default_id()}

    @blp.arguments(GatewaySettingsChangeSchema)
    @blp.response(200, GatewaySettingsSchema)
    def put(self, body):
        """Change the gateway settings"""
        providers = services().providers
        if "defaultProvider" in body:
            provider_id = body["defaultProvider"] or None
            if provider_id and providers.get(provider_id) is None:
                abort_unknown("defaultProvider", "No provider has this id.")
            providers.set_default(provider_id)
        return {"defaultProvider": providers.default_id()}
