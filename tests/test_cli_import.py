"""`flask memory import FILE`: JSON Lines or an export file, checked and upserted as the REST
import does, cut into requests under the body limit, failures named by line, progress on
stderr, and the vectors embedded before it returns."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from omniroute.cli import transfer
from omniroute.factory import create_app
from omniroute.memory.model import MemoryFilter
from tests.helpers import ADMIN_TOKEN, app_settings

pytestmark = pytest.mark.both_stores


@pytest.fixture
def keyed(app):
    return app.extensions["omniroute"].keys.create("bulk")[0].id


def run(app, *args: str):
    with app.app_context():
        return CliRunner().invoke(app.cli, ["memory", "import", *args])


def lines(*items) -> str:
    return "".join(json.dumps(item) + "\n" for item in items)


def test_a_json_lines_file_is_imported_and_failures_are_named_by_line(
    app, keyed, tmp_path, monkeypatch
):
    monkeypatch.setattr(transfer, "REQUEST_BYTES", 300)  # several requests for a few lines
    memories = [{"key": f"k{n}", "content": f"I collect stamps number {n}"} for n in range(8)]
    bad = {"key": "bad", "content": ""}
    source = tmp_path / "memories.jsonl"
    source.write_text(lines(*memories[:4], bad) + "\n" + lines(*memories[4:]))
    result = run(app, str(source), "--api-key-id", keyed, "--no-vectors")
    assert result.exit_code == 1
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert (summary["created"], summary["updated"], summary["failed"]) == (8, 0, 1)
    assert "line 5: " in result.stderr and "content" in result.stderr
    assert "imported 9 (created 8" in result.stderr
    stored = app.extensions["omniroute"].memories.find(MemoryFilter(api_key_id=keyed), limit=20)
    assert sorted(m.key for m in stored) == sorted(m["key"] for m in memories)
    again = run(app, str(source), "--api-key-id", keyed, "--no-vectors")
    assert json.loads(again.stdout.strip().splitlines()[-1])["updated"] == 8


def test_items_of_no_key_are_global_memories_and_a_user_needs_a_key(app, keyed, tmp_path):
    source = tmp_path / "policies.jsonl"
    source.write_text(lines(
        {"key": "policy:language", "content": "Answer in the user's language"},
        {"key": "pet", "content": "Ana has a cat", "apiKeyId": keyed, "userId": "ana"},
        {"key": "stray", "content": "A user of no key", "userId": "ana"},
    ))  # fmt: skip
    result = run(app, str(source), "--no-vectors")
    assert result.exit_code == 1 and "line 3: " in result.stderr and "userId" in result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1])["created"] == 2
    store = app.extensions["omniroute"].memories
    (policy,) = store.find(MemoryFilter(api_key_id=""))
    assert (policy.key, policy.user_id) == ("policy:language", "")
    (pet,) = store.find(MemoryFilter(api_key_id=keyed))
    assert pet.user_id == "ana"


def test_an_export_file_goes_back_in(app, keyed, tmp_path):
    svc = app.extensions["omniroute"]
    svc.memories.create(api_key_id=keyed, key="tea", content="I drink green tea")
    client = app.test_client()
    exported = client.get(
        f"/api/memory/export?apiKeyId={keyed}", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    ).get_data()
    svc.memories.delete(svc.memories.find(MemoryFilter(api_key_id=keyed))[0].id)
    source = tmp_path / "export.json"
    source.write_bytes(exported)
    result = run(app, str(source), "--no-vectors")
    assert result.exit_code == 0, result.output
    assert [m.content for m in svc.memories.find(MemoryFilter(api_key_id=keyed))] == [
        "I drink green tea"
    ]


def test_a_line_that_is_not_json_stops_it_with_its_number(app, keyed, tmp_path):
    source = tmp_path / "broken.jsonl"
    source.write_text(lines({"key": "a", "content": "b"}) + "{not json\n")
    result = run(app, str(source), "--api-key-id", keyed)
    assert result.exit_code == 1 and "line 2 is not JSON" in result.output


@pytest.mark.sqlite_only
def test_the_imported_memories_are_embedded_before_it_returns(tmp_path, static_path):
    app = create_app(app_settings(tmp_path, None, MEMORY_STATIC_MODEL=str(static_path)))
    svc = app.extensions["omniroute"]
    try:
        svc.memory_settings.update(
            {"enabled": True, "staticEnabled": True, "embeddingSource": "static"}
        )
        key = svc.keys.create("bulk")[0].id
        source = tmp_path / "memories.jsonl"
        source.write_text(lines(*({"key": f"k{n}", "content": f"fact {n}"} for n in range(50))))
        result = run(app, str(source), "--api-key-id", key)
        assert result.exit_code == 0, result.output
        assert svc.backfill.pending() == 0 and "every memory is embedded" in result.stderr
        with svc.db.read() as conn:
            assert svc.vectors.count(conn) == 50
    finally:
        svc.close()
