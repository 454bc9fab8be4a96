"""Bulk clearing: DELETE /api/memory and `flask memory clear`, one code path (memory/bulk.py)
with the MCP clear tool (tests/test_mcp.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from click.testing import CliRunner
from sqlalchemy import select

from omniroute.core.clock import to_iso
from omniroute.core.db.tables import memory_history
from omniroute.memory.model import MemoryFilter
from tests.helpers import ADMIN_TOKEN, backdate

pytestmark = pytest.mark.both_stores
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def seeded(svc):
    for owner in ("alice", "bob"):
        svc.memories.create(api_key_id=owner, key="fact", content="I like tea")
        svc.memories.create(api_key_id=owner, key="decision", content="I chose Go", type="episodic")
        svc.memories.create(api_key_id=owner, key="s", content="session one", session_id="s1")
    backdate(svc.memories, "fact", 40)
    return svc


def keys_of(svc, owner):
    return sorted(m.key for m in svc.memories.find(MemoryFilter(api_key_id=owner)))


def clear(client, **query):
    return client.delete("/api/memory", query_string=query, headers=ADMIN)


def test_clearing_needs_a_key_and_never_means_every_key(client, seeded):
    response = clear(client)
    assert response.status_code == 422
    assert response.json["error"]["details"][0]["field"] == "apiKeyId"
    assert clear(client, apiKeyId="").status_code == 422
    assert keys_of(seeded, "alice") == keys_of(seeded, "bob") == ["decision", "fact", "s"]


def test_the_global_memories_are_cleared_by_scope_never_by_an_empty_key(client, seeded, svc):
    svc.memories.create(api_key_id="", key="policy", content="Answer in English")
    svc.memories.create(api_key_id="alice", key="pet", content="Ana's cat", user_id="ana")
    for query in ({"scope": "global", "apiKeyId": "alice"}, {"scope": "key"}, {"apiKeyId": ""}):
        refused = clear(client, **query)
        assert refused.status_code == 422, query
        assert refused.json["error"]["details"][0]["field"] == "apiKeyId"
    assert clear(client, scope="global").json["deletedCount"] == 1
    assert svc.memories.find(MemoryFilter(api_key_id="")) == []
    assert clear(client, apiKeyId="alice", scope="user").json["deletedCount"] == 1
    assert keys_of(seeded, "alice") == ["decision", "fact", "s"], "the key's shared ones stay"


@pytest.mark.parametrize(
    ("filters", "gone"),
    [
        ({}, ["decision", "fact", "s"]),
        ({"type": "episodic"}, ["decision"]),
        ({"sessionId": "s1"}, ["s"]),
        ({"olderThan": "2026-01-01T00:00:00Z"}, []),
    ],
)
def test_a_dry_run_counts_and_the_real_run_deletes_just_that(client, seeded, filters, gone):
    dry = clear(client, apiKeyId="alice", dryRun="true", **filters)
    assert dry.status_code == 200
    assert dry.json == {"matched": len(gone), "deletedCount": 0, "dryRun": True}
    assert len(keys_of(seeded, "alice")) == 3
    done = clear(client, apiKeyId="alice", **filters).json
    assert done == {"matched": len(gone), "deletedCount": len(gone), "dryRun": False}
    assert sorted(set(["decision", "fact", "s"]) - set(keys_of(seeded, "alice"))) == gone
    assert keys_of(seeded, "bob") == ["decision", "fact", "s"], "another key is untouched"


def test_older_than_takes_the_backdated_memory_and_history_says_cleared(client, seeded, svc):
    cutoff = to_iso(svc.memories.clock() - timedelta(days=1))
    assert clear(client, apiKeyId="alice", olderThan=cutoff).json["deletedCount"] == 1
    assert keys_of(svc, "alice") == ["decision", "s"]
    with svc.db.read() as conn:
        reasons = conn.execute(
            select(memory_history.c.old_key, memory_history.c.reason).where(
                memory_history.c.api_key_id == "alice", memory_history.c.action == "delete"
            )
        ).all()
    assert reasons == [("fact", "cleared")]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"apiKeyId": "alice", "type": "nope"}, "type"),
        ({"apiKeyId": "alice", "olderThan": "last tuesday"}, "olderThan"),
        ({"apiKeyId": "alice", "dryRun": "perhaps"}, "dryRun"),
    ],
)
def test_bad_filters_are_a_422_naming_the_field(client, seeded, query, field):
    response = clear(client, **query)
    assert response.status_code == 422
    assert response.json["error"]["details"][0]["field"] == field
    assert len(keys_of(seeded, "alice")) == 3


def test_the_cli_asks_before_it_deletes(app, seeded):
    runner = CliRunner()
    with app.app_context():
        dry = runner.invoke(app.cli, ["memory", "clear", "--api-key-id", "alice", "--dry-run"])
        assert dry.exit_code == 0 and "3 memories of alice match" in dry.output
        refused = runner.invoke(
            app.cli, ["memory", "clear", "--api-key-id", "alice", "--type", "episodic"], input="n\n"
        )
        assert refused.exit_code == 1 and "Delete 1 memories of alice?" in refused.output
        assert keys_of(seeded, "alice") == ["decision", "fact", "s"]
        done = runner.invoke(
            app.cli, ["memory", "clear", "--api-key-id", "alice", "--type", "episodic"], input="y\n"
        )
        assert done.exit_code == 0 and "deleted 1 memories of alice" in done.output
        forced = runner.invoke(
            app.cli,
            ["memory", "clear", "--api-key-id", "bob", "--older-than", "2026-01-01", "--yes"],
        )
    assert forced.exit_code == 0, forced.output
    assert keys_of(seeded, "alice") == ["fact", "s"]


def test_the_cli_clears_one_end_user_or_the_global_memories_and_needs_one_owner(app, svc):
    for user in ("", "ana", "ben"):
        svc.memories.create(api_key_id="alice", key="pet", content=f"pet {user}", user_id=user)
    svc.memories.create(api_key_id="", key="policy", content="Answer in English")
    runner = CliRunner()
    with app.app_context():
        done = runner.invoke(
            app.cli, ["memory", "clear", "--api-key-id", "alice", "--user-id", "ana", "--yes"]
        )
        assert (
            done.exit_code == 0 and "deleted 1 memories of end user 'ana' of alice" in done.output
        )
        assert sorted(m.user_id for m in svc.memories.find(MemoryFilter(api_key_id="alice"))) == [
            "", "ben",
        ]  # fmt: skip
        for wrong in (["--global", "--api-key-id", "alice"], [], ["--global", "--user-id", "x"],
                      ["--api-key-id", "alice", "--user-id", "a\x07b"]):  # fmt: skip
            refused = runner.invoke(app.cli, ["memory", "clear", "--yes", *wrong])
            assert refused.exit_code == 2, (wrong, refused.output)
        gone = runner.invoke(app.cli, ["memory", "clear", "--global", "--yes"])
        assert gone.exit_code == 0 and "deleted 1 memories of the global ones" in gone.output
    assert svc.memories.find(MemoryFilter(api_key_id="")) == []
    assert len(svc.memories.find(MemoryFilter(api_key_id="alice"))) == 2
