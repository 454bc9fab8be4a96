"""/v1/embeddings and /v1/models/{model}: the OpenAI surface without memory.

Embeddings go to the provider as they came (the model made bare), and its answer (status,
body, rate-limit headers) comes back as it is; a provider's failure is answered as chat's
is. A model is described from the registry, as /v1/models lists it.
"""

from __future__ import annotations

from flask import Response
from flask.views import MethodView
from flask_smorest import abort

from omniroute.core.providers.registry import UnknownProvider, resolve_model
from omniroute.proxy.blueprint import (
    GATEWAY_SECURITY,
    bad_field,
    blp,
    body_with_model,
    unknown_model,
)
from omniroute.proxy.routes import model_entry
from omniroute.proxy.schemas import EmbeddingRequestSchema, ModelSchema, request_body
from omniroute.proxy.upstream import UpstreamFailure, fetch, prepare_upstream
from omniroute.services import services

EMBEDDINGS_RESPONSE = {
    "200": {
        "description": "The provider's embeddings (OpenAI format), relayed as they come.",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}


def _embeddable(given) -> bool:
    """OpenAI's `input`: a string, or a non-empty list of strings, of token ids, or of token
    arrays; a provider answers anything else with an error of its own, or worse."""
    if isinstance(given, str):
        return bool(given)
    if not isinstance(given, list) or not given:
        return False
    return all(isinstance(item, str) or _token(item) or _tokens(item) for item in given)


def _token(item) -> bool:
    return isinstance(item, int) and not isinstance(item, bool)


def _tokens(item) -> bool:
    return isinstance(item, list) and bool(item) and all(_token(token) for token in item)


@blp.route("/embeddings")
class Embeddings(MethodView):
    @blp.doc(
        security=GATEWAY_SECURITY,
        responses=EMBEDDINGS_RESPONSE,
        requestBody=request_body(EmbeddingRequestSchema),
    )
    def post(self):
        """Create embeddings (OpenAI format) with a provider's model; no memory involved"""
        body = body_with_model()
        if not _embeddable(body.get("input")):
            bad_field(
                "input",
                "input is required: a string, or a list of strings, of token ids or of token "
                "arrays (lists of whole numbers).",
            )
        svc = services()
        try:
            provider, model = resolve_model(svc.providers, body["model"])
        except UnknownProvider as exc:
            unknown_model(exc)
        forwarded = {**body, "model": model}
        try:
            request = prepare_upstream(svc.provider_client, provider, "/embeddings", forwarded)
            answer = fetch(svc.provider_client, provider, request)
        except UpstreamFailure as exc:
            abort(exc.status, message=exc.message, code="upstream_unavailable")
        return Response(
            answer.body, answer.status, answer.headers, content_type=answer.content_type
        )


MODEL_ID = [
    {
        "in": "path",
        "name": "model_id",
        "description": "`provider/model`, or a bare model of the default provider",
        "schema": {"type": "string", "pattern": "^[!-~]+$"},  # as providers name models
    }
]


@blp.route("/models/<path:model_id>", parameters=MODEL_ID)
class ModelItem(MethodView):
    @blp.doc(security=GATEWAY_SECURITY)
    @blp.response(200, ModelSchema)
    def get(self, model_id):
        """Describe one model, `provider/model` (OpenAI format)"""
        svc = services()
        for provider in svc.providers.list_providers():
            for model in provider.models:
                if model_id in (f"{provider.id}/{model}", model) and (
                    "/" in model_id or provider.id == svc.providers.default_id()
                ):
                    return model_entry(provider, model)
        abort(404, message=f"The model {model_id!r} does not exist.", code="model_not_found")
