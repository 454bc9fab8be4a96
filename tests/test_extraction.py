import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omniroute.memory.extraction import (
    MAX_CONTENT_CHARS,
    MAX_TEXT_CHARS,
    extract_facts,
    slug,
    store_facts,
)
from omniroute.memory.model import MemoryFilter

pytestmark = pytest.mark.both_stores

ROOT = Path(__file__).resolve().parent.parent


def summary(text: str) -> list[tuple[str, str, str]]:
    return [(fact.category, fact.type, fact.key) for fact in extract_facts(text)]


def test_the_reference_english_example_gives_the_reference_keys():
    text = (
        "I prefer TypeScript. I'll use Postgres for this project. "
        "I always commit before pushing. I don't like Python."
    )
    assert summary(text) == [
        ("preference", "factual", "preference:typescript"),
        ("preference", "factual", "preference:python"),
        ("decision", "episodic", "decision:postgres_for_this_project"),
        ("pattern", "factual", "pattern:commit_before_pushing"),
    ]


SEED_TYPES = [
    ("preference", "factual"),
    ("preference", "factual"),
    ("decision", "episodic"),
    ("pattern", "factual"),
]


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        (
            "Ik geef de voorkeur aan TypeScript. Ik gebruik Postgres voor dit project. "
            "Ik commit altijd voordat ik push. Ik vind Python niet leuk.",
            ["postgres_voor_dit_project", "commit_voordat_ik_push"],
        ),
        (
            "Ich bevorzuge TypeScript. Ich werde Postgres für dieses Projekt verwenden. "
            "Ich committe immer vor dem Pushen. Ich mag Python nicht.",
            ["postgres_für_dieses_projekt", "committe_vor_dem_pushen"],
        ),
    ],
    ids=["dutch", "german"],
)
def test_each_seed_example_gives_the_four_memories_of_its_table(text, keys):
    facts = extract_facts(text)
    assert [(f.category, f.type) for f in facts] == SEED_TYPES
    assert [f.key for f in facts] == [
        "preference:typescript",
        "preference:python",
        f"decision:{keys[0]}",
        f"pattern:{keys[1]}",
    ]


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("I don't like Python.", "I don't like Python"),
        ("I do not like Java, honestly.", "I do not like Java"),
        ("Ik vind Python niet leuk.", "Ik vind Python niet leuk"),
        ("Ich mag Python nicht.", "Ich mag Python nicht"),
        ("Ich mag keine Tomaten.", "Ich mag keine Tomaten"),
        ("I never push to main.", "I never push to main"),
    ],
)
def test_a_dislike_or_never_stays_in_the_content(text, content):
    assert [fact.content for fact in extract_facts(text)] == [content]


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("Ik haat vergaderingen.", "preference:vergaderingen"),
        ("Ik heb besloten om Rust te leren.", "decision:rust_te_leren"),
        ("Ik koos voor Django.", "decision:django"),
        ("Ik doe meestal code reviews op vrijdag.", "pattern:code_reviews_op_vrijdag"),
        ("Ik doe nooit deploys op vrijdag.", "pattern:deploys_op_vrijdag"),
        ("Ich mag Kaffee.", "preference:kaffee"),
        ("Ich hasse Meetings.", "preference:meetings"),
        ("Ich habe mich für Vue entschieden.", "decision:vue"),
        ("Ich mache normalerweise Tests zuerst.", "pattern:tests_zuerst"),
        ("Ich mache nie Überstunden.", "pattern:überstunden"),
        ("I will use Redis.", "decision:redis"),
        ("I’ll use SQLite here.", "decision:sqlite_here"),
    ],
)
def test_the_patterns_of_the_seed_tables(text, key):
    assert [fact.key for fact in extract_facts(text)] == [key]


def test_non_ascii_facts_keep_distinct_keys():
    keys = [fact.key for fact in extract_facts("I like 寿司. I like 天ぷら. I love Käse.")]
    assert keys == ["preference:寿司", "preference:天ぷら", "preference:käse"]


@pytest.mark.parametrize(
    "text", ["Do I prefer TypeScript?", "Should I use Redis here?", "Mag ich Kaffee?"]
)
def test_questions_are_not_facts(text):
    assert extract_facts(text) == []


def test_a_statement_next_to_a_question_is_still_a_fact():
    assert [f.key for f in extract_facts("Why? I prefer tabs. Do you?")] == ["preference:tabs"]


def test_keys_are_deduplicated_across_categories_and_counted_once():
    facts = extract_facts("I prefer tea. I really prefer tea. I like tea.")
    assert [fact.key for fact in facts] == ["preference:tea"]


def test_short_subjects_are_skipped_and_long_content_is_cut():
    assert extract_facts("I like it. I will use X. I like It. Ik haat Je.") == []
    long_text = "I prefer " + "very " * 200 + "long things"
    (fact,) = extract_facts(long_text)
    assert len(fact.content) == MAX_CONTENT_CHARS


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("I prefer Go.", "preference:go"),
        ("I'll use Qt for the UI.", "decision:qt_for_the_ui"),
        ("I love C#.", "preference:c"),
        ("Ik gebruik Go.", "decision:go"),
    ],
)
def test_short_names_of_languages_and_tools_are_real_preferences(text, key):
    assert [fact.key for fact in extract_facts(text)] == [key]


@pytest.mark.parametrize(
    ("text", "content", "language"),
    [
        ("My name is Ana.", "My name is Ana", "en"),
        ("my name is José María, nice to meet you", "my name is José María", "en"),
        ("Ik heet Ana de Vries.", "Ik heet Ana de Vries", "nl"),
        ("Mijn naam is Bo", "Mijn naam is Bo", "nl"),
        ("Ich heiße Jürgen.", "Ich heiße Jürgen", "de"),
        ("Mein Name ist Ana Maria Silva Costa.", "Mein Name ist Ana Maria Silva Costa", "de"),
    ],
)
def test_a_name_is_a_profile_fact_in_each_language(text, content, language):
    (fact,) = extract_facts(text)
    assert (fact.key, fact.type, fact.content, fact.language) == (
        "profile:name",
        "factual",
        content,
        language,
    )


def test_a_name_ends_where_the_next_clause_begins_and_a_new_name_replaces_it(store):
    facts = extract_facts("My name is Ana and I prefer Go.")
    assert [(f.key, f.content) for f in facts] == [
        ("preference:go", "I prefer Go"),
        ("profile:name", "My name is Ana"),
    ]
    for text in ("My name is Ana.", "Actually, my name is Anna."):
        store_facts(store, api_key_id="a", session_id="s", text=text, source="user_message")
    (memory,) = store.find(MemoryFilter(api_key_id="a", type="factual"))
    assert memory.content == "my name is Anna"
    assert extract_facts("What is my name? Is my name Ana?") == []


def test_the_studios_examples_of_extracted_facts_are_extracted():
    explainer = (ROOT / "templates" / "studio" / "tab_memories.html").read_text()
    examples = re.findall(r'\("([^"]+)", "([^"]+)"\)', explainer)
    assert examples, "the explainer quotes no examples"
    for example in examples[0]:
        assert extract_facts(example), example


def test_only_the_last_64_kib_is_read():
    text = "I prefer Emacs. " + "x" * MAX_TEXT_CHARS + " I prefer Vim."
    assert [fact.key for fact in extract_facts(text)] == ["preference:vim"]


def test_slugs_follow_the_reference_for_ascii_and_never_come_out_empty():
    assert slug("Postgres for this project") == "postgres_for_this_project"
    assert slug("a" * 60) == "a" * 40
    assert slug("Hello, World!!") == "hello_world"
    assert slug("!!!") != ""


@given(st.text(max_size=2000))
def test_extraction_never_raises_and_keys_are_unique(text):
    facts = extract_facts(text)
    assert len({fact.key for fact in facts}) == len(facts)
    for fact in facts:
        assert fact.key.split(":", 1)[1]
        assert 0 < len(fact.content) <= MAX_CONTENT_CHARS


def test_store_facts_upserts_memories_with_their_source(store):
    ids = store_facts(
        store, api_key_id="alice", session_id="s1", text="I prefer tea.", source="user_message"
    )
    store_facts(
        store, api_key_id="alice", session_id="s2", text="I prefer coffee.", source="llm_response"
    )
    memories = store.find(MemoryFilter(api_key_id="alice"))
    assert [(m.key, m.content, m.type, m.session_id) for m in memories] == [
        ("preference:tea", "I prefer tea", "factual", "s1"),
        ("preference:coffee", "I prefer coffee", "factual", "s2"),
    ][::-1]
    assert memories[1].id == ids[0]
    assert memories[0].metadata["source"] == "llm_response"
    assert memories[1].metadata["category"] == "preference"


@pytest.mark.parametrize("missing", [{"api_key_id": ""}, {"session_id": ""}, {"text": ""}])
def test_store_facts_does_nothing_without_owner_session_or_text(store, missing):
    arguments = {"api_key_id": "a", "session_id": "s", "text": "I prefer tea.", **missing}
    assert store_facts(store, source="user_message", **arguments) == []
    assert store.find(MemoryFilter()) == []
