"""ObsidianBackend against a loopback Local REST API: one note per memory in its key's
folder, ids that name their note, search through the plugin's own full-text search."""

from __future__ import annotations

import httpx
import pytest

from omniroute.memory.backends.base import BackendError, ListQuery, NewMemory, SearchQuery
from omniroute.memory.backends.kinds import BadBackendConfig, check_config, make_backend
from omniroute.memory.backends.obsidian import ObsidianBackend
from omniroute.memory.model import MemoryFilter
from tests.obsidian_vault import API_KEY, ObsidianVault

EDITOR = NewMemory(
    api_key_id="alice", key="preference:editor", content="I prefer Vim",
    session_id="s1", metadata={"source": "user_message"},
)  # fmt: skip


@pytest.fixture
def vault():
    running = ObsidianVault().start()
    yield running
    running.stop()


@pytest.fixture
def backend(vault):
    with httpx.Client(follow_redirects=False) as http:
        yield ObsidianBackend(http, base_url=vault.url, api_key=API_KEY, allow_local=True)


def test_a_memory_is_one_note_in_its_keys_folder_with_frontmatter(backend, vault):
    memory = backend.create(EDITOR)
    (path,) = vault.notes
    assert path == "OmniRoute/alice/preference_editor.md", "a colon cannot be in a file name"
    text = vault.notes[path]
    assert text.startswith("---\n") and text.endswith("---\nI prefer Vim\n")
    for line in (
        'key: "preference:editor"',
        'apiKeyId: "alice"',
        'sessionId: "s1"',
        'type: "factual"',
        "expiresAt: null",
        'metadata: {"source": "user_message"}',
    ):
        assert line in text  # fmt: skip
    assert backend.get(memory.id) == memory
    assert memory.id == "obsidian:alice:preference_editor"


def test_creating_the_same_key_again_updates_the_note_and_keeps_its_creation(backend, vault):
    first = backend.create(EDITOR)
    again = backend.create(
        NewMemory(api_key_id="alice", key="preference:editor", content="I prefer Helix",
                  metadata={"language": "en"})
    )  # fmt: skip
    assert len(vault.notes) == 1 and again.id == first.id
    assert again.created_at == first.created_at and again.content == "I prefer Helix"
    assert again.metadata == {"source": "user_message", "language": "en"}


def test_update_changes_the_note_and_a_new_key_moves_it(backend, vault):
    memory = backend.create(EDITOR)
    assert backend.update(memory.id, {"content": "I prefer Helix"}) is True
    assert backend.get(memory.id).content == "I prefer Helix"
    assert backend.update(memory.id, {"key": "preference:text_editor"}) is True
    assert list(vault.notes) == ["OmniRoute/alice/preference_text_editor.md"]
    assert backend.update("obsidian:alice:nothing", {"content": "x"}) is False
    assert backend.update("not-ours", {"content": "x"}) is False


def test_delete_removes_the_note(backend, vault):
    memory = backend.create(EDITOR)
    assert backend.delete(memory.id) is True and vault.notes == {}
    assert backend.delete(memory.id) is False


def test_list_reads_only_the_keys_folder(backend, vault):
    backend.create(EDITOR)
    backend.create(NewMemory(api_key_id="alice", key="pet", content="Has a cat", type="episodic"))
    backend.create(NewMemory(api_key_id="bob", key="pet", content="Has a dog"))
    page = backend.list(ListQuery(api_key_id="alice"))
    assert sorted(m.content for m in page.data) == ["Has a cat", "I prefer Vim"]
    assert page.total == 2 and page.by_type == {"factual": 1, "episodic": 1}
    assert backend.list(ListQuery(api_key_id="alice", type="episodic")).total == 1
    assert backend.list(ListQuery(api_key_id="carol")).total == 0
    listed = [r["path"] for r in vault.requests if r["path"].endswith("/")]
    assert "/vault/" not in listed, "the vault root is never listed"
    with pytest.raises(BackendError, match="name apiKeyId"):
        backend.list(ListQuery())


def test_search_uses_the_plugins_search_and_stays_in_the_keys_folder(backend, vault):
    backend.create(EDITOR)
    backend.create(NewMemory(api_key_id="alice", key="db", content="Uses Postgres for storage"))
    backend.create(NewMemory(api_key_id="bob", key="editor", content="Bob prefers Vim too"))
    found = backend.search(SearchQuery(query="Which editor, Vim or Emacs?", api_key_id="alice"))
    assert [m.content for m in found] == ["I prefer Vim"]
    searched = [r["query"]["query"] for r in vault.requests if r["path"] == "/search/simple/"]
    assert 0 < len(searched) <= 4 and "vim" in [w.lower() for w in searched]
    assert not any(r["path"] == "/vault/" for r in vault.requests)


def test_an_end_users_notes_live_apart_and_each_user_sees_their_own_and_the_keys(backend, vault):
    shared = backend.create(NewMemory(api_key_id="alice", key="lang", content="Team writes Go"))
    ana = backend.create(
        NewMemory(api_key_id="alice", key="pet", content="Ana's pet is a cat", user_id="ana")
    )
    ben = backend.create(
        NewMemory(api_key_id="alice", key="pet", content="Ben's pet is a dog", user_id="ben")
    )
    assert sorted(vault.notes) == [
        "OmniRoute/alice/lang.md",
        "OmniRoute/alice/users/ana/pet.md",
        "OmniRoute/alice/users/ben/pet.md",
    ], "a key per user: the same key, two notes"
    assert 'userId: "ana"' in vault.notes["OmniRoute/alice/users/ana/pet.md"]
    assert ana.id == "obsidian:alice:ana:pet" and backend.get(ana.id) == ana
    assert backend.get(shared.id).user_id == "" and backend.get(ben.id).user_id == "ben"
    assert {m.content for m in backend.list(ListQuery(api_key_id="alice")).data} == {
        "Team writes Go", "Ana's pet is a cat", "Ben's pet is a dog",
    }  # fmt: skip
    mine = backend.list(ListQuery(api_key_id="alice", user_id="ana")).data
    assert [m.content for m in mine] == ["Ana's pet is a cat"]
    keys = backend.list(ListQuery(api_key_id="alice", user_id="")).data
    assert [m.content for m in keys] == ["Team writes Go"]
    found = backend.search(SearchQuery(query="pet Go", api_key_id="alice", user_id="ana"))
    assert {m.content for m in found} == {"Ana's pet is a cat", "Team writes Go"}
    nobody = backend.search(SearchQuery(query="pet", api_key_id="alice"))
    assert nobody == [], "a chat naming no user sees no user's notes"
    assert backend.update(ana.id, {"key": "pet:name"}) is True
    assert "OmniRoute/alice/users/ana/pet_name.md" in vault.notes
    assert "OmniRoute/alice/users/ana/pet.md" not in vault.notes
    assert backend.delete(ben.id) is True and backend.get(ben.id) is None


def test_clearing_one_user_leaves_the_keys_and_other_users_notes(backend, vault):
    backend.create(NewMemory(api_key_id="alice", key="lang", content="Team writes Go"))
    for user in ("ana", "ben"):
        backend.create(NewMemory(api_key_id="alice", key="pet", content=user, user_id=user))
    assert backend.clear(MemoryFilter(api_key_id="alice", user_id="ana"), dry_run=False) == 1
    assert sorted(vault.notes) == ["OmniRoute/alice/lang.md", "OmniRoute/alice/users/ben/pet.md"]
    assert (
        backend.upsert(NewMemory(api_key_id="alice", key="pet", content="cat", user_id="ben"))[1]
        is False
    ), "upserted per (key, user)"


def test_health_needs_the_vault_to_accept_the_key(vault):
    with httpx.Client() as http:
        good = ObsidianBackend(http, base_url=vault.url, api_key=API_KEY, allow_local=True)
        wrong = ObsidianBackend(http, base_url=vault.url, api_key="guess", allow_local=True)
        assert good.health().ok
        health = wrong.health()
        assert not health.ok and health.message == "the vault refused the API key"
        with pytest.raises(BackendError, match="HTTP 401"):
            wrong.create(EDITOR)


def test_a_note_without_our_frontmatter_is_not_a_memory(backend, vault):
    vault.notes["OmniRoute/alice/handwritten.md"] = "# Just a note\nnothing here"
    assert backend.get("obsidian:alice:handwritten") is None
    assert backend.list(ListQuery(api_key_id="alice")).total == 0


def test_a_copied_note_is_known_by_its_place_not_its_frontmatter_id(backend, vault):
    original = backend.create(EDITOR)
    text = vault.notes[f"OmniRoute/alice/{original.id.rsplit(':', 1)[1]}.md"]
    vault.notes["OmniRoute/alice/copy.md"] = text
    copy = backend.get("obsidian:alice:copy")
    assert copy is not None and copy.id == "obsidian:alice:copy"
    assert backend.delete(copy.id) and backend.get(original.id) == original


def test_the_vault_url_goes_through_the_guard(vault):
    with httpx.Client() as http:
        guarded = ObsidianBackend(http, base_url=vault.url, api_key=API_KEY, allow_local=False)
        assert "URL is refused" in guarded.health().message
        assert vault.requests == []


def test_backend_configs_make_an_obsidian_backend_and_check_its_fields(vault):
    with httpx.Client() as http:
        made = make_backend(
            "notes", {"type": "obsidian", "baseUrl": vault.url, "apiKey": API_KEY,
                      "folder": "Memory"}, http, allow_local=True,
        )  # fmt: skip
        made.create(EDITOR)
    assert list(vault.notes) == ["Memory/alice/preference_editor.md"]
    for raw, field in (
        ({"type": "obsidian", "endpoints": {}}, "endpoints"),
        ({"type": "obsidian", "folder": 3}, "folder"),
        ({"type": "notes"}, "type"),
        ({"baseUrl": "http://x", "folder": "y"}, "folder"),
    ):
        with pytest.raises(BadBackendConfig) as caught:
            check_config(raw, allow_local=True)
        assert caught.value.field == field
