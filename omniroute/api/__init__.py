"""The REST API: flask-smorest blueprints, the OpenAPI spec at /openapi.json, docs at /docs."""

from __future__ import annotations

import threading
from typing import Any

import swagger_ui_bundle
from flask import Blueprint, Flask, request, send_from_directory
from flask_smorest import Api

from omniroute.api import (
    backends,
    engine,
    health,
    keys,
    memories,
    memory_life,
    memory_transfer,
    providers,
    qdrant,
    settings,
)
from omniroute.api.mem0 import blueprint as mem0
from omniroute.api.mem0.schemas import Mem0ErrorSchema
from omniroute.api.operation_ids import OperationIds
from omniroute.api.spec_errors import ChangesNeedAField, ErrorResponses, register_error_responses
from omniroute.core.errors import ErrorSchema, http_error_response
from omniroute.web.auth import require_admin

DOCS_ASSETS_URL = "/docs/assets/"


class OmniApi(Api):
    """flask-smorest's Api, documenting and answering errors in our one JSON shape.

    A blueprint's routes serve as soon as it is registered; its operations enter the spec
    when the spec is first read (/openapi.json, /docs, a plugin), in registration order.
    Building them is most of an app's start-up, and a process that never serves the spec
    (a worker, an app made for one test) never needs them.
    """

    ERROR_SCHEMA = ErrorSchema

    def __init__(self, *args, **kwargs) -> None:
        self._undocumented: list[tuple[Any, str, Any]] = []
        self._documenting = threading.Lock()
        super().__init__(*args, **kwargs)

    @property
    def spec(self):
        with self._documenting:
            pending, self._undocumented = self._undocumented, []
            for blp, name, parameters in pending:
                blp.register_views_in_doc(self, self._app, self._spec, name=name,
                                          parameters=parameters)  # fmt: skip
                self._spec.tag({"name": name, "description": blp.description})
        return self._spec

    @spec.setter
    def spec(self, value) -> None:
        self._spec = value

    def register_blueprint(self, blp, *, parameters=None, **options):
        """flask-smorest's, with the documenting left for the spec's first reader."""
        name = options.get("name", blp.name)
        self._app.extensions["flask-smorest"]["blp_name_to_api"][name] = self
        self._app.register_blueprint(blp, **options)
        self._undocumented.append((blp, name, parameters))

    def handle_http_exception(self, error):
        return http_error_response(error)


def _docs_assets() -> Blueprint:
    """Swagger UI's files from the swagger-ui-bundle package: /docs works with no network."""
    blueprint = Blueprint("docs_assets", __name__)

    @blueprint.get(f"{DOCS_ASSETS_URL}<path:filename>")
    def asset(filename: str):
        return send_from_directory(swagger_ui_bundle.swagger_ui_path, filename)

    return blueprint


def _guard_api() -> None:
    # Every /api path needs the admin token, unknown ones too (no probing for routes).
    if request.path == "/api" or request.path.startswith("/api/"):
        require_admin()


def init_app(app: Flask) -> OmniApi:
    """Register the REST API and its docs; return the Api, on which /v1 registers too."""
    app.config.update(
        API_TITLE="OmniRoute Memory",
        API_VERSION="1",
        OPENAPI_VERSION="3.0.3",
        OPENAPI_URL_PREFIX="/",
        OPENAPI_JSON_PATH="openapi.json",
        OPENAPI_SWAGGER_UI_PATH="docs",
        OPENAPI_SWAGGER_UI_URL=DOCS_ASSETS_URL,
        API_SPEC_OPTIONS={
            "info": {
                "description": "Memory REST API of the OmniRoute gateway. Every /api route "
                "needs `Authorization: Bearer <admin token>`."
            },
            "security": [{"adminToken": []}],
            "components": {
                "securitySchemes": {
                    "adminToken": {"type": "http", "scheme": "bearer"},
                    "gatewayKey": {
                        "type": "http",
                        "scheme": "bearer",
                        "description": "A gateway API key (`sk-omr-...`), as the OpenAI SDK "
                        "sends it; /v1 and /mcp take it.",
                    },
                    "mem0Token": {
                        "type": "apiKey",
                        "in": "header",
                        "name": "Authorization",
                        "description": "A gateway key as mem0's client sends its own: "
                        "`Token sk-omr-...` (docs/mem0.md).",
                    },
                }
            },
        },
    )
    app.url_map.converters["memory_id"] = memories.MemoryIdConverter
    api = OmniApi(app)
    api.register_converter(memories.MemoryIdConverter, lambda converter: {"type": "string"})
    # before any path or schema is added
    api.spec.plugins.extend([OperationIds(), ErrorResponses(), ChangesNeedAField()])
    api.spec.components.schema("Mem0Error", schema=Mem0ErrorSchema)
    register_error_responses(api.spec)
    app.before_request(_guard_api)
    app.register_blueprint(_docs_assets())
    modules = (
        engine,
        memory_transfer,
        memory_life,
        backends,
        memories,
        keys,
        providers,
        settings,
        qdrant,
    )
    for module in (*modules, health):
        api.register_blueprint(module.blp)
    api.register_blueprint(mem0.blp)  # mem0's platform routes (docs/mem0.md)
    return api
