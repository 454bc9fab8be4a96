"""GenericMemoryBackend against a real loopback memory service: the reference's 35 cases of
generic-backend.test.ts (numbered as REFERENCE section 13 lists them), then the [later]
guard cases: metadata refused even with local egress allowed, names that resolve to
private or metadata addresses, pinning to the checked address, redirects never followed.
No test sends traffic off loopback: blocked URLs fail before any connection."""

from __future__ import annotations

import json
import socket

import httpx
import pytest

from omniroute.core.net import check_base_url
from omniroute.memory.backends.base import (
    BackendError,
    BackendUnavailable,
    ListQuery,
    NewMemory,
    SearchQuery,
)
from omniroute.memory.backends.generic import GenericConfig, GenericMemoryBackend
from tests.helpers import free_port


@pytest.fixture
def http():
    with httpx.Client(follow_redirects=False) as client:
        yield client


@pytest.fixture
def make(http, memory_service):
    def make(allow_local: bool = True, base_url: str | None = None, **config):
        settings = GenericConfig(base_url=base_url or memory_service.url, **config)
        return GenericMemoryBackend("brain", "Brain", settings, http, allow_local=allow_local)

    return make


NEW = NewMemory(api_key_id="alice", key="preference:editor", content="Prefers Vim")


# -- constructor ---------------------------------------------------------------------------


def test_01_sets_id_and_display_name_from_its_arguments(make):
    backend = make()
    assert (backend.id, backend.display_name) == ("brain", "Brain")


def test_02_accepts_a_custom_timeout(make):
    assert make().config.timeout_ms == 30_000
    assert make(timeout_ms=1500).config.timeout_ms == 1500


# -- health --------------------------------------------------------------------------------


def test_03_health_is_ok_when_the_backend_answers_200(make, memory_service):
    assert make().health().ok
    memory_service.answers[("GET", "/health")] = (200, "OK")  # not JSON: healthy all the same
    assert make().health().ok


def test_04_health_is_not_ok_when_the_backend_answers_500(make, memory_service):
    memory_service.answers[("GET", "/health")] = (500, "down")
    health = make().health()
    assert not health.ok and "HTTP 500: down" in health.message


def test_05_health_is_not_ok_on_a_network_failure(make):
    health = make(base_url=f"http://127.0.0.1:{free_port()}").health()  # nobody listens
    assert not health.ok and "Could not reach Brain" in health.message


def test_a_header_stored_before_names_were_checked_is_unhealthy_not_a_crash(make):
    health = make(headers={"Ünï": "v"}).health()  # saved by an older release, say
    assert not health.ok and "request cannot be made" in health.message


def test_06_health_reports_its_latency_in_ms(make):
    health = make().health()
    assert isinstance(health.latency_ms, float) and 0 <= health.latency_ms < 5000


# -- initialize ----------------------------------------------------------------------------


def test_07_initialize_checks_health_and_raises_on_failure(make, memory_service):
    memory_service.answers[("GET", "/health")] = (503, "starting")
    with pytest.raises(BackendUnavailable, match=r"Cannot connect to Brain at http://127"):
        make().initialize()
    with pytest.raises(BackendUnavailable):
        make().create(NEW)  # a memory call initialises first
    assert [r["path"] for r in memory_service.requests] == ["/health", "/health"]


def test_08_initialize_passes_when_health_succeeds(make, memory_service):
    make().initialize()
    assert memory_service.last["path"] == "/health"


# -- create --------------------------------------------------------------------------------


def test_09_create_posts_the_input_to_memories(make, memory_service):
    memory = make().create(NEW)
    request = memory_service.last
    assert (request["method"], request["path"]) == ("POST", "/memories")
    assert request["body"] == {
        "apiKeyId": "alice", "key": "preference:editor", "content": "Prefers Vim",
        "type": "factual", "sessionId": "", "metadata": {}, "expiresAt": None,
    }  # fmt: skip
    assert memory.key == "preference:editor" and memory.api_key_id == "alice" and memory.id


def test_10_create_uses_a_custom_endpoint(make, memory_service):
    memory_service.answers[("POST", "/v2/notes")] = (201, {"id": "n1", "key": "k", "content": "c"})
    memory = make(endpoints={"create": "/v2/notes"}).create(NEW)
    assert memory_service.last["path"] == "/v2/notes" and memory.id == "n1"


# -- get -----------------------------------------------------------------------------------


def test_11_get_fetches_memories_id_and_returns_the_memory(make, memory_service):
    stored = memory_service.add(apiKeyId="alice", key="k", content="c")
    memory = make().get(stored["id"])
    assert memory_service.last["path"] == f"/memories/{stored['id']}"
    assert (memory.id, memory.content) == (stored["id"], "c")


def test_12_get_returns_none_on_404(make):
    assert make().get("missing") is None


def test_13_get_raises_on_other_errors(make, memory_service):
    memory_service.answers[("GET", "/memories/x")] = (500, "boom")
    with pytest.raises(BackendError, match="HTTP 500: boom"):
        make().get("x")


def test_14_get_uses_a_custom_endpoint_with_path_params(make, memory_service):
    memory_service.answers[("GET", "/notes/abc/body")] = (
        200,
        {"id": "abc", "key": "k", "content": "c"},
    )
    backend = make(endpoints={"get": "/notes/{noteId}/body"}, path_params={"id": "noteId"})
    assert backend.get("abc").id == "abc"
    assert memory_service.last["path"] == "/notes/abc/body"


# -- update --------------------------------------------------------------------------------


def test_15_update_patches_memories_id_with_the_changes(make, memory_service):
    stored = memory_service.add(apiKeyId="alice", key="k", content="old")
    assert make().update(stored["id"], {"content": "new", "session_id": "s2"}) is True
    request = memory_service.last
    assert (request["method"], request["path"]) == ("PATCH", f"/memories/{stored['id']}")
    assert request["body"] == {"content": "new", "sessionId": "s2"}


def test_16_update_returns_false_on_404(make):
    assert make().update("missing", {"content": "x"}) is False


# -- delete --------------------------------------------------------------------------------


def test_17_delete_deletes_memories_id(make, memory_service):
    stored = memory_service.add(apiKeyId="alice", key="k", content="c")
    assert make().delete(stored["id"]) is True
    assert memory_service.last["method"] == "DELETE" and stored["id"] not in memory_service.memories


def test_18_delete_returns_false_on_404(make):
    assert make().delete("missing") is False


# -- list ----------------------------------------------------------------------------------


def test_19_list_gets_memories_with_query_params(make, memory_service):
    memory_service.add(apiKeyId="alice", key="a", content="one")
    memory_service.add(apiKeyId="bob", key="b", content="two")
    page = make().list(ListQuery(api_key_id="alice", type="factual", limit=10, offset=0))
    assert memory_service.last["query"] == {
        "apiKeyId": "alice", "type": "factual", "limit": "10", "offset": "0"
    }  # fmt: skip
    assert [m.key for m in page.data] == ["a"] and page.total == 1


def test_20_list_applies_custom_query_param_names(make, memory_service):
    memory_service.answers[("GET", "/memories")] = (200, [])
    backend = make(query_params={"apiKeyId": "owner", "limit": "per_page"})
    backend.list(ListQuery(api_key_id="alice", limit=5))
    assert memory_service.last["query"] == {"owner": "alice", "per_page": "5", "offset": "0"}


# -- search --------------------------------------------------------------------------------


def test_21_search_gets_memories_search_with_query_params(make, memory_service):
    memory_service.add(apiKeyId="alice", key="a", content="Prefers Vim")
    found = make().search(SearchQuery(query="vim", api_key_id="alice", limit=5, max_tokens=100))
    assert memory_service.last["path"] == "/memories/search"
    assert memory_service.last["query"] == {
        "query": "vim", "apiKeyId": "alice", "limit": "5", "maxTokens": "100"
    }  # fmt: skip
    assert [m.content for m in found] == ["Prefers Vim"]


def test_22_search_uses_a_custom_endpoint(make, memory_service):
    memory_service.answers[("GET", "/find")] = (200, {"data": []})
    assert make(endpoints={"search": "/find"}).search(SearchQuery("x", "alice")) == []
    assert memory_service.last["path"] == "/find"


def test_23_search_serialises_options_as_a_json_query_param(make, memory_service):
    make().search(SearchQuery("x", "alice", strategy="hybrid", options={"boost": 2}))
    query = memory_service.last["query"]
    assert query["strategy"] == "hybrid" and json.loads(query["options"]) == {"boost": 2}


# -- authentication ------------------------------------------------------------------------


def test_24_sends_the_bearer_api_key_when_configured(make, memory_service):
    make(api_key="sk-brain-1234").health()
    assert memory_service.last["headers"]["Authorization"] == "Bearer sk-brain-1234"


def test_25_sends_custom_headers_when_configured(make, memory_service):
    make(headers={"X-Team": "core", "Authorization": "mine"}, api_key="sk-b").get("x")
    headers = memory_service.last["headers"]
    assert headers["X-Team"] == "core"
    assert headers["Authorization"] == "Bearer sk-b", "the api key wins over a custom header"
    assert headers["Content-Type"] == "application/json"


# -- factory -------------------------------------------------------------------------------


def test_26_the_factory_returns_a_generic_backend(http, memory_service):
    from omniroute.memory.backends.kinds import make_backend

    backend = make_backend("brain", {"baseUrl": memory_service.url}, http, allow_local=True)
    assert isinstance(backend, GenericMemoryBackend) and backend.health().ok


# -- SSRF prevention (local egress not allowed) ---------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/",  # 27 loopback IPv4
        "http://10.1.2.3/",  # 28 private 10/8
        "http://192.168.1.20/",  # 29 private 192.168/16
        "http://169.254.169.254/",  # 30 cloud metadata
        "http://[::1]:9/",  # 31 loopback IPv6
        "file:///etc/passwd",  # 32 not http(s)
        "http://localhost:9/",  # [later] a local name
    ],
)
def test_27_to_32_blocked_urls_fail_before_any_connection(make, url, monkeypatch):
    monkeypatch.setattr(socket, "create_connection", _no_connection)
    health = make(allow_local=False, base_url=url).health()
    assert not health.ok and "URL is refused" in health.message


def test_33_a_public_ip_passes_the_guard():
    assert check_base_url("http://93.184.216.34/api", allow_local=False) == (
        "http://93.184.216.34/api"
    )


def test_34_a_host_name_passes_the_structural_check():
    assert check_base_url("https://memory.example.com", allow_local=False, resolve=False)


def test_35_the_guard_fires_during_create(make, memory_service):
    with pytest.raises(BackendError, match="URL is refused"):
        make(allow_local=False).create(NEW)  # the memory_service is on 127.0.0.1
    assert memory_service.requests == []


# -- [later] --------------------------------------------------------------------------------


def test_metadata_addresses_are_refused_even_with_local_egress_allowed(make, monkeypatch):
    monkeypatch.setattr(socket, "create_connection", _no_connection)
    for url in (
        "http://169.254.169.254/",
        "http://metadata.google.internal/",
        "http://[fd00:ec2::254]/",
    ):
        assert "URL is refused" in make(allow_local=True, base_url=url).health().message


@pytest.mark.parametrize("address", ["10.0.0.7", "169.254.169.254", "127.0.0.1"])
def test_a_name_that_resolves_to_a_private_or_metadata_address_is_refused(
    make, monkeypatch, address
):
    _resolve("memory.example.com", address, monkeypatch)
    backend = make(allow_local=False, base_url="http://memory.example.com")
    with pytest.raises(BackendError, match="URL is refused"):
        backend.create(NEW)


def test_a_request_goes_to_the_checked_address_with_the_name_as_host(
    make, memory_service, monkeypatch
):
    port = memory_service._server.server_address[1]
    _resolve("memory.example.com", "127.0.0.1", monkeypatch)
    backend = make(allow_local=True, base_url=f"http://memory.example.com:{port}")
    backend.create(NEW)
    assert memory_service.last["headers"]["Host"] == f"memory.example.com:{port}"


def test_a_redirect_is_an_error_and_is_never_followed(make, memory_service):
    memory_service.answers[("GET", "/memories/x")] = (307, {})
    with pytest.raises(BackendError, match="HTTP 307"):
        make().get("x")
    assert all(request["path"] != "/moved" for request in memory_service.requests)


def test_a_memory_without_id_key_or_content_is_an_error(make, memory_service):
    memory_service.answers[("GET", "/memories/x")] = (200, {"id": "x"})
    with pytest.raises(BackendError, match="lacks key, content"):
        make().get("x")


def _no_connection(*args, **kwargs):
    raise AssertionError("no connection may be opened for a refused URL")


def _resolve(name: str, address: str, monkeypatch) -> None:
    """`name` resolves to `address` (a test's DNS), every other name as usual."""
    real = socket.getaddrinfo

    def lookup(host, *args, **kwargs):
        if host == name:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 0))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
