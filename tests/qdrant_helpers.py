"""What the Qdrant tests share: an app with the static model, waits, and stray points."""

from __future__ import annotations

from omniroute.factory import create_app
from omniroute.memory.qdrant.index import Point
from tests.helpers import ADMIN_TOKEN, app_settings, eventually

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def enable(client, **more) -> dict:
    response = client.put("/api/settings/qdrant", json={"enabled": True, **more}, headers=ADMIN)
    assert response.status_code == 200, response.json
    return response.json


def synced(svc, timeout: float = 30.0) -> None:
    """Wait until Qdrant has taken every change and its backfill is done."""

    def caught_up() -> bool:
        svc.jobs.wait(timeout)
        sync = svc.qdrant.sync
        if sync.progress.running or sync.outbox.stats()["pending"]:
            return False
        return sync.is_ready(sync.target())

    assert eventually(caught_up, timeout=timeout), svc.qdrant.status(svc.memory_settings.get())


def points(svc, api_key_id: str | None = None) -> set[str]:
    """The memory ids Qdrant holds (for one key, or all)."""
    from omniroute.memory.qdrant.index import tenant_filter

    sync = svc.qdrant.sync
    target = sync.target()
    where = tenant_filter(api_key_id) if api_key_id else None
    if where is None:
        return set().union(
            *[
                sync.index.ids(target.config, target.collection, tenant_filter(tenant))
                for tenant in sync.index.tenants(target.config, target.collection)
            ]
        )
    return sync.index.ids(target.config, target.collection, where)


def memory_app(tmp_path, database_url, static_path, **more):
    """An app with memory on, embedded by the distilled static model; `more` configures
    Qdrant (QDRANT_PATH or QDRANT_URL) and the rest."""
    app = create_app(
        app_settings(tmp_path, database_url, MEMORY_STATIC_MODEL=str(static_path), **more)
    )
    app.extensions["omniroute"].memory_settings.update(
        {"enabled": True, "staticEnabled": True, "embeddingSource": "static"}
    )
    return app


def put_points(svc, owner: str, points_by_id: dict[str, tuple[str, str | None]]) -> None:
    """Write points straight into Qdrant, behind the store's back: {id: (created, expires)}."""
    sync = svc.qdrant.sync
    target = sync.target()
    vector = target.embedder.embed(["golden retriever dog"])[0]
    sync.index.upsert(
        target.config,
        target.collection,
        [
            Point(memory_id, owner, "", "factual", memory_id[-4:], created, expires, vector)
            for memory_id, (created, expires) in points_by_id.items()
        ],
    )


def chat(client, secret: str, text: str):
    """One chat through the gateway (provider `fake`), answered 200."""
    response = client.post(
        "/v1/chat/completions",
        json={"model": "fake/m", "messages": [{"role": "user", "content": text}]},
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 200, response.json
    return response
