"""NotionBackend against a loopback Notion API: a memory is a page of the database, every
list and search filters on the key in Notion's own query, deletes archive."""

from __future__ import annotations

import httpx
import pytest

from omniroute.memory.backends.base import BackendError, ListQuery, NewMemory, SearchQuery
from omniroute.memory.backends.kinds import BadBackendConfig, check_config, make_backend
from omniroute.memory.backends.notion import TEXT_CHUNK, NotionBackend
from tests.notion_api import API_KEY, DATABASE, NotionApi

EDITOR = NewMemory(
    api_key_id="alice", key="preference:editor", content="I prefer Vim", session_id="s1",
    metadata={"source": "user_message"},
)  # fmt: skip


@pytest.fixture
def notion():
    running = NotionApi().start()
    yield running
    running.stop()


@pytest.fixture
def backend(notion):
    with httpx.Client(follow_redirects=False) as http:
        yield NotionBackend(
            http, database_id=DATABASE, api_key=API_KEY, base_url=notion.url, allow_local=True
        )


def test_a_memory_is_a_page_of_the_database(backend, notion):
    memory = backend.create(EDITOR)
    (page,) = notion.pages.values()
    assert page["parent"] == {"database_id": DATABASE} and memory.id == page["id"]
    assert page["properties"]["Key"]["title"][0]["text"]["content"] == "preference:editor"
    assert page["properties"]["Type"] == {"select": {"name": "factual"}}
    got = backend.get(memory.id)
    assert (got.key, got.content, got.api_key_id, got.session_id) == (
        "preference:editor", "I prefer Vim", "alice", "s1",
    )  # fmt: skip
    assert got.metadata == {"source": "user_message"}


def test_the_same_key_again_updates_its_page(backend, notion):
    first = backend.create(EDITOR)
    again = backend.create(NewMemory(api_key_id="alice", key="preference:editor", content="Helix"))
    assert again.id == first.id and len(notion.pages) == 1 and again.content == "Helix"
    other = backend.create(NewMemory(api_key_id="bob", key="preference:editor", content="Emacs"))
    assert other.id != first.id, "another key's same key is another page"


def test_long_content_is_split_at_notions_limit_and_read_whole(backend, notion):
    long = "x" * (TEXT_CHUNK * 2 + 5)
    memory = backend.create(NewMemory(api_key_id="alice", key="long", content=long))
    parts = notion.pages[memory.id]["properties"]["Content"]["rich_text"]
    assert [len(p["text"]["content"]) for p in parts] == [TEXT_CHUNK, TEXT_CHUNK, 5]
    assert backend.get(memory.id).content == long


def test_update_and_delete(backend, notion):
    memory = backend.create(EDITOR)
    assert backend.update(memory.id, {"content": "I prefer Helix", "type": "episodic"})
    changed = backend.get(memory.id)
    assert (changed.content, changed.type) == ("I prefer Helix", "episodic")
    assert backend.delete(memory.id) is True
    assert notion.pages[memory.id]["archived"] is True, "archived, as Notion deletes"
    assert backend.get(memory.id) is None
    assert backend.update("missing", {"content": "x"}) is False
    assert backend.delete("missing") is False


def test_list_filters_on_the_key_in_notions_query_and_pages_through(backend, notion):
    for number in range(105):
        backend.create(NewMemory(api_key_id="alice", key=f"k{number}", content=f"fact {number}"))
    backend.create(NewMemory(api_key_id="bob", key="k", content="bob's"))
    page = backend.list(ListQuery(api_key_id="alice", limit=10, offset=100))
    assert page.total == 105 and len(page.data) == 5
    assert all(m.api_key_id == "alice" for m in page.data)
    queries = [r["body"]["filter"] for r in notion.requests if r["path"].endswith("/query")]
    owner = {"property": "ApiKeyId", "rich_text": {"equals": "alice"}}
    assert all(owner in query["and"] for query in queries[-2:]), "both pages of the list"
    with pytest.raises(BackendError, match="name apiKeyId"):
        backend.list(ListQuery())


def test_search_asks_for_any_topic_word_within_the_key(backend):
    backend.create(EDITOR)
    backend.create(NewMemory(api_key_id="alice", key="db", content="Uses Postgres for storage"))
    backend.create(NewMemory(api_key_id="bob", key="e", content="Bob prefers Vim too"))
    found = backend.search(SearchQuery(query="Which editor, Vim or Emacs?", api_key_id="alice"))
    assert [m.content for m in found] == ["I prefer Vim"]


def test_end_users_pages_are_kept_apart_by_the_user_id_property(backend, notion):
    backend.create(NewMemory(api_key_id="alice", key="lang", content="Team writes Go"))
    ana = backend.create(
        NewMemory(api_key_id="alice", key="pet", content="Ana's cat", user_id="ana")
    )
    ben = backend.create(
        NewMemory(api_key_id="alice", key="pet", content="Ben's dog", user_id="ben")
    )
    assert ana.id != ben.id and (ana.user_id, backend.get(ben.id).user_id) == ("ana", "ben")
    again = backend.create(NewMemory(api_key_id="alice", key="pet", content="Ana's cats",
                                     user_id="ana"))  # fmt: skip
    assert again.id == ana.id, "upserted per (key, user)"
    assert [m.content for m in backend.list(ListQuery(api_key_id="alice", user_id="ben")).data] == [
        "Ben's dog"
    ]
    assert backend.list(ListQuery(api_key_id="alice", user_id="")).total == 1
    assert backend.list(ListQuery(api_key_id="alice")).total == 3
    found = backend.search(SearchQuery(query="cat dog Go", api_key_id="alice", user_id="ana"))
    assert {m.content for m in found} == {"Ana's cats", "Team writes Go"}
    shared = backend.search(SearchQuery(query="cat dog Go", api_key_id="alice"))
    assert [m.content for m in shared] == ["Team writes Go"], "no user named: no user's page"


def test_a_database_without_user_id_keeps_shared_memories_and_refuses_a_users(backend, notion):
    notion.users = False
    kept = backend.create(NewMemory(api_key_id="alice", key="lang", content="Team writes Go"))
    assert backend.search(SearchQuery(query="Go", api_key_id="alice")) == [kept]
    with pytest.raises(BackendError, match="no UserId property"):
        backend.create(NewMemory(api_key_id="alice", key="pet", content="cat", user_id="ana"))
    assert len(notion.pages) == 1


def test_health_and_a_refused_key(notion):
    with httpx.Client() as http:
        good = NotionBackend(http, database_id=DATABASE, api_key=API_KEY,
                             base_url=notion.url, allow_local=True)  # fmt: skip
        bad = NotionBackend(http, database_id=DATABASE, api_key="guess",
                            base_url=notion.url, allow_local=True)  # fmt: skip
        assert good.health().ok
        assert "HTTP 401" in bad.health().message
    assert all(r["path"].startswith("/v1/") for r in notion.requests)


def test_backend_configs_make_a_notion_backend_and_need_its_database(notion):
    with httpx.Client() as http:
        made = make_backend(
            "team", {"type": "notion", "apiKey": API_KEY, "databaseId": DATABASE,
                     "baseUrl": notion.url}, http, allow_local=True,
        )  # fmt: skip
        made.create(EDITOR)
    assert len(notion.pages) == 1
    with pytest.raises(BadBackendConfig) as caught:
        check_config({"type": "notion", "apiKey": "x"}, allow_local=True)
    assert caught.value.field == "databaseId"
