"""The MemoryManager's rules (REFERENCE section 13) over the local store and a generic
backend on a loopback memory service."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client import REGISTRY

from omniroute.memory.backends.base import ListQuery, NewMemory, SearchQuery
from omniroute.memory.backends.generic import GenericConfig, GenericMemoryBackend
from omniroute.memory.backends.local import LOCAL_ALIASES, LocalBackend
from omniroute.memory.backends.manager import MemoryManager, UnknownBackend
from omniroute.memory.model import MemoryFilter

pytestmark = pytest.mark.both_stores

NEW = NewMemory(api_key_id="alice", key="preference:editor", content="I prefer Vim")


@pytest.fixture
def local(svc):
    return LocalBackend(svc.memories, svc.retriever, svc.memory_settings)


@pytest.fixture
def remote(memory_service):
    with httpx.Client(follow_redirects=False) as http:
        config = GenericConfig(base_url=memory_service.url, backend_type="mem0")
        yield GenericMemoryBackend("brain", "Brain", config, http, allow_local=True)


@pytest.fixture
def manager(local, remote):
    manager = MemoryManager(local, LOCAL_ALIASES)
    manager.register(remote)
    yield manager
    manager.shutdown()


def synced(backend: str, operation: str, outcome: str) -> float:
    labels = {"backend": backend, "operation": operation, "outcome": outcome}
    return REGISTRY.get_sample_value("omniroute_backend_sync_total", labels) or 0.0


def test_the_local_store_is_the_default_primary_under_its_reference_name(manager, local):
    assert manager.primary is local
    manager.configure("sqlite", [])
    assert manager.primary is local
    assert manager.registered()[0] == {
        "id": "local", "displayName": local.display_name, "backendType": "local",
        "isPrimary": True, "isFallback": False,
    }  # fmt: skip


def test_an_unknown_primary_is_refused_and_unknown_fallbacks_are_dropped(manager, local):
    with pytest.raises(UnknownBackend, match="unknown backend 'nope'"):
        manager.configure("nope", [])
    manager.configure("brain", ["nope", "sqlite", "brain"])
    assert manager.primary.id == "brain"
    assert [backend.id for backend in manager.fallbacks] == ["local"]


def test_create_and_list_go_to_the_primary_only(manager, memory_service, svc):
    manager.configure("brain", ["local"])
    created = manager.create(NEW)
    assert created.id in memory_service.memories
    assert svc.memories.get_by_key("alice", "preference:editor") is None
    page = manager.list(ListQuery(api_key_id="alice"))
    assert [m.key for m in page.data] == ["preference:editor"]


def test_get_falls_back_while_the_answer_is_none(manager, local):
    stored = local.create(NEW)
    manager.configure("brain", ["local"])
    assert manager.get(stored.id).content == "I prefer Vim"
    assert manager.get("nowhere") is None


def test_update_and_delete_return_the_primarys_answer_and_reach_the_fallbacks(
    manager, memory_service, local
):
    kept = local.create(NEW)
    memory_service.add(id=kept.id, apiKeyId="alice", key=kept.key, content=kept.content)
    manager.configure("brain", ["local"])
    assert manager.update(kept.id, {"content": "I prefer Helix"}) is True
    manager.wait()
    assert memory_service.memories[kept.id]["content"] == "I prefer Helix"
    assert local.get(kept.id).content == "I prefer Helix"
    assert manager.delete(kept.id) is True
    manager.wait()
    assert kept.id not in memory_service.memories and local.get(kept.id) is None


def test_a_fallback_that_fails_is_counted_and_logged_not_lost(
    manager, memory_service, local, caplog
):
    kept = local.create(NEW)
    memory_service.answers[("PATCH", f"/memories/{kept.id}")] = (500, "disk full")
    manager.configure("local", ["brain"])
    before = synced("brain", "update", "failed")
    assert manager.update(kept.id, {"content": "changed"}) is True
    manager.wait()
    assert synced("brain", "update", "failed") == before + 1
    assert "backend brain (mem0): update not applied: HTTP 500: disk full" in caplog.text


def test_search_falls_back_on_an_error_and_says_why(manager, memory_service, local):
    local.create(NEW)
    memory_service.answers[("GET", "/health")] = (503, "down")
    manager.configure("brain", ["local"])
    found = manager.search(SearchQuery(query="Which editor do I prefer, Vim?", api_key_id="alice"))
    assert [m.content for m in found.memories] == ["I prefer Vim"]
    assert found.backend == "local" and "brain: Cannot connect to Brain" in found.fallback_reason


def test_search_with_every_backend_failing_is_empty(manager, memory_service):
    memory_service.answers[("GET", "/health")] = (503, "down")
    manager.configure("brain", [])
    found = manager.search(SearchQuery(query="vim", api_key_id="alice"))
    assert found.memories == [] and found.backend is None and found.fallback_reason


def test_health_covers_every_registered_backend(manager, memory_service):
    memory_service.answers[("GET", "/health")] = (500, "x")
    health = manager.health()
    assert health["local"].ok and not health["brain"].ok


def test_the_local_backend_searches_as_the_gateway_ranks_and_keeps_keys_apart(local):
    local.create(NEW)
    local.create(NewMemory(api_key_id="bob", key="preference:editor", content="I prefer Vim too"))
    found = local.search(SearchQuery(query="Vim editor?", api_key_id="alice", limit=5))
    assert [(m.api_key_id, m.content) for m in found] == [("alice", "I prefer Vim")]
    assert local.update("missing", {"content": "x"}) is False
    assert local.health().ok


def test_upsert_updates_the_owners_memory_of_the_same_key(manager, memory_service):
    manager.configure("brain", [])
    first, created = manager.upsert(NEW)
    again, created_again = manager.upsert(
        NewMemory(api_key_id="alice", key=NEW.key, content="I prefer Helix", metadata={"x": 1})
    )
    assert (created, created_again) == (True, False) and again.id == first.id
    assert len(memory_service.memories) == 1, "a service that adds twins never gets one"
    assert memory_service.memories[first.id]["content"] == "I prefer Helix"
    other, created_other = manager.upsert(NewMemory(api_key_id="bob", key=NEW.key, content="Bob's"))
    assert created_other and other.id != first.id


def test_a_replaced_backend_leaves_in_one_step_and_is_shut_down(manager, local, remote):
    closed = []
    remote.shutdown = lambda: closed.append("brain")
    manager.configure("brain", ["local"])
    with pytest.raises(UnknownBackend):
        manager.replace({"brain"}, [], "brain")
    assert manager.primary is remote and closed == [], "a refused swap changes nothing"
    manager.replace({"brain"}, [], "local")
    assert [b["id"] for b in manager.registered()] == ["local"] and manager.primary is local
    assert closed == ["brain"]


def test_clearing_one_user_on_a_service_that_ignores_user_id_spares_the_others(
    manager, memory_service
):
    manager.configure("brain", [])
    for user in ("", "ana", "ben"):
        manager.create(NewMemory(api_key_id="alice", key="pet", content=f"pet of {user or 'all'}",
                                 user_id=user))  # fmt: skip
    assert manager.clear(MemoryFilter(api_key_id="alice", user_id="ana"), dry_run=False) == 1
    assert sorted(m["content"] for m in memory_service.memories.values()) == [
        "pet of all", "pet of ben",
    ]  # fmt: skip
    page = manager.primary.page(MemoryFilter(api_key_id="alice", scope="user"), limit=10, offset=0)
    assert [m.content for m in page.data] == ["pet of ben"]
