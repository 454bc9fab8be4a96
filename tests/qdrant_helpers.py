"""What the Qdrant tests share: an app whose vectors go to Qdrant's local mode, and waits."""

from __future__ import annotations

from tests.helpers import ADMIN_TOKEN, eventually

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
