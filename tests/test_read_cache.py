"""The short cache of what every request reads (settings, providers, the key of a secret)."""

import threading

import httpx

from omniroute.core.db.read_cache import ReadCache
from omniroute.core.keys import ApiKeyStore


def test_a_value_is_loaded_once_and_kept_until_cleared():
    cache, loads = ReadCache(4), []
    load = lambda: loads.append(1) or "value"  # noqa: E731
    assert cache.get("k", load) == cache.get("k", load) == "value"
    assert len(loads) == 1
    cache.clear()
    assert cache.get("k", load) == "value" and len(loads) == 2


def test_nothing_is_kept_for_a_lookup_that_found_nothing():
    cache, loads = ReadCache(4), []
    for _ in range(3):
        assert cache.get("guess", lambda: loads.append(1)) is None
    assert len(loads) == 3


def test_a_value_expires_after_the_ttl():
    cache, loads = ReadCache(4, ttl=0.05), []
    cache.get("k", lambda: loads.append(1) or 1)
    threading.Event().wait(0.1)
    cache.get("k", lambda: loads.append(1) or 1)
    assert len(loads) == 2


def test_a_read_that_raced_a_clear_is_not_kept():
    cache = ReadCache(4)

    def stale_read():
        cache.clear()  # a write lands while this read is under way
        return "old"

    assert cache.get("k", stale_read) == "old"
    assert cache.get("k", lambda: "new") == "new"


def test_a_forgotten_key_is_read_again_and_a_read_that_raced_it_is_not_kept():
    cache = ReadCache(4)
    cache.get("a", lambda: "old a")
    cache.get("b", lambda: "b")

    def racing_read():
        cache.forget("a")  # a write of `a` commits while this read is under way
        return "old a"

    cache.forget("a")
    assert cache.get("a", racing_read) == "old a"
    assert cache.get("a", lambda: "new a") == "new a", "the racing read was not kept"
    assert cache.get("b", lambda: "reloaded") == "b", "other keys stay"
    assert (cache.hits, cache.misses) == (1, 4)


def test_another_process_sees_a_revoke_within_the_ttl(database):
    here, there = ApiKeyStore(database), ApiKeyStore(database)
    key, secret = here.create("alice")
    assert there.authenticate(secret).id == here.authenticate(secret).id == key.id
    assert here.revoke(key.id)
    assert here.authenticate(secret) is None  # at once where it was revoked
    assert there.authenticate(secret).id == key.id  # still, for up to the TTL
    there._by_digest.clear()  # what the TTL does in the other process
    assert there.authenticate(secret) is None


def test_a_scope_change_applies_at_once(database):
    keys = ApiKeyStore(database)
    key, secret = keys.create("alice")
    assert keys.authenticate(secret).scopes == ("read:memory", "write:memory")
    keys.set_scopes(key.id, ["read:memory"])
    assert keys.authenticate(secret).scopes == ("read:memory",)


def test_a_changed_provider_is_used_at_once(svc):
    svc.providers.save("up", {"base_url": "https://one.example/v1", "models": ["m"]})
    assert svc.providers.get("up").base_url == "https://one.example/v1"
    svc.providers.save("up", {"base_url": "https://two.example/v1"})
    assert svc.providers.get("up").base_url == "https://two.example/v1"
    assert svc.providers.delete("up") and svc.providers.get("up") is None


def test_the_shared_provider_client_keeps_no_cookie(svc):
    """One client serves every key: a provider's cookie must not ride on another's request."""
    http = svc.provider_client._http
    answer = httpx.Response(
        200,
        headers={"set-cookie": "__cf_bm=abc; Path=/; Domain=api.example.com"},
        request=httpx.Request("POST", "https://api.example.com/v1/chat/completions"),
    )
    http.cookies.extract_cookies(answer)
    assert list(http.cookies.jar) == []
