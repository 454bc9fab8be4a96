"""What each tab of /dashboard/memory shows, read from the query string."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import marshmallow as ma
from flask import url_for

from omniroute.core.sealed import masked
from omniroute.memory.backends.base import BackendError
from omniroute.memory.backends.local import LOCAL_ID
from omniroute.memory.embedding.base import EmbeddingError
from omniroute.memory.listing import ListingQuery, filters_from
from omniroute.memory.model import user_id_problem
from omniroute.memory.qdrant.config import QUANTIZATIONS
from omniroute.memory.qdrant.connection import QdrantUnavailable
from omniroute.memory.search.preview import preview_retrieval
from omniroute.memory.search.retrieval import STRATEGIES
from omniroute.memory.settings import BY_NAME, MemoryConfig
from omniroute.services import Services

PAGE_SIZE = 20
PREVIEW_LIMIT = 20
_LISTING = ListingQuery(
    only=("q", "type", "apiKeyId", "userId", "scope", "page"), unknown=ma.EXCLUDE
)
# The scope filter's choices, as the list names them.
SCOPE_LABELS = {"global": "Global (no key)", "key": "Keys' shared", "user": "End users'"}


BUDGET_SETTING = BY_NAME["maxTokens"]


def _whole_number(raw: str | None, default: int, low: int, high: int) -> int | None:
    """The number in `raw`, `default` when empty, None when it is not one in [low, high]."""
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if low <= value <= high else None


def memories_tab(svc: Services, args: Mapping[str, str]) -> dict[str, Any]:
    """The list, read with the REST API's own query schema; a bad value is left out. It is
    the serving backend's; a remote one's failure is shown, not raised."""
    try:
        query = _LISTING.load(args)
    except ma.ValidationError as exc:
        query = {"page": 1, **exc.valid_data}
    filters = {
        "q": query.get("q", "").strip(),
        "type": query.get("type", ""),
        "apiKeyId": query.get("apiKeyId", ""),
        "userId": query.get("userId", ""),
        "scope": query.get("scope", ""),
    }
    given = {name: value for name, value in filters.items() if value}
    page = query["page"]
    try:
        found = _listed(svc, filters, page)
        last = max(found["totalPages"], 1)
        if page > last:  # the last page emptied (deleted memories): show the new last page
            found = _listed(svc, filters, last)
        failure = None
    except BackendError as exc:
        found = {"data": [], "total": 0, "page": 1, "totalPages": 0, "backend": None,
                 "stats": {"total": 0, "tokensUsed": 0, "hitRate": 0.0}}  # fmt: skip
        failure = str(exc)
    return {
        "filters": filters,
        "filtered": bool(given),
        "scope_labels": SCOPE_LABELS,
        "listing": found,
        "serving": _serving_name(svc),
        "backend_failure": failure,
        "export_url": url_for("memory-transfer.MemoryExport", **given),
        "page_url": lambda number: url_for("studio.memory", tab="memories", page=number, **given),
    }


def _listed(svc: Services, filters: Mapping[str, str], page: int) -> dict[str, Any]:
    offset = (page - 1) * PAGE_SIZE
    return svc.serving.listing(filters_from(filters), limit=PAGE_SIZE, offset=offset)


def _serving_name(svc: Services) -> dict[str, Any]:
    """The serving backend's id and name, and whether it is the local store."""
    primary = svc.backends.current().primary
    return {"id": primary.id, "name": primary.display_name, "local": primary.id == LOCAL_ID}


def compact_card(svc: Services, args: Mapping[str, str], keys: list) -> dict[str, Any]:
    """ "Compact old memories": the form, and its dry run once the admin asked for one."""
    form = {"days": args.get("compactDays", ""), "apiKeyId": args.get("compactKey", "")}
    errors = {}
    preview = None
    if form["days"]:
        days = _whole_number(form["days"], 30, 1, 365)
        if days is None:
            errors["compactDays"] = "Give a whole number of days from 1 to 365."
        elif form["apiKeyId"] and form["apiKeyId"] not in {key.id for key in keys}:
            errors["compactKey"] = "Choose an API key, or all keys."
        else:
            run = svc.summarizer.older_than(
                days=days, api_key_id=form["apiKeyId"] or None, dry_run=True
            )
            preview = {**run.as_dict(), "olderThanDays": days}
    return {"compact_form": form, "compact_errors": errors, "compact_preview": preview}


def playground_tab(
    svc: Services, args: Mapping[str, str], settings: MemoryConfig, keys: list
) -> dict[str, Any]:
    # Revoked keys' memories can be previewed too, but an active key is the likelier question.
    active = [key.id for key in keys if key.revoked_at is None]
    default_key = (active or [key.id for key in keys] or [""])[0]
    form = {
        "query": args.get("query", ""),
        "strategy": args.get("strategy") or "hybrid",
        "maxTokens": args.get("maxTokens") or str(settings.max_tokens or 2000),
        "apiKeyId": args.get("apiKeyId") or default_key,
        "userId": args.get("userId", "").strip(),
    }
    errors = {}
    if form["strategy"] not in STRATEGIES:
        errors["strategy"] = "Choose one of the strategies listed."
    budget = _whole_number(form["maxTokens"], 2000, 1, BUDGET_SETTING.high)
    if budget is None:
        errors["maxTokens"] = f"Give a whole number of tokens from 1 to {BUDGET_SETTING.high}."
    if form["apiKeyId"] not in {key.id for key in keys}:
        errors["apiKeyId"] = "Choose an API key."
    if form["userId"] and (problem := user_id_problem(form["userId"])):
        errors["userId"] = problem
    preview = None
    if form["query"].strip() and not errors:
        preview = preview_retrieval(
            svc.retriever,
            settings,
            api_key_id=form["apiKeyId"],
            query=form["query"],
            strategy=form["strategy"],
            max_tokens=budget,
            limit=PREVIEW_LIMIT,
            user_id=form["userId"],
        )
    return {
        "form": form,
        "errors": errors,
        "preview": preview,
        "strategies": STRATEGIES,
        "budget_high": BUDGET_SETTING.high,
    }


def qdrant_card(svc: Services, args: Mapping[str, str], keys: list) -> dict[str, Any]:
    """The Qdrant card: its settings, models, and the test the admin asked for, if any."""
    sync = svc.qdrant.sync
    test: dict[str, Any] | None = None
    active = [key.id for key in keys if key.revoked_at is None]
    form = {
        "query": args.get("qdrantQuery", ""),
        "apiKeyId": args.get("qdrantKey") or (active or [""])[0],
    }
    if args.get("qdrantTest") == "health":
        test = {"kind": "health", **sync.index.connection.health(sync.settings.get()).as_dict()}
    elif args.get("qdrantTest") == "search" and form["query"].strip():
        try:
            collection, found = sync.search(form["apiKeyId"], form["query"], PREVIEW_LIMIT)
            test = {"kind": "search", "ok": True, "collection": collection, "found": found}
        except (QdrantUnavailable, EmbeddingError) as exc:
            test = {"kind": "search", "ok": False, "error": str(exc)}
    providers = svc.providers.list_providers()
    return {
        "qdrant_settings": sync.settings.get(),
        "qdrant_masked": masked(sync.settings.get().api_key),
        "qdrant_test": test,
        "qdrant_form": form,
        "qdrant_quantizations": QUANTIZATIONS,
        "qdrant_models": [
            f"{provider.id}/{model['id']}"
            for provider in providers
            for model in provider.embedding_models
        ],
    }


def engine_tab(svc: Services) -> dict[str, Any]:
    status = svc.engine_report()
    periodic = svc.periodic_report()
    vectors = status["vectorStore"]
    total = vectors["memoryCount"]
    embedded = max(total - vectors["needsReindex"], 0)
    providers = svc.providers.list_providers()
    return {
        "status": status,
        "periodic": periodic,
        "embedded": embedded,
        "total": total,
        "percent": math.floor(100 * embedded / total) if total else 100,
        # Poll fast while vectors are being made, slowly otherwise.
        "busy": bool(vectors["needsReindex"] and status["embedding"]["available"])
        or bool(status["qdrant"]["enabled"] and status["qdrant"]["sync"]["running"]),
        "embedding_models": [
            f"{provider.id}/{model['id']}"
            for provider in providers
            for model in provider.embedding_models
        ],
        "chat_models": [
            f"{provider.id}/{model}" for provider in providers for model in provider.models
        ],
    }


LOCAL_SETTING_NAME = "sqlite"  # how the settings name the local store, as the reference does


def backends_card(svc: Services, args: Mapping[str, str]) -> dict[str, Any]:
    """The memory backends card: who is registered, primary and fallbacks as the settings
    name them, and the connection test the admin asked for (health is checked only then:
    a remote backend may take its whole timeout to fail)."""
    manager = svc.backends.current()
    registered = manager.registered()
    test = None
    asked = args.get("backendTest")
    if asked in {backend["id"] for backend in registered}:
        health = manager.backend(asked).health()
        test = {"id": asked, "ok": health.ok, "latencyMs": health.latency_ms,
                "message": health.message}  # fmt: skip
    return {
        "backends": [
            {**backend, "name": LOCAL_SETTING_NAME if backend["id"] == LOCAL_ID else backend["id"]}
            for backend in registered
        ],
        "backend_test": test,
    }
