"""/api/memory engine routes: preview a retrieval, the engine's status, providers, reindex."""

from __future__ import annotations

import marshmallow as ma
from flask.views import MethodView
from flask_smorest import Blueprint
from marshmallow.validate import Length, OneOf, Range

from omniroute.core.fields import StrictBoolean
from omniroute.jobs import request_backfill
from omniroute.memory.schemas import user_id_field
from omniroute.memory.search.preview import preview_retrieval
from omniroute.memory.search.retrieval import STRATEGIES
from omniroute.memory.settings import MAX_BUDGET_TOKENS
from omniroute.services import services

blp = Blueprint("memory-engine", __name__, url_prefix="/api/memory", description="Memory engine")


class PreviewSchema(ma.Schema):
    query = ma.fields.String(required=True, validate=Length(min=1))
    apiKeyId = ma.fields.String(required=True, validate=Length(min=1))
    strategy = ma.fields.String(load_default="hybrid", validate=OneOf(STRATEGIES))
    maxTokens = ma.fields.Integer(
        load_default=2000,
        strict=True,
        validate=Range(min=1),
        metadata={"description": f"Clamped to {MAX_BUDGET_TOKENS}, as a chat's budget is."},
    )
    limit = ma.fields.Integer(load_default=20, strict=True, validate=Range(1, 100))
    sessionId = ma.fields.String(
        metadata={"description": "As a chat of this session sees: its memories and those of none."}
    )
    userId = user_id_field(
        "As a chat of this end user sees: their memories, the key's and the global ones.",
        load_default="",
    )


class PreviewItemSchema(ma.Schema):
    id = ma.fields.String()
    type = ma.fields.String()
    key = ma.fields.String()
    content = ma.fields.String()
    scope = ma.fields.String(metadata={"description": "user, key or global"})
    userId = ma.fields.String()
    score = ma.fields.Float()
    tokens = ma.fields.Integer()
    tier = ma.fields.String(metadata={"description": "recent, keyword, vector or hybrid"})
    vecScore = ma.fields.Float(allow_none=True, metadata={"description": "cosine similarity"})
    ftsScore = ma.fields.Float(allow_none=True, metadata={"description": "negated bm25"})
    decay = ma.fields.Float(
        metadata={"description": "typed decay's factor in `score` (1: none; docs/life-cycle.md)"}
    )
    injected = ma.fields.Boolean(
        metadata={"description": "above the relevance floor and within the token budget"}
    )
    belowFloor = ma.fields.Boolean(
        metadata={"description": "scored under MEMORY_RELEVANCE_FLOOR times the best score"}
    )


class ResolutionSchema(ma.Schema):
    embeddingSource = ma.fields.String(allow_none=True)
    embeddingModel = ma.fields.String(allow_none=True)
    vectorStore = ma.fields.String()
    strategyUsed = ma.fields.String()
    fusion = ma.fields.String()
    relevanceFloor = ma.fields.Float()
    rerankApplied = ma.fields.Boolean()
    rerankError = ma.fields.String(allow_none=True)
    fallbackReason = ma.fields.String(allow_none=True)


class PreviewResultSchema(ma.Schema):
    memories = ma.fields.List(ma.fields.Nested(PreviewItemSchema))
    resolution = ma.fields.Nested(ResolutionSchema)
    totalTokensUsed = ma.fields.Integer()
    budgetMaxTokens = ma.fields.Integer()


class ReindexSchema(ma.Schema):
    force = StrictBoolean(
        required=True,
        metadata={"description": "true: re-embed every memory, not only those without a vector"},
    )
    limit = ma.fields.Integer(
        strict=True,
        validate=Range(1, 1_000_000),
        metadata={
            "description": "Embed at most this many in this run (the specification's batch); "
            "absent: all of them. Writes still embed their own memories."
        },
    )


class ReindexResultSchema(ma.Schema):
    started = ma.fields.Boolean()
    pending = ma.fields.Integer()


@blp.route("/retrieve-preview")
class RetrievePreview(MethodView):
    @blp.arguments(PreviewSchema)
    @blp.response(200, PreviewResultSchema)
    def post(self, body):
        """Preview what retrieval would inject for a query

        Ranks the key's memories exactly as the gateway would (same settings, same engine),
        shows why each ranked where it did, and marks which fit the token budget. Changes
        nothing: no access is counted.
        """
        svc = services()
        return preview_retrieval(
            svc.retriever,
            svc.memory_settings.get(),
            api_key_id=body["apiKeyId"],
            query=body["query"],
            strategy=body["strategy"],
            max_tokens=body["maxTokens"],
            limit=body["limit"],
            session_id=body.get("sessionId"),
            user_id=body["userId"],
        )


@blp.route("/engine-status")
class EngineStatus(MethodView):
    @blp.response(200)
    def get(self):
        """Show the engine: keyword index, embedding source, vector store, backfill and jobs

        `jobs` says where background jobs run (in this process, or RQ with each worker's
        heartbeat and the jobs waiting per queue) and how many chat texts wait in the
        extraction outbox.
        """
        return services().engine_report()


@blp.route("/embedding-providers")
class EmbeddingProviders(MethodView):
    @blp.response(200)
    def get(self):
        """List providers with embedding models, and whether each has a key"""
        return {
            "providers": [
                {
                    "provider": provider.id,
                    "hasKey": provider.has_key,
                    "models": [
                        {
                            "id": f"{provider.id}/{model['id']}",
                            "name": model["id"],
                            "dimensions": model["dimensions"],
                        }
                        for model in provider.embedding_models
                    ],
                }
                for provider in services().providers.list_providers()
                if provider.embedding_models
            ]
        }


@blp.route("/reindex")
class Reindex(MethodView):
    @blp.arguments(ReindexSchema)
    @blp.response(202, ReindexResultSchema)
    def post(self, body):
        """Start embedding the memories that need a vector (all of them with force)

        Runs in the background until none is left; follow it in engine-status.
        """
        svc = services()
        if body["force"]:
            svc.backfill.mark_all_for_reindex()
        pending = svc.backfill.pending()  # before the backfill starts eating into it
        request_backfill(svc.jobs, body.get("limit"))
        return {"started": True, "pending": pending}
