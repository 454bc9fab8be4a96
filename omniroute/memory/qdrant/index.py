"""Qdrant collections and points: what the tier stores and how it searches inside a tenant.

A collection per embedding signature (`{base}__{model-slug}__{hash}`), so a new model or
dimension starts a new collection instead of failing writes and searches into the old one
(reference B8). Cosine distance; the dimension is the first vector's. Points are keyed by the
memory's id and carry only what searches filter by (tenant, session, type, key, creation and
expiry as Unix seconds): the text stays in the SQL store, which the tier reads hits back from.
Every search filters by tenant, expiry and retention (and session when scoped) inside the
search, never a global top-k filtered afterwards.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from qdrant_client import QdrantClient
from qdrant_client import models as qm

from omniroute.memory.model import split_owner
from omniroute.memory.qdrant.config import QdrantConfig
from omniroute.memory.qdrant.connection import QdrantConnection, QdrantUnavailable

BATCH = 256
FACET_LIMIT = 100_000  # tenants a verify can tell apart
OVERSAMPLING_BINARY = 2.0  # binary vectors are coarse: fetch more, rescore with full ones
PAYLOAD_INDEXES = {
    "apiKeyId": qm.KeywordIndexParams(type=qm.KeywordIndexType.KEYWORD, is_tenant=True),
    "sessionId": qm.PayloadSchemaType.KEYWORD,
    "userId": qm.PayloadSchemaType.KEYWORD,
    "type": qm.PayloadSchemaType.KEYWORD,
    "createdAtUnix": qm.PayloadSchemaType.FLOAT,
    "expiresAtUnix": qm.PayloadSchemaType.FLOAT,
}


def collection_name(base: str, signature: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", signature.lower()).strip("-")[:60]
    digest = hashlib.sha256(signature.encode("utf-8")).hexdigest()[:8]
    return f"{base}__{slug}__{digest}"


def unix(moment: str | None) -> float | None:
    return datetime.fromisoformat(moment).timestamp() if moment else None


def quantization_config(mode: str) -> qm.QuantizationConfig | None:
    """The reference's settings: int8 scalar (quantile 0.99) or binary, kept in RAM."""
    if mode == "int8":
        return qm.ScalarQuantization(
            scalar=qm.ScalarQuantizationConfig(
                type=qm.ScalarType.INT8, quantile=0.99, always_ram=True
            )
        )
    if mode == "binary":
        return qm.BinaryQuantization(binary=qm.BinaryQuantizationConfig(always_ram=True))
    return None


def search_params(mode: str) -> qm.SearchParams | None:
    """Quantised candidates rescored with the original vectors."""
    if mode == "none":
        return None
    oversampling = OVERSAMPLING_BINARY if mode == "binary" else None
    return qm.SearchParams(
        quantization=qm.QuantizationSearchParams(rescore=True, oversampling=oversampling)
    )


@dataclass(frozen=True)
class Point:
    memory_id: str
    api_key_id: str
    session_id: str
    type: str
    key: str
    created_at: str
    expires_at: str | None
    vector: np.ndarray
    user_id: str = ""

    def as_struct(self) -> qm.PointStruct:
        return qm.PointStruct(
            id=self.memory_id,
            vector=np.asarray(self.vector, dtype=np.float32).tolist(),
            payload={
                "kind": "omniroute_memory",
                "memoryId": self.memory_id,
                "apiKeyId": self.api_key_id,
                "sessionId": self.session_id,
                "userId": self.user_id,
                "type": self.type,
                "key": self.key,
                "createdAtUnix": unix(self.created_at),
                "expiresAtUnix": unix(self.expires_at),
            },
        )


def _tenant(api_key_id: str) -> qm.FieldCondition:
    return qm.FieldCondition(key="apiKeyId", match=qm.MatchValue(value=api_key_id))


def tenant_filter(api_key_id: str) -> qm.Filter:
    """Every point of one tenant."""
    return qm.Filter(must=[_tenant(api_key_id)])


def _partition(owner: str) -> list:
    """Conditions, all to hold, for the points of one search partition (model.owner_of): a
    key's shared memories, or one user's. A point written before users has no userId: it
    is the key's."""
    api_key_id, user_id = split_owner(owner)
    user = qm.FieldCondition(key="userId", match=qm.MatchValue(value=user_id))
    if not user_id:
        user = qm.Filter(should=[user, qm.IsEmptyCondition(is_empty=qm.PayloadField(key="userId"))])
    return [_tenant(api_key_id), user]


def live_filter(
    owners: tuple[str, ...] | list[str],
    now: float,
    *,
    session_id: str | None = None,
    created_after: float | None,
) -> qm.Filter:
    """The partitions' points that retrieval may serve: not expired, within retention; of
    one session and of none when `session_id` is given."""
    if len(owners) == 1:  # the tenant's condition first, as Qdrant's tenant index likes it
        must: list = _partition(owners[0])
    else:
        must = [qm.Filter(should=[qm.Filter(must=_partition(owner)) for owner in owners])]
    must += [
        qm.Filter(
            should=[
                qm.IsNullCondition(is_null=qm.PayloadField(key="expiresAtUnix")),
                qm.FieldCondition(key="expiresAtUnix", range=qm.Range(gt=now)),
            ]
        ),
    ]
    if session_id is not None:
        sessions = [session_id, ""] if session_id else [""]
        must.append(qm.FieldCondition(key="sessionId", match=qm.MatchAny(any=sessions)))
    if created_after is not None:
        must.append(qm.FieldCondition(key="createdAtUnix", range=qm.Range(gte=created_after)))
    return qm.Filter(must=must)


def stale_filter(now: float, created_before: float) -> qm.Filter:
    """Points of memories past their expiry or their retention."""
    return qm.Filter(
        should=[
            qm.FieldCondition(key="expiresAtUnix", range=qm.Range(lte=now)),
            qm.FieldCondition(key="createdAtUnix", range=qm.Range(lt=created_before)),
        ]
    )


class QdrantIndex:
    def __init__(self, connection: QdrantConnection) -> None:
        self.connection = connection
        self._prepared: dict[tuple, str] = {}  # (where, collection) -> quantization applied

    def exists(self, config: QdrantConfig, name: str) -> bool:
        return self.connection.run(config, lambda c: c.collection_exists(name))

    def collections(self, config: QdrantConfig) -> list[str]:
        found = self.connection.run(config, lambda c: c.get_collections())
        return sorted(c.name for c in found.collections if c.name.startswith(config.collection))

    def ensure(self, config: QdrantConfig, name: str, dim: int) -> bool:
        """Make the collection exist with this dimension, quantisation and HNSW
        ef_construct; True if created. On a server, a collection made with another
        quantisation or ef_construct is changed to these (local mode has no such index)."""
        marker = (config.where, name)
        wanted = (config.quantization, config.hnsw_ef_construct)
        if self._prepared.get(marker) == wanted:
            return False

        def prepare(client: QdrantClient) -> bool:
            if not client.collection_exists(name):
                client.create_collection(
                    name,
                    vectors_config=qm.VectorParams(size=dim, distance=qm.Distance.COSINE),
                    quantization_config=quantization_config(config.quantization),
                    hnsw_config=qm.HnswConfigDiff(ef_construct=config.hnsw_ef_construct),
                )
                if not config.path:  # local mode has no payload indexes (it warns)
                    for field, schema in PAYLOAD_INDEXES.items():
                        client.create_payload_index(name, field, schema, wait=True)
                return True
            info = client.get_collection(name)
            size = getattr(info.config.params.vectors, "size", None)
            if size is not None and size != dim:
                raise QdrantUnavailable(
                    f"collection {name} holds {size}-dimensional vectors, not {dim}"
                )
            if config.path:
                return False
            if _mode(info.config.quantization_config) != config.quantization:
                client.update_collection(
                    name,
                    quantization_config=quantization_config(config.quantization)
                    or qm.Disabled.DISABLED,
                )
            if info.config.hnsw_config.ef_construct != config.hnsw_ef_construct:
                client.update_collection(
                    name, hnsw_config=qm.HnswConfigDiff(ef_construct=config.hnsw_ef_construct)
                )
            return False

        created = self.connection.run(config, prepare)
        self._prepared[marker] = wanted
        return created

    def forget(self) -> None:
        """Collections may have changed behind our back (a test, a deleted collection)."""
        self._prepared.clear()

    def upsert(self, config: QdrantConfig, name: str, points: list[Point]) -> None:
        for start in range(0, len(points), BATCH):
            chunk = [point.as_struct() for point in points[start : start + BATCH]]
            self.connection.run(config, lambda c, chunk=chunk: c.upsert(name, chunk, wait=True))

    def delete(self, config: QdrantConfig, name: str, memory_ids: Iterable[str]) -> None:
        ids = list(memory_ids)
        for start in range(0, len(ids), BATCH):
            selector = qm.PointIdsList(points=ids[start : start + BATCH])
            self.connection.run(config, lambda c, s=selector: c.delete(name, s, wait=True))

    def search(
        self, config: QdrantConfig, name: str, vector: np.ndarray, k: int, where: qm.Filter
    ) -> list[tuple[str, float]]:
        """The k nearest points matching `where`, as (memory id, cosine similarity)."""
        found = self.connection.run(
            config,
            lambda c: c.query_points(
                name,
                query=np.asarray(vector, dtype=np.float32).tolist(),
                query_filter=where,
                limit=k,
                search_params=search_params(config.quantization) if not config.path else None,
                with_payload=False,
            ),
            search=True,
        )
        return [(str(point.id), float(point.score)) for point in found.points]

    def count(self, config: QdrantConfig, name: str, where: qm.Filter | None = None) -> int:
        found = self.connection.run(config, lambda c: c.count(name, count_filter=where, exact=True))
        return found.count

    def tenants(self, config: QdrantConfig, name: str) -> dict[str, int]:
        """Points per apiKeyId."""
        found = self.connection.run(
            config, lambda c: c.facet(name, "apiKeyId", limit=FACET_LIMIT, exact=True)
        )
        return {str(hit.value): hit.count for hit in found.hits}

    def ids(self, config: QdrantConfig, name: str, where: qm.Filter) -> set[str]:
        ids: set[str] = set()
        offset = None
        while True:
            page, offset = self.connection.run(
                config,
                lambda c, o=offset: c.scroll(
                    name, scroll_filter=where, limit=1000, offset=o, with_payload=False
                ),
            )
            ids.update(str(point.id) for point in page)
            if offset is None:
                return ids

    def delete_where(self, config: QdrantConfig, name: str, where: qm.Filter) -> int:
        """Delete the points matching `where`; return how many there were."""
        doomed = self.count(config, name, where)
        if doomed:
            selector = qm.FilterSelector(filter=where)
            self.connection.run(config, lambda c: c.delete(name, selector, wait=True))
        return doomed


def _mode(quantization: object) -> str:
    if isinstance(quantization, qm.ScalarQuantization):
        return "int8"
    if isinstance(quantization, qm.BinaryQuantization):
        return "binary"
    return "none"
