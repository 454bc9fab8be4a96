"""The studio's pages as the server renders them, and its actions through the session."""

import json
import re

import pytest

from omniroute.memory.model import MemoryFilter
from omniroute.memory.search.retrieval import STRATEGIES
from omniroute.memory.settings import BY_NAME, CHAT_STRATEGIES, SCOPE_CHOICES
from tests.html_checks import duplicate_ids, text_of, unlabelled_fields

pytestmark = pytest.mark.both_stores


@pytest.fixture
def populated(studio, svc, make_key):
    """A key with three memories, a revoked key, and a provider with a key."""
    key = make_key("laptop")
    gone = make_key("old phone")
    svc.keys.revoke(gone["id"])
    svc.memories.create(api_key_id=key["id"], key="lang", content="prefers Go to Python")
    svc.memories.create(api_key_id=key["id"], key="pet", content="has a cat", type="episodic")
    svc.memories.create(api_key_id=gone["id"], key="city", content="lives in Ghent")
    svc.providers.save(
        "openai",
        {
            "base_url": "https://api.openai.com/v1",
            "api_key": "sk-upstream-secret-9876",
            "models": ["gpt-4o"],
            "embedding_models": [{"id": "text-embedding-3-small", "dimensions": 1536}],
        },
    )
    # A source that is off: under `auto` the provider above (a key and an embedding model)
    # would embed these memories, and tests send nothing past loopback.
    svc.memory_settings.update({"embeddingSource": "transformers"})
    return {"key": key, "gone": gone}


def rows(html: str) -> list[str]:
    """The memory keys in the list, in order."""
    return re.findall(r'<td data-label="Key"><code>([^<]*)</code>', html)


PAGES = [
    "/dashboard/login",
    "/dashboard/memory",
    "/dashboard/memory?tab=playground&query=go",
    "/dashboard/memory?tab=engine",
    "/dashboard/keys",
    "/dashboard/providers",
    "/dashboard/settings",
]


@pytest.mark.parametrize("path", PAGES)
def test_every_field_has_a_label_and_every_id_is_unique(populated, studio, path):
    response = studio.get(path, follow_redirects=True)
    assert response.status_code == 200
    assert unlabelled_fields(response.text) == []
    assert duplicate_ids(response.text) == []
    assert '<html lang="en">' in response.text
    assert 'name="viewport"' in response.text


class TestMemoriesTab:
    def test_lists_memories_newest_first_with_their_key_names_and_stats(self, populated, studio):
        page = studio.get("/dashboard/memory").text
        assert rows(page) == ["city", "pet", "lang"]
        assert "laptop" in page and "old phone" in page
        assert re.search(r'stat-value">3<.*Total entries', page, re.S)
        tokens = sum(
            (len(c) + 3) // 4 for c in ("prefers Go to Python", "has a cat", "lives in Ghent")
        )
        assert re.search(rf'stat-value">{tokens}<.*Tokens used', page, re.S)
        assert re.search(r'stat-value">0%<.*Hit rate', page, re.S)

    def test_search_type_and_key_filters_narrow_the_list_and_the_export(self, populated, studio):
        key_id = populated["key"]["id"]
        assert rows(studio.get("/dashboard/memory?q=GO").text) == ["lang"]
        assert rows(studio.get("/dashboard/memory?type=episodic").text) == ["pet"]
        page = studio.get(f"/dashboard/memory?apiKeyId={key_id}&q=a").text
        assert rows(page) == ["pet", "lang"]
        export = re.search(r'<a href="([^"]+)" download>', page).group(1).replace("&amp;", "&")
        assert export == f"/api/memory/export?q=a&apiKeyId={key_id}"
        data = json.loads(studio.get(export).get_data(as_text=True))  # the session may export
        assert [m["key"] for m in data["memories"]] == ["pet", "lang"]

    def test_pages_hold_twenty_and_a_page_past_the_end_shows_the_last(self, studio, svc, api_key):
        for number in range(25):
            svc.memories.create(api_key_id=api_key["id"], key=f"k{number:02}", content="x")
        first = studio.get("/dashboard/memory").text
        assert len(rows(first)) == 20
        assert "Page 1 of 2" in first and 'rel="next"' in first and 'rel="prev"' not in first
        second = studio.get("/dashboard/memory?page=2").text
        assert rows(second) == [f"k{number:02}" for number in range(4, -1, -1)]
        assert rows(studio.get("/dashboard/memory?page=9").text) == rows(second)
        assert rows(studio.get("/dashboard/memory?page=abc").text) == rows(first)

    def test_memory_text_is_escaped(self, studio, svc, api_key):
        svc.memories.create(
            api_key_id=api_key["id"], key="x", content="<img src=x onerror=alert(1)>"
        )
        page = studio.get("/dashboard/memory").text
        assert "<img src=x" not in page
        assert "&lt;img src=x onerror=alert(1)&gt;" in page

    def test_each_memory_has_an_edit_form_and_a_confirmed_delete(self, populated, studio, svc):
        memory = svc.memories.find(
            svc.memories.live_conditions
            and __import__("omniroute").memory.model.MemoryFilter(text="lang")
        )[0]
        page = studio.get("/dashboard/memory").text
        assert f'data-api="PUT /api/memory/{memory.id}"' in page
        assert f'data-api="DELETE /api/memory/{memory.id}"' in page
        assert "Delete the memory “lang”? This cannot be undone." in page

    def test_bad_query_values_are_left_out_as_the_api_schema_reads_them(self, populated, studio):
        response = studio.get("/dashboard/memory?type=magic&page=abc&q=%20cat%20")
        assert response.status_code == 200
        assert rows(response.text) == ["pet"]

    def test_the_add_dialog_offers_only_active_keys(self, populated, studio):
        dialog = studio.get("/dashboard/memory").text.split('<dialog id="add-memory"')[1]
        assert "laptop" in dialog and "old phone" not in dialog

    def test_without_keys_the_add_dialog_offers_a_global_memory(self, studio):
        page = studio.get("/dashboard/memory").text
        assert '<option value="">Global: every key' in page and 'name="userId"' in page

    def test_the_switch_shows_the_token_cost_when_memory_is_on(self, studio, svc):
        off = studio.get("/dashboard/memory").text
        assert 'role="switch"' in off and "Memory is off" in off
        svc.memory_settings.update({"enabled": True, "maxTokens": 1500})
        on = studio.get("/dashboard/memory").text
        assert 'class="warning"' in on
        assert "1500 extra prompt tokens" in on


class TestHistoryPage:
    def test_shows_every_change_oldest_first_and_survives_the_delete(self, studio, svc, api_key):
        memory, _ = svc.memories.create(api_key_id=api_key["id"], key="lang", content="likes Go")
        svc.memories.update(memory.id, content="likes Rust", type="semantic")
        page = studio.get(f"/dashboard/memory/{memory.id}/history").text
        assert page.index("<h2>Create ") < page.index("<h2>Update ")
        assert "<del>likes Go</del> → <ins>likes Rust</ins>" in page
        assert "<del>factual</del> → <ins>semantic</ins>" in page
        assert "· live." in page
        listed = studio.get("/dashboard/memory").text
        assert f'href="/dashboard/memory/{memory.id}/history"' in listed

        svc.memories.delete(memory.id)
        page = studio.get(f"/dashboard/memory/{memory.id}/history").text
        assert "<h2>Delete " in page and "deleted or expired" in page
        assert "<del>likes Rust</del>" in page

    def test_an_unknown_memory_is_a_404_page(self, studio):
        response = studio.get("/dashboard/memory/nope/history")
        assert response.status_code == 404
        assert response.mimetype == "text/html"
        assert "No memory nope has ever existed." in response.text


class TestPlaygroundTab:
    def test_a_query_shows_the_ranking_and_how_it_was_resolved(self, populated, studio):
        key_id = populated["key"]["id"]
        page = studio.get(
            f"/dashboard/memory?tab=playground&query=Go&strategy=keyword&apiKeyId={key_id}"
        ).text
        assert rows(page) == ["lang"]
        for column in ("Tier", "Score", "vecScore", "ftsScore", "Tokens", "Injected"):
            assert f'data-label="{column}"' in page
        assert "<dt>Strategy used</dt><dd>keyword" in page
        backend = studio.application.extensions["omniroute"].db.vectors.backend
        assert f"<dt>Vector store</dt><dd>{backend}" in page
        assert "<dt>Fallback</dt>" in page
        assert "1 ranked" in page

    def test_semantic_without_an_embedding_source_says_why_it_fell_back(self, populated, studio):
        key_id = populated["key"]["id"]
        page = studio.get(
            f"/dashboard/memory?tab=playground&query=Go&strategy=semantic&apiKeyId={key_id}"
        ).text
        fallback = re.search(r"<dt>Fallback</dt><dd[^>]*>([^<]+)</dd>", page).group(1)
        assert fallback != "none"

    def test_a_bad_budget_is_marked_on_its_field(self, populated, studio):
        page = studio.get("/dashboard/memory?tab=playground&query=Go&maxTokens=0").text
        assert 'id="pg-budget-error"' in page
        assert re.search(r'id="pg-budget"[^>]*aria-invalid="true"', page, re.S)
        assert "Fix the form" in page

    def test_the_budget_stops_at_the_one_bound_and_every_strategy_is_offered(
        self, populated, studio
    ):
        page = studio.get("/dashboard/memory?tab=playground").text
        high = BY_NAME["maxTokens"].high  # the setting's bound; a preview clamps to 8000
        assert re.search(rf'id="pg-budget"[^>]*max="{high}"', page, re.S)
        assert options_of(page, "pg-strategy") == list(STRATEGIES)
        over = studio.get(f"/dashboard/memory?tab=playground&query=Go&maxTokens={high + 1}").text
        assert f"from 1 to {high}" in over

    def test_an_unknown_strategy_is_refused(self, populated, studio):
        page = studio.get("/dashboard/memory?tab=playground&query=Go&strategy=magic").text
        assert 'id="pg-strategy-error"' in page

    def test_without_a_query_nothing_is_ranked(self, populated, studio):
        assert (
            "Type a query and press Simulate."
            in studio.get("/dashboard/memory?tab=playground").text
        )


class TestEngineTab:
    def test_shows_the_chips_the_progress_and_the_settings_forms(self, populated, studio):
        page = studio.get("/dashboard/memory?tab=engine").text
        for chip in ("Keyword", "Embedding", "Vector store", "Rerank", "Jobs"):
            assert f"<strong>{chip}</strong>" in page
        assert "Memories with a vector: 0 of 3" in page  # nothing embedded: no source is on
        assert re.search(r'id="engine-status"[^>]*data-poll="5000"', page, re.S)
        assert 'data-api="POST /api/memory/reindex"' in page
        assert page.count('data-api="PUT /api/settings/memory"') >= 4  # switch + three cards
        assert "openai/text-embedding-3-small" in page  # the remote model choice

    def test_the_retrieval_form_takes_its_bounds_and_choices_from_the_registry(
        self, populated, studio
    ):
        page = studio.get("/dashboard/memory?tab=engine").text
        high = BY_NAME["maxTokens"].high
        assert re.search(rf'id="ret-budget"[^>]*min="0" max="{high}"', page, re.S)
        assert f"Token budget per request (0–{high}; a request injects at most 8000)" in page
        assert re.search(r'id="ret-retention"[^>]*min="1" max="365"', page, re.S)
        assert options_of(page, "ret-strategy") == list(CHAT_STRATEGIES)
        assert options_of(page, "ret-scope") == list(SCOPE_CHOICES)
        assert re.search(r'id="ret-global"[^>]*min="0" max="100"[^>]*value="25"', page, re.S)


class TestSettingsPage:
    def test_the_memory_tab_has_the_switch_its_token_cost_and_the_engine_forms(
        self, populated, studio, svc
    ):
        svc.memory_settings.update({"enabled": True, "maxTokens": 1200, "scope": "user"})
        page = studio.get("/dashboard/settings").text
        tab = r'href="/dashboard/settings\?tab=memory" aria-current="page">Memory<'
        assert re.search(tab, page)
        assert 'role="switch"' in page and "1200 extra prompt tokens" in text_of(
            page, "#memory-switch"
        )
        engine = studio.get("/dashboard/memory?tab=engine").text
        forms = re.compile(r'<form data-api="PUT /api/settings/(?:memory|qdrant)"')
        assert len(forms.findall(page)) == len(forms.findall(engine)) >= 5, "the same forms"
        assert 'id="qdrant-card"' in page and "Save retrieval settings" in page
        assert re.search(r'<option value="user" selected>', page)
        assert 'href="/dashboard/settings"' in studio.get("/dashboard/keys").text


def options_of(page: str, select_id: str) -> list[str]:
    select = page.split(f'id="{select_id}"')[1].split("</select>")[0]
    return re.findall(r'<option value="([^"]+)"', select)


class TestKeysAndProviders:
    def test_the_keys_page_lists_active_keys_without_secrets(self, populated, studio):
        page = studio.get("/dashboard/keys").text
        active, revoked = page.split('id="revoked-list"')
        assert "laptop" in active and "old phone" not in active
        assert "old phone" in revoked and "laptop" not in revoked, "revoked: to be erased"
        assert populated["key"]["key"] not in page
        assert populated["key"]["prefix"] in page
        assert 'data-then="secret"' in page

    def test_the_providers_page_masks_keys(self, populated, studio, svc):
        svc.settings.put({"defaultProvider": "openai"})
        page = studio.get("/dashboard/providers").text
        assert "sk-upstream-secret-9876" not in page
        assert "...9876" in page
        assert "text-embedding-3-small 1536" in page
        assert 'data-api="DELETE /api/providers/openai"' in page


# -- every action of the studio goes through the API with the session and its CSRF token ------


def snapshot(client, admin) -> str:
    parts = [
        client.get("/api/memory", headers=admin).json["data"],
        client.get("/api/keys", headers=admin).json["data"],
        client.get("/api/providers", headers=admin).json["data"],
        client.get("/api/settings/memory", headers=admin).json,
        client.get("/api/settings/gateway", headers=admin).json,
    ]
    return json.dumps(parts, sort_keys=True)


ACTIONS = {
    "add memory": ("POST", "/api/memory", {"apiKeyId": "{key}", "key": "n", "content": "new"}),
    "edit memory": ("PUT", "/api/memory/{memory}", {"content": "changed"}),
    "delete memory": ("DELETE", "/api/memory/{memory}", None),
    "import": (
        "POST",
        "/api/memory/import",
        {"memories": [{"key": "i", "content": "c"}], "apiKeyId": "{key}"},
    ),
    "switch memory on": ("PUT", "/api/settings/memory", {"enabled": True}),
    "reindex": ("POST", "/api/memory/reindex", {"force": True}),
    "create key": ("POST", "/api/keys", {"name": "new key"}),
    "revoke key": ("DELETE", "/api/keys/{key}", None),
    "add provider": ("POST", "/api/providers", {"id": "p2", "baseUrl": "https://p2.example/v1"}),
    "edit provider": ("PUT", "/api/providers/openai", {"models": ["gpt-5"]}),
    "remove provider": ("DELETE", "/api/providers/openai", None),
    "default provider": ("PUT", "/api/settings/gateway", {"defaultProvider": "openai"}),
}


@pytest.mark.parametrize("action", ACTIONS)
def test_each_action_needs_the_csrf_token_and_works_with_it(populated, studio, svc, admin, action):
    method, path, body = ACTIONS[action]
    memory = svc.memories.find(MemoryFilter(text="lang"))[0]
    ids = {"key": populated["key"]["id"], "memory": memory.id}
    path = path.format(**ids)
    if body is not None:
        body = json.loads(json.dumps(body).replace("{key}", ids["key"]))
    before = snapshot(studio, admin)

    refused = studio.open(path, method=method, json=body)
    assert refused.status_code == 403, action
    assert snapshot(studio, admin) == before

    done = studio.open(path, method=method, json=body, headers={"X-CSRF-Token": studio.csrf})
    assert done.status_code in (200, 201, 202), done.json
    if action != "reindex":  # reindex marks rows for the backfill; nothing listed changes
        assert snapshot(studio, admin) != before


def test_a_logged_out_browser_can_take_no_action(client, populated, admin):
    # The fixture logged this client in; a fresh one has no session.
    fresh = client.application.test_client()
    for method, path, body in ACTIONS.values():
        response = fresh.open(
            path.replace("{memory}", "x").replace("{key}", "x"), method=method, json=body
        )
        assert response.status_code == 401
