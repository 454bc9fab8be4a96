"""/api/settings/qdrant: the Qdrant tier's settings, health, a search test, cleanup, backfill
and verify, in the reference's shapes (section 10) where it has them."""

from __future__ import annotations

import marshmallow as ma
from flask import current_app
from flask.views import MethodView
from flask_smorest import Blueprint, abort
from marshmallow.validate import Length, OneOf, Range, Regexp

from omniroute.core.config.qdrant import HNSW_EF_CONSTRUCTS, VECTOR_SIZES
from omniroute.core.errors import abort_conflict, abort_invalid
from omniroute.core.fields import ChangeSchema, StrictBoolean, header_value, no_control_characters
from omniroute.core.net import (
    HOST_PATTERN,
    PATH_PATTERN,
    PORT_PATTERN,
    URL_SHAPE,
    BlockedURL,
    check_base_url,
)
from omniroute.core.sealed import KeyNeeded, keeps_stored_key, masked
from omniroute.jobs import request_qdrant_sync
from omniroute.memory.embedding.base import EmbeddingError
from omniroute.memory.qdrant.config import COLLECTION_PATTERN, QUANTIZATIONS, server_url
from omniroute.memory.qdrant.connection import QdrantUnavailable
from omniroute.services import services

blp = Blueprint(
    "qdrant", __name__, url_prefix="/api/settings/qdrant", description="Qdrant vector tier"
)


class QdrantSettingsSchema(ma.Schema):
    enabled = ma.fields.Boolean()
    mode = ma.fields.String(metadata={"description": "server, or local (QDRANT_PATH)"})
    host = ma.fields.String()
    port = ma.fields.Integer()
    url = ma.fields.String(allow_none=True, metadata={"description": "host and port as used"})
    path = ma.fields.String(allow_none=True, metadata={"description": "local mode's folder"})
    collection = ma.fields.String(metadata={"description": "base name of the collections"})
    embeddingModel = ma.fields.String(
        allow_none=True, metadata={"description": "null: the memory's own embedding source"}
    )
    quantization = ma.fields.String()
    vectorSize = ma.fields.Integer(
        allow_none=True, metadata={"description": "null: the embedding model's own size"}
    )
    hnswEfConstruct = ma.fields.Integer()
    hasApiKey = ma.fields.Boolean()
    apiKeyMasked = ma.fields.String(allow_none=True)


# Reference rule: a host without a scheme is served over http://.
QDRANT_HOST = f"^(?:(?:https?://)?{HOST_PATTERN}{PORT_PATTERN}{PATH_PATTERN})?$"


def _whole(allowed: range, description: str, **options) -> ma.fields.Integer:
    """A whole number in `allowed` (a JSON number, never a string of one)."""
    bounds = Range(allowed.start, allowed.stop - 1)
    return ma.fields.Integer(
        strict=True, validate=bounds, metadata={"description": description}, **options
    )


class QdrantSettingsUpdateSchema(ChangeSchema):
    enabled = StrictBoolean(
        metadata={"description": "true needs a healthy Qdrant and a successful search first"}
    )
    host = ma.fields.String(
        validate=[
            Length(max=2048),
            Regexp(QDRANT_HOST, error=f"Must be empty, a host name or address, or {URL_SHAPE}."),
        ],
        metadata={"description": "A host (http:// is added) or a URL; empty: not set"},
    )
    port = ma.fields.Integer(strict=True, validate=Range(1, 65535))
    collection = ma.fields.String(
        validate=Regexp(COLLECTION_PATTERN, error="Use 1 to 100 letters, digits, _ or -.")
    )
    embeddingModel = ma.fields.String(
        allow_none=True,
        validate=[Length(max=400), no_control_characters],
        metadata={"description": "`provider/model`; null or empty: the memory's embedder"},
    )
    quantization = ma.fields.String(validate=OneOf(QUANTIZATIONS))
    vectorSize = _whole(
        VECTOR_SIZES,
        "The size of Qdrant's vectors; a provider's model is asked for it (OpenAI's "
        "`dimensions`), another model must make it. null: the model's own.",
        allow_none=True,
    )
    hnswEfConstruct = _whole(
        HNSW_EF_CONSTRUCTS,
        "The HNSW index's ef_construct (a server's collection made with another is changed).",
    )
    apiKey = ma.fields.String(
        validate=[Length(max=4096), header_value],
        metadata={"description": "empty removes the key"},
    )


class QdrantHealthSchema(ma.Schema):
    ok = ma.fields.Boolean()
    latencyMs = ma.fields.Float()
    error = ma.fields.String()


class QdrantSearchSchema(ma.Schema):
    query = ma.fields.String(required=True, validate=Length(1, 4000))
    apiKeyId = ma.fields.String(
        required=True, validate=Length(min=1), metadata={"description": "the key searched"}
    )
    topK = ma.fields.Integer(load_default=5, strict=True, validate=Range(1, 50))


class QdrantVerifySchema(ma.Schema):
    repair = StrictBoolean(load_default=True)


class QdrantOutcomeSchema(ma.Schema):
    """What every Qdrant action answers: whether it ran, and why not."""

    ok = ma.fields.Boolean()
    error = ma.fields.String(metadata={"description": "why Qdrant could not, when ok is false"})


class QdrantHitSchema(ma.Schema):
    id = ma.fields.String()
    score = ma.fields.Float(metadata={"description": "cosine similarity"})
    key = ma.fields.String()
    type = ma.fields.String()
    content = ma.fields.String()


class QdrantSearchResultSchema(QdrantOutcomeSchema):
    collection = ma.fields.String()
    results = ma.fields.List(ma.fields.Nested(QdrantHitSchema))


class QdrantCleanupResultSchema(QdrantOutcomeSchema):
    deletedCount = ma.fields.Integer()
    retentionDays = ma.fields.Integer()


class QdrantBackfillResultSchema(ma.Schema):
    started = ma.fields.Boolean()
    pending = ma.fields.Integer(metadata={"description": "memories marked for Qdrant"})


class QdrantTenantDriftSchema(ma.Schema):
    apiKeyId = ma.fields.String()
    memories = ma.fields.Integer(metadata={"description": "live memories within retention"})
    points = ma.fields.Integer()
    missing = ma.fields.Integer()
    extra = ma.fields.Integer()


class QdrantVerifyResultSchema(QdrantOutcomeSchema):
    collection = ma.fields.String()
    tenants = ma.fields.List(ma.fields.Nested(QdrantTenantDriftSchema))
    missing = ma.fields.Integer()
    extra = ma.fields.Integer()
    repaired = ma.fields.Boolean()


class QdrantModelSchema(ma.Schema):
    value = ma.fields.String(metadata={"description": "`provider/model`; empty: the memory's"})
    label = ma.fields.String()


class QdrantModelsSchema(ma.Schema):
    models = ma.fields.List(ma.fields.Nested(QdrantModelSchema))


def _shown(config) -> dict:
    return {
        "enabled": config.enabled,
        "mode": config.mode,
        "host": config.host,
        "port": config.port,
        "url": config.url,
        "path": config.path,
        "collection": config.collection,
        "embeddingModel": config.embedding_model,
        "quantization": config.quantization,
        "vectorSize": config.vector_size,
        "hnswEfConstruct": config.hnsw_ef_construct,
        "hasApiKey": bool(config.api_key),
        "apiKeyMasked": masked(config.api_key),
    }


def _probe(config) -> None:
    """Enabling needs Qdrant healthy and a search that works: if not, a 409 (the request is
    well formed and may succeed once the server or the embedding source is up)."""
    try:
        services().qdrant.sync.check(config)
    except QdrantUnavailable as exc:
        abort_conflict("enabled", str(exc))
    except EmbeddingError as exc:
        abort_conflict("enabled", f"embedding the test query failed ({exc.kind}): {exc}")


@blp.route("")
class QdrantSettingsResource(MethodView):
    @blp.response(200, QdrantSettingsSchema)
    def get(self):
        """Get the Qdrant settings (the API key masked)"""
        return _shown(services().qdrant.sync.settings.get())

    @blp.arguments(QdrantSettingsUpdateSchema)
    @blp.response(200, QdrantSettingsSchema)
    def put(self, body):
        """Change the Qdrant settings

        Writes only the fields given. Enabling checks the connection and a search first (422
        naming `enabled` when either fails), makes Qdrant the vector store of retrieval and
        starts the backfill; disabling returns retrieval to the local index.
        """
        qdrant = services().qdrant.sync
        if "embeddingModel" in body:
            body["embeddingModel"] = (body["embeddingModel"] or "").strip() or None
        current, preview = qdrant.settings.get(), qdrant.settings.preview(body)
        try:
            keep = keeps_stored_key(
                body.get("apiKey"),
                given_present="apiKey" in body,
                stored=bool(current.api_key),
                moved=preview.url != current.url,
            )
        except KeyNeeded as exc:
            abort_conflict("apiKey", str(exc))
        if keep and "apiKey" in body:  # sent back masked: the stored key stays
            del body["apiKey"]
            preview = qdrant.settings.preview(body)
        if "host" in body and body["host"].strip():
            try:
                check_base_url(
                    server_url(body["host"], preview.port) or "",
                    allow_local=current_app.config["OMNIROUTE_ALLOW_LOCAL_PROVIDER_URLS"],
                    resolve=False,
                )
            except BlockedURL as exc:
                abort_invalid("host", str(exc))
        if preview.enabled and (body.get("enabled") or _connection_changed(body)):
            _probe(preview)
        was_enabled = qdrant.settings.enabled()
        config = qdrant.settings.update(body)
        qdrant.index.forget()
        if was_enabled and not config.enabled:
            qdrant.reset()
        if config.enabled:
            request_qdrant_sync(services().jobs, qdrant.settings)
        return _shown(config)


def _connection_changed(body) -> bool:
    return bool(
        {"host", "port", "apiKey", "collection", "embeddingModel", "vectorSize"} & set(body)
    )


@blp.route("/health")
class QdrantHealth(MethodView):
    @blp.response(200, QdrantHealthSchema)
    def get(self):
        """Check that Qdrant answers (a server's /readyz), with the latency"""
        config = services().qdrant.sync.settings.get()
        return services().qdrant.sync.index.connection.health(config).as_dict()


@blp.route("/search")
class QdrantSearch(MethodView):
    @blp.arguments(QdrantSearchSchema)
    @blp.response(200, QdrantSearchResultSchema)
    def post(self, body):
        """Search Qdrant by meaning inside one key (a test of the tier)

        Answers `{ok, results}` with each hit's memory, or `{ok: false, error}` when Qdrant
        cannot search now. Unlike the reference's, the search is scoped to `apiKeyId`.
        """
        try:
            collection, found = services().qdrant.sync.search(
                body["apiKeyId"], body["query"], body["topK"]
            )
        except QdrantUnavailable as exc:
            return {"ok": False, "error": str(exc), "results": []}
        except EmbeddingError as exc:
            return {"ok": False, "error": f"embedding failed ({exc.kind}): {exc}", "results": []}
        results = [
            {
                "id": memory.id,
                "score": round(score, 4),
                "key": memory.key,
                "type": memory.type,
                "content": memory.content,
            }
            for memory, score in found
        ]
        return {"ok": True, "collection": collection, "results": results}


@blp.route("/cleanup")
class QdrantCleanup(MethodView):
    @blp.response(200, QdrantCleanupResultSchema)
    def post(self):
        """Delete points of memories that are gone, expired or past retention"""
        try:
            return services().qdrant.sync.cleanup()
        except QdrantUnavailable as exc:
            return {"ok": False, "error": str(exc), "deletedCount": 0}


@blp.route("/backfill")
class QdrantBackfill(MethodView):
    @blp.response(202, QdrantBackfillResultSchema)
    def post(self):
        """Write every memory to Qdrant again, in the background; follow it in engine-status"""
        sync = services().qdrant.sync
        if not sync.settings.enabled():
            abort(409, message="Qdrant is not enabled: enable it first.")
        marked = sync.backfill()
        request_qdrant_sync(services().jobs, sync.settings)
        return {"started": True, "pending": marked}


@blp.route("/verify")
class QdrantVerify(MethodView):
    @blp.arguments(QdrantVerifySchema, required=False)
    @blp.response(200, QdrantVerifyResultSchema)
    def post(self, body):
        """Count points per key against the store; with repair, fix the drift

        Missing points are queued for the sync job; points whose memory is gone are deleted.
        """
        svc = services()
        try:
            report = svc.qdrant.sync.verify(repair=body["repair"])
        except QdrantUnavailable as exc:
            return {"ok": False, "error": str(exc)}
        if report["repaired"]:
            request_qdrant_sync(svc.jobs, svc.qdrant.sync.settings)
        return {"ok": True, **report}


@blp.route("/embedding-models")
class QdrantEmbeddingModels(MethodView):
    @blp.response(200, QdrantModelsSchema)
    def get(self):
        """List the embedding models Qdrant's vectors can come from"""
        svc = services()
        resolution = svc.embeddings.resolve(svc.memory_settings.get())
        own = resolution.embedder
        label = (
            f"The memory's embedding source ({own.source}: {own.model})"
            if own
            else ("The memory's embedding source (none available now)")
        )
        models = [{"value": "", "label": label}]
        for provider in svc.providers.list_providers():
            for model in provider.embedding_models:
                ref = f"{provider.id}/{model['id']}"
                models.append({"value": ref, "label": f"{ref} ({model['dimensions']} dims)"})
        return {"models": models}
