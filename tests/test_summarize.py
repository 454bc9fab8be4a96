"""Summarisation: aged memories folded into per-key summaries, and compaction to a budget."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import select

from omniroute.core.db.tables import memories, memory_history
from omniroute.memory.life.summary_text import extractive, first_sentences
from omniroute.memory.model import Memory, MemoryFilter
from omniroute.memory.search.tokens import count_tokens
from tests.helpers import ADMIN_TOKEN, backdate

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def summarize(client, **body):
    response = client.post("/api/memory/summarize", json=body, headers=ADMIN)
    assert response.status_code == 200, response.json
    return response.json


def seed(svc, owner, *contents, days=40, **fields):
    for number, content in enumerate(contents):
        key = f"{owner}-{number}"
        svc.memories.create(api_key_id=owner, key=key, content=content, **fields)
        backdate(svc.memories, key, days)


def live(svc, owner):
    return svc.memories.find(MemoryFilter(api_key_id=owner), limit=100)


@pytest.mark.parametrize(
    ("text", "language", "first"),
    [
        ("I use Postgres. It is fast! Really? Yes.", "en", "I use Postgres."),
        ("Use tools, e.g. ruff and uv. Then test.", "en", "Use tools, e.g. ruff and uv."),
        ("Ich nutze z.B. Redis. Und Postgres.", "de", "Ich nutze z.B. Redis."),
        ("Ik gebruik bijv. Vim. En tmux.", "nl", "Ik gebruik bijv. Vim."),
        ("no full stop at all", "en", "no full stop at all"),
        ("Version 3.11 is in use. Next.", "en", "Version 3.11 is in use."),
    ],
)
def test_the_first_sentence_rule_knows_each_languages_abbreviations(text, language, first):
    assert first_sentences(text, 1, language) == first


def test_the_extractive_summary_is_headed_in_the_memories_language():
    def memory(content, language):
        return Memory(
            id=content, api_key_id="a", session_id="", type="factual", key="k", content=content,
            metadata={"language": language}, created_at="", updated_at="",
        )  # fmt: skip

    text = extractive([memory("Ich mag Tee. Sehr.", "de"), memory("Kaffee auch.", "de")], 30)
    assert text.splitlines() == [
        "Zusammenfassung von 2 Erinnerungen (älter als 30 Tage):",
        "[factual] k: Ich mag Tee.",
        "[factual] k: Kaffee auch.",
    ]


@pytest.mark.both_stores
def test_a_dry_run_shows_the_candidates_and_changes_nothing(client, svc):
    seed(svc, "alice", "I like tea. A lot. Every day.", "I use Vim.")
    svc.memories.create(api_key_id="alice", key="fresh", content="I am new here.")
    result = summarize(client, olderThanDays=30, dryRun=True)
    assert result["dryRun"] is True and result["candidates"] == 2
    assert result["deletedCount"] == 0 and result["summaryId"] is None
    assert result["totalTokens"] == count_tokens("I like tea. A lot. Every day.") + count_tokens(
        "I use Vim."
    )
    assert [item["key"] for item in result["items"]] == ["alice-0", "alice-1"]
    assert len(live(svc, "alice")) == 3


@pytest.mark.both_stores
def test_each_key_gets_its_own_summary_and_the_originals_live_on_in_history(client, svc):
    seed(svc, "alice", "I like tea. A lot.", "I use Vim. Always.")
    seed(svc, "bob", "I chose Postgres.", type="episodic")
    svc.memories.create(api_key_id="alice", key="fresh", content="I am new here.")
    result = summarize(client, olderThanDays=30)
    assert result["dryRun"] is False and result["deletedCount"] == 3
    assert len(result["summaryIds"]) == 2
    assert {k["apiKeyId"]: k["candidates"] for k in result["keys"]} == {"alice": 2, "bob": 1}
    alice = {m.key: m for m in live(svc, "alice")}
    assert "fresh" in alice and "alice-0" not in alice
    (summary,) = [m for m in alice.values() if m.key.startswith("summary_")]
    assert summary.type == "semantic" and summary.api_key_id == "alice"
    assert summary.content.splitlines() == [
        "Summary of 2 memories (older than 30 days):",
        "[factual] alice-0: I like tea.",
        "[factual] alice-1: I use Vim.",
    ]
    assert summary.metadata["summarizedCount"] == 2 and summary.metadata["method"] == "extractive"
    bob = live(svc, "bob")
    assert [m.content for m in bob] == [
        "Summary of 1 memories (older than 30 days):\n[episodic] bob-0: I chose Postgres."
    ]
    with svc.db.read() as conn:
        rows = conn.execute(
            select(memory_history.c.old_content, memory_history.c.reason).where(
                memory_history.c.memory_id.in_(summary.metadata["summarizedIds"]),
                memory_history.c.action == "delete",
            )
        ).all()
    assert sorted(rows) == [
        ("I like tea. A lot.", "summarized"),
        ("I use Vim. Always.", "summarized"),
    ]
    backdate(svc.memories, "fresh", 2)
    again = summarize(client, olderThanDays=1, dryRun=True)
    assert again["candidates"] == 1, "`fresh` only: a summary is never summarised again"
    assert again["items"][0]["key"] == "fresh"


@pytest.mark.both_stores
def test_the_scope_holds_to_the_key_and_session_given(client, svc):
    svc.memories.create(api_key_id="alice", key="s1", content="In session one.", session_id="s1")
    svc.memories.create(api_key_id="alice", key="s2", content="In session two.", session_id="s2")
    svc.memories.create(api_key_id="bob", key="b", content="Bob's.")
    for key in ("s1", "s2", "b"):
        backdate(svc.memories, key, 40)
    result = summarize(client, olderThanDays=30, apiKeyId="alice", sessionId="s1")
    assert result["deletedCount"] == 1
    summary = svc.memories.get(result["summaryId"])
    assert (summary.api_key_id, summary.session_id) == ("alice", "s1")
    assert {m.key for m in live(svc, "bob")} == {"b"}
    assert "s2" in {m.key for m in live(svc, "alice")}


@pytest.mark.parametrize(
    "body",
    [
        {"olderThanDays": 0},
        {"olderThanDays": 366},
        {"olderThanDays": "30"},
        {"olderThanDays": 1e300},
        {"dryRun": "yes"},
        {"apiKeyId": ""},
        {"unknown": 1},
    ],
)
def test_a_bad_summarize_body_is_a_422_naming_the_field(client, body):
    response = client.post("/api/memory/summarize", json=body, headers=ADMIN)
    assert response.status_code == 422
    assert {detail["field"] for detail in response.json["error"]["details"]} == set(body)


# -- the LLM writer against the fake upstream -----------------------------------------------


@pytest.fixture
def with_llm(svc, upstream):
    svc.providers.save("llm", {"base_url": upstream.base_url, "api_key": "sk-llm"})
    svc.memory_settings.update({"summarizeProviderModel": "llm/m"})
    seed(svc, "alice", "I like tea. A lot.", "I use Vim.")
    return upstream


def test_an_llm_writes_the_summary_when_it_answers_the_json_asked(client, svc, with_llm):
    with_llm.reply = json.dumps({"summary": "Alice likes tea and uses Vim."})
    result = summarize(client, olderThanDays=30)
    assert result["writer"] == {"method": "llm", "model": "llm/m", "fallbackReason": None}
    summary = svc.memories.get(result["summaryId"])
    assert summary.content == "Alice likes tea and uses Vim."
    assert summary.metadata["method"] == "llm" and summary.metadata["model"] == "llm/m"
    sent = with_llm.last_body
    assert sent["model"] == "m" and sent["response_format"] == {"type": "json_object"}
    assert "JSON" in sent["messages"][0]["content"]
    assert sent["messages"][1]["content"].splitlines() == [
        "[factual] alice-0: I like tea.",
        "[factual] alice-1: I use Vim.",
    ]


@pytest.mark.parametrize(
    ("reply", "model", "reason"),
    [
        ("Alice likes tea.", "llm/m", "did not answer with the JSON asked for"),
        ('{"summary": ""}', "llm/m", "empty summary"),
        ('{"text": "x"}', "llm/m", "did not answer with the JSON asked for"),
        ("", "llm/slow", "did not answer within"),
        ("", "llm/fail-500", "answered 500"),
        ("", "nobody/m", "no provider"),
    ],
)
def test_any_llm_failure_falls_back_to_the_extractive_text_and_says_why(
    client, svc, with_llm, monkeypatch, reply, model, reason
):
    monkeypatch.setattr(svc.summarizer.writer, "timeout", 0.3)
    with_llm.slow_seconds = 1.5
    with_llm.reply = reply
    svc.memory_settings.update({"summarizeProviderModel": model})
    result = summarize(client, olderThanDays=30)
    assert result["writer"]["method"] == "extractive"
    assert reason in result["writer"]["fallbackReason"]
    summary = svc.memories.get(result["summaryId"])
    assert summary.content.startswith("Summary of 2 memories")
    assert summary.metadata["method"] == "extractive"


def test_a_fenced_json_answer_is_still_read(client, svc, with_llm):
    with_llm.reply = '```json\n{"summary": "Tea and Vim."}\n```'
    assert (
        svc.memories.get(summarize(client, olderThanDays=30)["summaryId"]).content == "Tea and Vim."
    )


# -- budget mode ----------------------------------------------------------------------------


def compact(client, **body):
    response = client.post("/api/memory/compact", json=body, headers=ADMIN)
    assert response.status_code == 200, response.json
    return response.json


@pytest.mark.both_stores
def test_compaction_shortens_the_oldest_until_the_key_fits(client, svc):
    long = "One. Two. Three. Four. " * 10  # 230 characters
    each = count_tokens(f"0 {long}")
    for number in range(3):
        svc.memories.create(api_key_id="alice", key=f"k{number}", content=f"{number} {long}")
        backdate(svc.memories, f"k{number}", 10 - number)  # k0 oldest
    budget = 2 * each + 20  # fits once the oldest is cut short
    dry = compact(client, apiKeyId="alice", maxTokens=budget, dryRun=True)
    assert dry == {
        "originalCount": 3, "summarizedCount": 1, "tokensBefore": 3 * each,
        "tokensSaved": dry["tokensSaved"], "fits": True, "dryRun": True,
    }  # fmt: skip
    assert svc.memories.find(MemoryFilter(api_key_id="alice"))[2].content.startswith("0 One")
    result = compact(client, apiKeyId="alice", maxTokens=budget)
    assert result["summarizedCount"] == 1 and result["fits"]
    by_key = {m.key: m for m in live(svc, "alice")}
    assert by_key["k0"].content == "0 One. Two. Three."
    assert by_key["k1"].content.startswith("1 One") and len(by_key["k1"].content) > 200
    with svc.db.read() as conn:
        row = conn.execute(
            select(memories.c.needs_reindex).where(memories.c.key == "k0")
        ).scalar_one()
        reason = conn.execute(
            select(memory_history.c.reason, memory_history.c.old_content).where(
                memory_history.c.memory_id == by_key["k0"].id, memory_history.c.action == "update"
            )
        ).one()
    assert row == 1, "re-embedded"
    assert reason == ("compacted", f"0 {long}")


@pytest.mark.both_stores
def test_auto_summarize_runs_only_when_switched_on(svc, app):
    svc.scheduler.stop()  # the app's own summarise run at start must not race this test's
    seed(svc, "alice", "I like tea.", "I use Vim.")
    with app.app_context():
        assert svc.summarizer.auto() == {"off": "the autoSummarize setting is off"}
        svc.memory_settings.update({"autoSummarize": True, "autoSummarizeDays": 30})
        report = svc.summarizer.auto()
    assert report["summarized"] == 2 and report["summaries"] == 1
    assert [m.key.startswith("summary_") for m in live(svc, "alice")] == [True]


def test_auto_summarize_compacts_keys_over_the_budget(svc):
    svc.scheduler.stop()  # the app's own summarise run at start must not race this test's
    svc.memory_settings.update(
        {"autoSummarize": True, "autoSummarizeDays": 365, "summarizeBudgetTokens": 20}
    )
    svc.memories.create(api_key_id="alice", key="old", content="First. Second. Third. Fourth. " * 4)
    backdate(svc.memories, "old", 5)
    svc.memories.create(api_key_id="bob", key="small", content="Tiny. Note.")
    report = svc.summarizer.auto()
    assert report["compacted"] == 1
    assert svc.memories.find(MemoryFilter(api_key_id="alice"))[0].content == "First. Second. Third."
