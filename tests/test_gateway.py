"""The gateway end to end: the official openai SDK -> our server -> a real fake upstream."""

import time

import httpx
import openai
import pytest

from omniroute.memory.model import MemoryFilter
from omniroute.proxy.injection import HEADER
from tests.helpers import drained, eventually

pytestmark = pytest.mark.both_stores

USER = [{"role": "user", "content": "Hello there"}]


@pytest.fixture
def svc(gateway_app):
    return gateway_app.extensions["omniroute"]


@pytest.fixture
def key(svc):
    api_key, secret = svc.keys.create("alice")
    return api_key, secret


@pytest.fixture
def client(sdk, key):
    return sdk(key[1])


@pytest.fixture
def memory_on(svc):
    svc.memory_settings.update({"enabled": True})


def memories_of(svc, api_key_id: str) -> list:
    return svc.memories.find(MemoryFilter(api_key_id=api_key_id), limit=200)


# -- forwarding -------------------------------------------------------------------------


def test_a_chat_goes_to_the_provider_with_the_bare_model_and_its_key(client, upstream):
    upstream.reply = "Hi!"
    response = client.chat.completions.create(model="fake/m", messages=USER, temperature=0.3)
    assert response.choices[0].message.content == "Hi!"
    received = upstream.requests[-1]
    assert received["body"] == {"model": "m", "messages": USER, "temperature": 0.3}
    assert received["headers"]["Authorization"] == "Bearer sk-up-4321"


def test_streaming_passes_chunks_on_as_they_arrive(client, upstream):
    upstream.reply = "one two three four five"
    upstream.chunk_delay = 0.2
    started = time.perf_counter()
    arrivals, text = [], ""
    for chunk in client.chat.completions.create(model="fake/m", messages=USER, stream=True):
        arrivals.append(time.perf_counter() - started)
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
    assert text == "one two three four five"
    assert arrivals[0] < 0.5, "the first chunk waited for the rest"
    assert arrivals[-1] > 0.9


def test_a_bare_model_goes_to_the_default_provider(client, upstream, svc):
    with pytest.raises(openai.NotFoundError, match="names no provider"):
        client.chat.completions.create(model="m", messages=USER)
    svc.settings.put({"defaultProvider": "fake"})
    client.chat.completions.create(model="meta/llama-3", messages=USER)
    assert upstream.last_body["model"] == "meta/llama-3"


def test_models_lists_every_provider_model(client):
    assert [model.id for model in client.models.list()] == ["fake/m"]


# -- errors -----------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["nope/m", "m"])  # no such provider; no default provider
def test_a_model_no_provider_serves_is_openais_404_model_not_found(client, model):
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model=model, messages=USER)
    assert caught.value.code == "model_not_found"
    assert caught.value.body["details"][0]["field"] == "model"
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model=model, input="hi")


CHAT_BODIES = [
    ({"model": "fake/m"}, "messages"),
    ({"model": "fake/m", "messages": []}, "messages"),
    ({"model": "fake/m", "messages": ["hi"]}, "messages"),
    ({"model": "fake/m", "messages": [{"role": "", "content": "hi"}]}, "messages"),
    ({"messages": USER}, "model"),
    ({"model": 4, "messages": USER}, "model"),
    ({"model": "fake/m", "messages": USER, "stream": "yes"}, "stream"),
    ({"model": "fake/m", "messages": USER, "stream": -221}, "stream"),
    ({"model": "fake/m", "messages": USER, "stream": 1}, "stream"),
    ({"model": "fake/m", "messages": USER, "n": {}}, "n"),
    ({"model": "fake/m", "messages": USER, "n": 0}, "n"),
    ({"model": "fake/m", "messages": USER, "n": True}, "n"),
    ([1, 2], "body"),
]
# What the fake provider (and some real ones) fell over on: answered 502 before.
EMBEDDING_BODIES = [
    ({"model": "fake/m", "input": [[{}]]}, "input"),
    ({"model": "fake/m", "input": [None]}, "input"),
    ({"model": "fake/m", "input": {"text": "x"}}, "input"),
    ({"model": "fake/m", "input": []}, "input"),
    ({"model": "fake/m", "input": [[]]}, "input"),
]


@pytest.mark.parametrize(
    ("route", "payload", "field"),
    [("chat/completions", *case) for case in CHAT_BODIES]
    + [("embeddings", *case) for case in EMBEDDING_BODIES],
)
def test_bad_bodies_are_400_naming_the_field(gateway, key, route, payload, field):
    response = httpx.post(
        f"{gateway.url}/v1/{route}",
        json=payload,
        headers={"Authorization": f"Bearer {key[1]}"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["field"] == field


# -- memory -----------------------------------------------------------------------------


def test_with_memory_off_the_body_is_forwarded_untouched(client, upstream, svc, key):
    svc.memories.create(api_key_id=key[0].id, key="k", content="Hello there, I like tea")
    client.chat.completions.create(model="fake/m", messages=USER)
    assert upstream.last_body["messages"] == USER
    drained(svc)
    assert len(memories_of(svc, key[0].id)) == 1, "nothing is extracted with memory off"


def test_relevant_memories_are_injected_as_a_system_message(client, upstream, svc, key, memory_on):
    svc.memories.create(api_key_id=key[0].id, key="a", content="I prefer TypeScript")
    svc.memories.create(api_key_id=key[0].id, key="b", content="I live in Utrecht")
    raw = client.chat.completions.with_raw_response.create(
        model="fake/m", messages=[{"role": "user", "content": "Which language, TypeScript?"}]
    )
    assert raw.headers["x-omniroute-memories"] == "1"
    assert raw.headers["x-omniroute-memory-backend"] == "local"
    first = upstream.last_body["messages"][0]
    assert first["role"] == "system"
    assert first["content"].startswith(HEADER)
    assert '"I prefer TypeScript"' in first["content"]
    assert "Utrecht" not in first["content"]
    used = eventually(lambda: svc.memories.get(memories_of(svc, key[0].id)[-1].id).access_count)
    assert used == 1


def test_nothing_relevant_means_nothing_injected(client, upstream, svc, key, memory_on):
    svc.memories.create(api_key_id=key[0].id, key="a", content="I prefer TypeScript")
    client.chat.completions.create(
        model="fake/m", messages=[{"role": "user", "content": "What's the weather like?"}]
    )
    assert upstream.last_body["messages"] == [
        {"role": "user", "content": "What's the weather like?"}
    ]


def test_the_no_memory_header_turns_memory_off_for_a_request(client, upstream, svc, key, memory_on):
    svc.memories.create(api_key_id=key[0].id, key="a", content="I prefer TypeScript")
    question = [{"role": "user", "content": "TypeScript? I prefer Go now."}]
    client.chat.completions.create(
        model="fake/m", messages=question, extra_headers={"x-omniroute-no-memory": "Yes"}
    )
    assert upstream.last_body["messages"] == question
    drained(svc)
    assert [m.key for m in memories_of(svc, key[0].id)] == ["a"]


@pytest.mark.parametrize(
    ("provider_id", "fields", "model"),
    [
        ("glm", {}, "glm-4"),
        ("qianfan", {}, "ernie"),
        ("openai", {}, "o1-mini"),
        ("local", {"supports_system_role": False}, "llama"),
    ],
)
def test_providers_without_a_system_role_get_a_user_message(
    client, upstream, svc, key, memory_on, provider_id, fields, model
):
    svc.providers.save(provider_id, {"base_url": upstream.base_url, **fields})
    svc.memories.create(api_key_id=key[0].id, key="a", content="I prefer TypeScript")
    client.chat.completions.create(
        model=f"{provider_id}/{model}", messages=[{"role": "user", "content": "TypeScript?"}]
    )
    assert upstream.last_body["messages"][0]["role"] == "user"
    assert upstream.last_body["messages"][0]["content"].startswith(HEADER)
    assert upstream.last_body["messages"][1] == {"role": "user", "content": "TypeScript?"}


def test_xiaomi_mimo_gets_memory_merged_into_its_system_message(
    client, upstream, svc, key, memory_on
):
    svc.providers.save("xiaomi-mimo", {"base_url": upstream.base_url})
    svc.memories.create(api_key_id=key[0].id, key="a", content="I prefer TypeScript")
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "TypeScript?"},
    ]
    client.chat.completions.create(model="xiaomi-mimo/mimo-7b", messages=messages)
    sent = upstream.last_body["messages"]
    assert len(sent) == 2 and sent[1] == messages[1]
    assert sent[0]["role"] == "system"
    assert sent[0]["content"].startswith(HEADER)
    assert sent[0]["content"].endswith("\n\nBe brief.")


def test_cache_control_puts_memory_just_before_the_last_user_message(
    client, upstream, svc, key, memory_on
):
    svc.memories.create(api_key_id=key[0].id, key="a", content="I prefer TypeScript")
    cached = {"role": "system", "content": [{"type": "text", "text": "x", "cache_control": {}}]}
    messages = [cached, {"role": "user", "content": "TypeScript?"}]
    client.chat.completions.create(model="fake/m", messages=messages)
    sent = upstream.last_body["messages"]
    assert sent[0] == cached and sent[2] == messages[1]
    assert sent[1]["content"].startswith(HEADER)


def test_facts_are_extracted_from_the_message_and_the_reply(client, upstream, svc, key, memory_on):
    upstream.reply = "Good plan. I always run the linter first."
    client.chat.completions.create(
        model="fake/m",
        messages=[{"role": "user", "content": "I prefer TypeScript."}],
        extra_headers={"x-omniroute-session-id": "chat-7"},
    )
    memories = eventually(
        lambda: len(memories_of(svc, key[0].id)) == 2 and memories_of(svc, key[0].id)
    )
    by_key = {m.key: m for m in memories}
    assert by_key["preference:typescript"].metadata["source"] == "user_message"
    assert by_key["pattern:run_the_linter_first"].metadata["source"] == "llm_response"
    assert {m.session_id for m in memories} == {"chat-7"}


def test_facts_are_extracted_from_a_streamed_reply(client, upstream, svc, key, memory_on):
    upstream.reply = "Then I will use Postgres for storage."
    stream = client.chat.completions.create(
        model="fake/m", messages=[{"role": "user", "content": "Pick a database"}], stream=True
    )
    for _ in stream:
        pass
    memories = eventually(lambda: memories_of(svc, key[0].id))
    assert [m.key for m in memories] == ["decision:postgres_for_storage"]
    assert memories[0].type == "episodic"


def test_a_stream_of_two_choices_extracts_choice_zero_once(client, upstream, svc, key, memory_on):
    upstream.reply = "Noted. I prefer TypeScript."
    stream = client.chat.completions.create(
        model="fake/m", messages=[{"role": "user", "content": "Hi"}], stream=True, n=2
    )
    texts = {0: "", 1: ""}
    for part in stream:
        for choice in part.choices:
            texts[choice.index] += choice.delta.content or ""
    assert texts == {0: "Noted. I prefer TypeScript.", 1: "Noted. I prefer TypeScript."}
    memories = eventually(lambda: memories_of(svc, key[0].id))
    assert [m.content for m in memories] == ["I prefer TypeScript"]


@pytest.mark.parametrize(
    "text",
    [
        "I prefer TypeScript. I'll use Postgres for this project. "
        "I always commit before pushing. I don't like Python.",
        "Ik geef de voorkeur aan TypeScript. Ik gebruik Postgres voor dit project. "
        "Ik commit altijd voordat ik push. Ik vind Python niet leuk.",
        "Ich bevorzuge TypeScript. Ich werde Postgres für dieses Projekt verwenden. "
        "Ich committe immer vor dem Pushen. Ich mag Python nicht.",
    ],
    ids=["english", "dutch", "german"],
)
def test_a_fact_told_in_one_chat_comes_back_in_the_next(
    client, upstream, svc, key, memory_on, text
):
    client.chat.completions.create(model="fake/m", messages=[{"role": "user", "content": text}])
    memories = eventually(
        lambda: len(memories_of(svc, key[0].id)) == 4 and memories_of(svc, key[0].id)
    )
    assert sorted((m.metadata["category"], m.type) for m in memories) == [
        ("decision", "episodic"),
        ("pattern", "factual"),
        ("preference", "factual"),
        ("preference", "factual"),
    ]
    client.chat.completions.create(
        model="fake/m", messages=[{"role": "user", "content": "Python or TypeScript?"}]
    )
    injected = upstream.last_body["messages"][0]["content"]
    assert "TypeScript" in injected and "Python" in injected


def test_one_keys_memories_never_reach_another_keys_requests(sdk, upstream, svc, key, memory_on):
    other, other_secret = svc.keys.create("bob")
    sdk(key[1]).chat.completions.create(
        model="fake/m", messages=[{"role": "user", "content": "I prefer TypeScript."}]
    )
    assert eventually(lambda: memories_of(svc, key[0].id)), "the fact was not extracted"
    sdk(other_secret).chat.completions.create(
        model="fake/m", messages=[{"role": "user", "content": "Do I prefer TypeScript?"}]
    )
    assert upstream.last_body["messages"] == [
        {"role": "user", "content": "Do I prefer TypeScript?"}
    ]
    drained(svc)
    assert memories_of(svc, other.id) == []


# -- the OpenAI surface without memory --------------------------------------------------


def test_embeddings_pass_through_to_the_provider(client, upstream):
    answer = client.embeddings.create(model="fake/embed-1", input=["tea", "coffee"])
    assert [len(item.embedding) for item in answer.data] == [8, 8]
    sent = upstream.requests[-1]
    assert sent["path"] == "/v1/embeddings"
    assert (sent["body"]["model"], sent["body"]["input"]) == ("embed-1", ["tea", "coffee"])
    with pytest.raises(openai.APIStatusError) as caught:
        client.embeddings.create(model="fake/fail-401", input="tea")
    assert caught.value.status_code == 502 and caught.value.code == "upstream_auth"
    with pytest.raises(openai.RateLimitError):
        client.embeddings.create(model="fake/fail-429", input="tea")
    with pytest.raises(openai.BadRequestError, match="input"):
        client.embeddings.create(model="fake/embed-1", input=[])


def test_a_model_is_described_as_the_list_names_it(client, svc):
    assert client.models.retrieve("fake/m").id == "fake/m"
    assert client.models.retrieve("fake/m").owned_by == "fake"
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.models.retrieve("fake/nope")
    listed = [model.id for model in client.models.list()]
    assert "fake/m" in listed
