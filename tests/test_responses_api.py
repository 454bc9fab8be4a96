"""The Responses API through the gateway, with memory: the official openai SDK's
`alice.client.responses.create` -> our server -> the fake upstream's /v1/responses."""

from types import SimpleNamespace

import httpx
import openai
import pytest

from omniroute.proxy.conversation import StreamedResponse, input_user_text, response_text
from omniroute.proxy.injection import HEADER
from tests.fake_upstream import event, response_object
from tests.helpers import drained, eventually
from tests.test_gateway import memories_of

pytestmark = pytest.mark.both_stores


@pytest.fixture
def alice(gateway_app, sdk):
    """A key with memory on, its id, and an SDK client that sends its secret."""
    svc = gateway_app.extensions["omniroute"]
    svc.memory_settings.update({"enabled": True})
    key, secret = svc.keys.create("alice")
    return SimpleNamespace(svc=svc, id=key.id, secret=secret, client=sdk(secret))


def test_a_response_comes_back_and_the_body_goes_on_with_the_bare_model(alice, upstream):
    upstream.reply = "Hi there!"
    response = alice.client.responses.create(
        model="fake/m", input="Hello", instructions="Be brief."
    )
    assert response.output_text == "Hi there!"
    received = upstream.requests[-1]
    assert received["path"] == "/v1/responses"
    assert received["body"] == {"model": "m", "input": "Hello", "instructions": "Be brief."}


def test_memory_goes_into_a_string_input_as_a_message_of_its_own(alice, upstream):
    alice.svc.memories.create(api_key_id=alice.id, key="a", content="I prefer TypeScript")
    raw = alice.client.responses.with_raw_response.create(
        model="fake/m", input="Which language, TypeScript?", instructions="Be brief."
    )
    assert raw.headers["x-omniroute-memories"] == "1"
    sent = upstream.last_body
    assert sent["instructions"] == "Be brief.", "the client's instructions stay as sent"
    memory, question = sent["input"]
    assert memory["role"] == "system" and memory["content"].startswith(HEADER)
    assert '"I prefer TypeScript"' in memory["content"]
    assert question == {"role": "user", "content": "Which language, TypeScript?"}


def test_memory_is_found_from_the_last_user_item_of_a_list_input(alice, upstream):
    alice.svc.memories.create(api_key_id=alice.id, key="a", content="I prefer TypeScript")
    items = [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Sunny."}],
        },
        {"role": "user", "content": [{"type": "input_text", "text": "TypeScript or Go?"}]},
    ]
    alice.client.responses.create(model="fake/m", input=items)
    sent = upstream.last_body["input"]
    assert sent[0]["content"].startswith(HEADER)
    assert sent[1:] == items


def test_cache_control_in_input_puts_memory_before_the_last_user_item(alice, upstream):
    alice.svc.memories.create(api_key_id=alice.id, key="a", content="I prefer TypeScript")
    cached = {
        "role": "system",
        "content": [{"type": "input_text", "text": "x", "cache_control": {"type": "ephemeral"}}],
    }
    items = [cached, {"role": "user", "content": "TypeScript?"}]
    alice.client.responses.create(model="fake/m", input=items)
    sent = upstream.last_body["input"]
    assert sent[0] == cached and sent[2] == items[1]
    assert sent[1]["content"].startswith(HEADER)


def test_providers_without_a_system_role_get_a_user_message(alice, upstream):
    alice.svc.providers.save("glm", {"base_url": upstream.base_url})
    alice.svc.memories.create(api_key_id=alice.id, key="a", content="I prefer TypeScript")
    alice.client.responses.create(model="glm/glm-4", input="TypeScript?")
    assert upstream.last_body["input"][0]["role"] == "user"
    assert upstream.last_body["input"][0]["content"].startswith(HEADER)


def test_facts_are_extracted_from_the_input_and_the_output_text(alice, upstream):
    upstream.reply = "Good plan. I always run the linter first."
    alice.client.responses.create(
        model="fake/m",
        input="I prefer TypeScript.",
        extra_headers={"x-omniroute-session-id": "resp-7"},
    )
    memories = eventually(
        lambda: len(memories_of(alice.svc, alice.id)) == 2 and memories_of(alice.svc, alice.id)
    )
    by_key = {m.key: m for m in memories}
    assert by_key["preference:typescript"].metadata["source"] == "user_message"
    assert by_key["pattern:run_the_linter_first"].metadata["source"] == "llm_response"
    assert {m.session_id for m in memories} == {"resp-7"}


def test_a_streamed_response_arrives_as_events_and_is_extracted_once_complete(alice, upstream):
    upstream.reply = "Then I will use Postgres for storage."
    stream = alice.client.responses.create(model="fake/m", input="Pick a database", stream=True)
    kinds, text = [], ""
    for item in stream:
        kinds.append(item.type)
        if item.type == "response.output_text.delta":
            text += item.delta
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert text == "Then I will use Postgres for storage."
    memories = eventually(lambda: memories_of(alice.svc, alice.id))
    assert [m.key for m in memories] == ["decision:postgres_for_storage"]


def test_a_stream_that_fails_midway_extracts_nothing_from_the_reply(alice, upstream):
    alice.svc.providers.save("fake", {"models": ["m", "cut-off"]})
    upstream.reply = "Then I will use Postgres for storage."
    stream = alice.client.responses.create(model="fake/cut-off", input="Hello", stream=True)
    assert [item.type for item in stream][-1] == "response.failed"
    drained(alice.svc)
    assert memories_of(alice.svc, alice.id) == []


def test_the_no_memory_header_leaves_the_input_alone(alice, upstream):
    alice.svc.memories.create(api_key_id=alice.id, key="a", content="I prefer TypeScript")
    alice.client.responses.create(
        model="fake/m",
        input="TypeScript? I prefer Go now.",
        extra_headers={"x-omniroute-no-memory": "true"},
    )
    assert upstream.last_body["input"] == "TypeScript? I prefer Go now."
    drained(alice.svc)
    assert [m.key for m in memories_of(alice.svc, alice.id)] == ["a"]


def test_one_keys_memories_never_reach_another_keys_responses(sdk, upstream, alice):
    alice.svc.memories.create(api_key_id=alice.id, key="a", content="I prefer TypeScript")
    _, other_secret = alice.svc.keys.create("bob")
    sdk(other_secret).responses.create(model="fake/m", input="TypeScript?")
    assert upstream.last_body["input"] == "TypeScript?"


def test_a_model_no_provider_serves_is_a_404_model_not_found(sdk, alice):
    with pytest.raises(openai.NotFoundError) as caught:
        sdk(alice.secret).responses.create(model="nope/m", input="hi")
    assert caught.value.code == "model_not_found"


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"input": "hi"}, "model"),
        ({"model": "fake/m"}, "input"),
        ({"model": "fake/m", "input": ""}, "input"),
        ({"model": "fake/m", "input": []}, "input"),
        ({"model": "fake/m", "input": ["hi"]}, "input"),
        ({"model": "fake/m", "input": "hi", "instructions": 3}, "instructions"),
    ],
)
def test_bad_bodies_are_400_naming_the_field(gateway, alice, payload, field):
    answer = httpx.post(
        f"{gateway.url}/v1/responses",
        json=payload,
        headers={"Authorization": f"Bearer {alice.secret}"},
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["details"][0]["field"] == field


def test_an_upstream_error_keeps_its_status(alice):
    with pytest.raises(openai.RateLimitError) as caught:
        alice.client.responses.create(model="fake/fail-429", input="hi")
    assert caught.value.response.headers["retry-after"] == "7"


# -- reading the texts --------------------------------------------------------------------


def test_the_users_text_is_the_string_or_the_last_user_item():
    assert input_user_text("plain") == "plain"
    items = [
        {"role": "user", "content": "first"},
        {"type": "function_call_output", "call_id": "c1", "output": "42"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "second"},
                {"type": "input_image", "image_url": "x"},
            ],
        },
        {"type": "reasoning", "summary": []},
    ]
    assert input_user_text(items) == "second"
    assert input_user_text(None) == ""


def test_the_reply_text_prefers_output_text_and_skips_other_items():
    assert response_text({"output_text": "given"}) == "given"
    payload = response_object("m", "from parts")
    payload["output"].insert(0, {"type": "function_call", "name": "f", "arguments": "{}"})
    assert response_text(payload) == "from parts"
    assert response_text({"output": "nonsense"}) == "" and response_text([]) == ""


def test_a_streamed_response_split_anywhere_reads_whole():
    stream = b"".join(
        [
            event({"type": "response.output_text.delta", "delta": "Hel"}),
            event({"type": "response.output_text.delta", "delta": "lo"}),
            b"data: not json\n\n",
            event({"type": "response.completed", "response": response_object("m", "Hello")}),
        ]
    )
    reply = StreamedResponse()
    for start in range(0, len(stream), 7):
        reply.feed(stream[start : start + 7])
    assert reply.complete and reply.text == "Hello"
    unfinished = StreamedResponse()
    unfinished.feed(event({"type": "response.output_text.delta", "delta": "Hel"}))
    assert not unfinished.complete and unfinished.text == "Hel"
