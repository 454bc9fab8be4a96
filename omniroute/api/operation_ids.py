"""One `operationId` for every operation of the spec, chosen to read well in generated code
(`openapi-python-client` makes `list_memories`, `create_chat_completion`...).

An apispec plugin sets them as each path is added, from one table; a route missing from it
fails the app's start (and so every test), so a new route cannot reach the spec unnamed.
"""

from __future__ import annotations

from typing import Any

from apispec import BasePlugin

OPERATION_IDS: dict[tuple[str, str], str] = {
    ("get", "/api/memory"): "listMemories",
    ("post", "/api/memory"): "createMemory",
    ("delete", "/api/memory"): "clearMemories",
    ("get", "/api/memory/{memory_id}"): "getMemory",
    ("put", "/api/memory/{memory_id}"): "updateMemory",
    ("delete", "/api/memory/{memory_id}"): "deleteMemory",
    ("get", "/api/memory/{memory_id}/history"): "getMemoryHistory",
    ("get", "/api/memory/health"): "checkMemoryHealth",
    ("get", "/api/memory/export"): "exportMemories",
    ("post", "/api/memory/import"): "importMemories",
    ("post", "/api/memory/retrieve-preview"): "previewRetrieval",
    ("get", "/api/memory/engine-status"): "getEngineStatus",
    ("get", "/api/memory/embedding-providers"): "listEmbeddingProviders",
    ("post", "/api/memory/reindex"): "startReindex",
    ("post", "/api/memory/summarize"): "summarizeMemories",
    ("post", "/api/memory/compact"): "compactMemories",
    ("post", "/api/memory/erase"): "eraseEndUser",
    ("get", "/api/jobs"): "listPeriodicJobs",
    ("post", "/api/jobs/{job_id}/run"): "runPeriodicJob",
    ("get", "/api/keys"): "listKeys",
    ("post", "/api/keys"): "createKey",
    ("delete", "/api/keys/{key_id}"): "deleteKey",
    ("patch", "/api/keys/{key_id}"): "updateKey",
    ("get", "/api/providers"): "listProviders",
    ("post", "/api/providers"): "createProvider",
    ("get", "/api/providers/{provider_id}"): "getProvider",
    ("put", "/api/providers/{provider_id}"): "updateProvider",
    ("delete", "/api/providers/{provider_id}"): "deleteProvider",
    ("get", "/api/settings/memory"): "getMemorySettings",
    ("put", "/api/settings/memory"): "updateMemorySettings",
    ("get", "/api/settings/gateway"): "getGatewaySettings",
    ("put", "/api/settings/gateway"): "updateGatewaySettings",
    ("get", "/api/settings/qdrant"): "getQdrantSettings",
    ("put", "/api/settings/qdrant"): "updateQdrantSettings",
    ("get", "/api/settings/qdrant/health"): "checkQdrantHealth",
    ("post", "/api/settings/qdrant/search"): "searchQdrant",
    ("post", "/api/settings/qdrant/cleanup"): "cleanupQdrant",
    ("post", "/api/settings/qdrant/backfill"): "backfillQdrant",
    ("post", "/api/settings/qdrant/verify"): "verifyQdrant",
    ("get", "/api/settings/qdrant/embedding-models"): "listQdrantEmbeddingModels",
    ("get", "/api/memory/backends"): "listMemoryBackends",
    ("get", "/healthz"): "getLiveness",
    ("get", "/readyz"): "getReadiness",
    ("get", "/metrics"): "getMetrics",
    ("post", "/v1/chat/completions"): "createChatCompletion",
    ("post", "/v1/responses"): "createResponse",
    ("get", "/v1/models"): "listModels",
    ("get", "/v1/models/{model_id}"): "getModel",
    ("post", "/v1/embeddings"): "createEmbeddings",
    ("get", "/v1/ping/"): "pingMem0",
    ("post", "/v3/memories/add/"): "addMem0Memories",
    ("post", "/v3/memories/"): "listMem0Memories",
    ("post", "/v3/memories/search/"): "searchMem0Memories",
    ("get", "/v1/memories/{memory_id}/"): "getMem0Memory",
    ("put", "/v1/memories/{memory_id}/"): "updateMem0Memory",
    ("delete", "/v1/memories/{memory_id}/"): "deleteMem0Memory",
    ("get", "/v1/memories/{memory_id}/history/"): "getMem0MemoryHistory",
    ("delete", "/v1/memories/"): "deleteMem0Memories",
    ("get", "/v1/entities/"): "listMem0Entities",
    ("delete", "/v2/entities/{entity_type}/{entity_id}/"): "deleteMem0Entity",
}
METHODS = frozenset({"get", "put", "post", "delete", "patch", "options", "head"})


class UnnamedOperation(LookupError):
    pass


class OperationIds(BasePlugin):
    """Names each operation from OPERATION_IDS as apispec adds its path."""

    def operation_helper(
        self, path: str | None = None, operations: dict[str, Any] | None = None, **kwargs: Any
    ) -> None:
        for method, operation in (operations or {}).items():
            if method not in METHODS:
                continue
            try:
                operation["operationId"] = OPERATION_IDS[(method, path)]
            except KeyError:
                raise UnnamedOperation(
                    f"{method.upper()} {path} has no operationId: add one to "
                    "omniroute/api/operation_ids.py"
                ) from None
