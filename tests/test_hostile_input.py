"""Hostile JSON at every write route: answered with a 4xx naming the field, nothing stored."""

from __future__ import annotations

import json

import pytest

from omniroute.memory.model import MemoryFilter
from tests.helpers import ADMIN_TOKEN, csrf_of, drained

pytestmark = pytest.mark.both_stores

LONE = "bad \ud800 text"  # a lone surrogate: valid JSON ("\ud800"), not valid text
NUL = "bad \u0000 text"  # valid JSON ("\u0000"), valid text, and no database text
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
def world(gateway_app):
    """A key with one memory, and the fake provider (from gateway_app)."""
    svc = gateway_app.extensions["omniroute"]
    key, secret = svc.keys.create("alice")
    memory, _ = svc.memories.create(api_key_id=key.id, key="k", content="kept")
    return {"app": gateway_app, "svc": svc, "key": key.id, "secret": secret, "memory": memory.id}


def send(world, method: str, path: str, body, headers=None):
    client = world["app"].test_client()
    path = path.format(key=world["key"], memory=world["memory"])
    if isinstance(body, dict | list):
        body = json.dumps(body)  # escapes the surrogate as \ud800, as a client would send it
    return client.open(
        path,
        method=method,
        data=body,
        content_type="application/json",
        headers=headers or ADMIN,
    )


def memory_body(world, **change):
    return {"apiKeyId": world["key"], "key": "new", "content": "fine", **change}


# (method, path, body maker, field the answer must name), for either kind of bad text
UNSTORABLE_CASES = [
    ("POST", "/api/memory", lambda w, b: memory_body(w, content=b), "content"),
    ("POST", "/api/memory", lambda w, b: memory_body(w, key=b), "key"),
    ("POST", "/api/memory", lambda w, b: memory_body(w, sessionId=b), "sessionId"),
    ("POST", "/api/memory", lambda w, b: memory_body(w, apiKeyId=b), "apiKeyId"),
    ("POST", "/api/memory", lambda w, b: memory_body(w, metadata={"note": b}), "metadata.note"),
    ("POST", "/api/memory", lambda w, b: memory_body(w, metadata={b: 1}), "metadata"),
    ("PUT", "/api/memory/{memory}", lambda w, b: {"content": b}, "content"),
    (
        "POST",
        "/api/memory/import",
        lambda w, b: {"memories": [memory_body(w, content=b)]},
        "memories.0.content",
    ),
    (
        "POST",
        "/api/memory/retrieve-preview",
        lambda w, b: {"apiKeyId": w["key"], "query": b},
        "query",
    ),
    ("POST", "/api/keys", lambda w, b: {"name": b}, "name"),
    (
        "POST",
        "/api/providers",
        lambda w, b: {"id": "p2", "baseUrl": f"http://h/{b}"},
        "baseUrl",
    ),
    ("PUT", "/api/providers/fake", lambda w, b: {"apiKey": b}, "apiKey"),
    ("PUT", "/api/providers/fake", lambda w, b: {"models": ["m", b]}, "models.1"),
    ("PUT", "/api/settings/memory", lambda w, b: {"customModelId": b}, "customModelId"),
    (
        "PUT",
        "/api/settings/memory",
        lambda w, b: {"backendConfigs": {"a": b}},
        "backendConfigs.a",
    ),
    ("PUT", "/api/settings/gateway", lambda w, b: {"defaultProvider": b}, "defaultProvider"),
]


@pytest.mark.parametrize("bad", [LONE, NUL], ids=["lone-surrogate", "nul"])
@pytest.mark.parametrize(("method", "path", "make", "field"), UNSTORABLE_CASES)
def test_unstorable_text_is_refused_naming_the_field(world, method, path, make, field, bad):
    # NUL: PostgreSQL's text cannot hold it (it was a 500 there), and no memory needs it.
    before = snapshot(world)
    response = send(world, method, path, make(world, bad))
    assert response.status_code == 422, response.json
    assert [d["field"] for d in response.json["error"]["details"]] == [field]
    assert snapshot(world) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (
            {"model": "fake/m", "messages": [{"role": "user", "content": LONE}]},
            "messages.0.content",
        ),
        ({"model": f"fake/{LONE}", "messages": [{"role": "user", "content": "hi"}]}, "model"),
    ],
)
def test_the_gateway_refuses_a_lone_surrogate_too(world, upstream, body, field):
    response = send(
        world, "POST", "/v1/chat/completions", body, {"Authorization": f"Bearer {world['secret']}"}
    )
    assert response.status_code == 422
    assert response.json["error"]["details"][0]["field"] == field
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        (
            "/v1/chat/completions",
            '{"model": "fake/m", "messages": [{"role": "user", "content": "hi"}], '
            '"max_tokens": 1e999999}',
            "max_tokens",
        ),
        ("/v1/responses", '{"model": "fake/m", "input": "hi", "temperature": NaN}', "temperature"),
        ("/v1/embeddings", '{"model": "fake/e", "input": "hi", "x": [-Infinity]}', "x.0"),
    ],
)
def test_a_number_json_cannot_hold_is_a_422_not_a_500(world, upstream, path, body, field):
    headers = {"Authorization": f"Bearer {world['secret']}"}
    response = send(world, "POST", path, body, headers)
    assert response.status_code == 422
    assert response.json["error"]["details"][0]["field"] == field
    assert upstream.requests == []


def test_a_memory_with_an_infinite_number_in_its_metadata_is_refused(world):
    body = '{"apiKeyId": "k", "key": "x", "content": "y", "metadata": {"n": 1e400}}'
    response = send(world, "POST", "/api/memory", body)
    assert response.status_code == 422
    assert response.json["error"]["details"][0]["field"] == "metadata.n"


def test_no_stored_surrogate_can_break_the_pages_that_show_providers(world):
    send(world, "PUT", "/api/providers/fake", {"models": [LONE]})
    studio = world["app"].test_client()
    token = csrf_of(studio.get("/dashboard/login").text)
    studio.post("/dashboard/login", data={"token": ADMIN_TOKEN, "csrf_token": token})
    for page in ("/dashboard/providers", "/dashboard/memory?tab=engine"):
        assert studio.get(page).status_code == 200


JSON_ROUTES = [
    ("POST", "/api/memory"),
    ("PUT", "/api/memory/{memory}"),
    ("POST", "/api/memory/import"),
    ("POST", "/api/memory/retrieve-preview"),
    ("POST", "/api/memory/reindex"),
    ("POST", "/api/keys"),
    ("POST", "/api/providers"),
    ("PUT", "/api/providers/fake"),
    ("PUT", "/api/settings/memory"),
    ("PUT", "/api/settings/gateway"),
    ("POST", "/v1/chat/completions"),
]


@pytest.mark.parametrize(("method", "path"), JSON_ROUTES)
def test_deeply_nested_json_is_a_400(world, method, path):
    headers = {"Authorization": f"Bearer {world['secret']}"} if path.startswith("/v1") else None
    deep = "[" * 200_000 + "]" * 200_000
    response = send(world, method, path, deep, headers)
    assert response.status_code == 400, response.json
    assert "nested" in response.json["error"]["message"]


def test_nesting_within_the_bound_still_works(world):
    metadata = {"a": {"b": {"c": [[[["deep but fine"]]]]}}}
    response = send(world, "POST", "/api/memory", memory_body(world, metadata=metadata))
    assert response.status_code == 201
    assert response.json["memory"]["metadata"] == metadata


def snapshot(world):
    svc = world["svc"]
    with svc.db.read() as conn:
        tables = ("memories", "api_keys", "providers", "settings", "memory_history")
        return {t: conn.exec_driver_sql(f"SELECT * FROM {t}").all() for t in tables}


@pytest.mark.parametrize(
    ("query", "field"),
    [(f"page={10**18}", "page"), (f"offset={2**63}", "offset"), ("limit=-1", "limit")],
)
def test_paging_past_its_bounds_is_a_422_not_an_overflow(world, query, field):
    response = world["app"].test_client().get(f"/api/memory?{query}", headers=ADMIN)
    assert response.status_code == 422
    assert response.json["error"]["details"][0]["field"] == field


def test_the_studio_list_ignores_a_page_past_its_bounds(world):
    studio = world["app"].test_client()
    token = csrf_of(studio.get("/dashboard/login").text)
    studio.post("/dashboard/login", data={"token": ADMIN_TOKEN, "csrf_token": token})
    assert studio.get(f"/dashboard/memory?page={10**18}").status_code == 200


def test_a_huge_whole_number_setting_is_clamped_not_a_500(world):
    zeros = "0" * 400
    raw = f'{{"maxTokens": 1{zeros}, "retentionDays": -1{zeros}}}'
    response = send(world, "PUT", "/api/settings/memory", raw)
    assert response.status_code == 200, response.json
    assert (response.json["maxTokens"], response.json["retentionDays"]) == (16000, 1)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"apiKey": "sk-\u0000abc"}, "apiKey"),
        ({"apiKey": "sk-abc\r\nX-Injected: 1"}, "apiKey"),
        ({"baseUrl": "http://127.0.0.1:9/v1\u0000"}, "baseUrl"),
        ({"models": ["gpt\u0000"]}, "models.0"),
        ({"embeddingModels": [{"id": "e\n", "dimensions": 8}]}, "embeddingModels.0.id"),
    ],
)
def test_a_control_character_in_a_provider_is_refused_when_saved(world, body, field):
    # It used to be stored and only failed at chat time, as a 502.
    before = snapshot(world)
    response = send(world, "PUT", "/api/providers/fake", body)
    assert response.status_code == 422, response.json
    assert response.json["error"]["details"][0]["field"] == field
    assert snapshot(world) == before


@pytest.mark.parametrize("url", ["http://[0]", "http://[::::]/v1", "http://["])
@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("PUT", "/api/providers/fake", lambda url: {"baseUrl": url}, "baseUrl"),
        ("POST", "/api/providers", lambda url: {"id": "new", "baseUrl": url}, "baseUrl"),
        ("PUT", "/api/settings/qdrant", lambda url: {"host": url}, "host"),
        ("PUT", "/api/settings/memory", lambda url: {"backendConfigs": {"b": {"baseUrl": url}}},
         "backendConfigs.b.baseUrl"),
    ],
)  # fmt: skip
def test_a_bracketed_host_that_is_no_address_is_a_422_not_a_500(
    world, url, method, path, body, field
):
    # Schemathesis's URLs led here: Python's urlsplit raises on "[0]" before any guard ran.
    before = snapshot(world)
    response = send(world, method, path, body(url))
    assert response.status_code == 422, response.json
    assert response.json["error"]["details"][0]["field"] == field
    assert snapshot(world) == before


def test_a_nul_in_a_query_parameter_is_refused_naming_it(world):
    response = world["app"].test_client().get("/api/memory?q=a%00b", headers=ADMIN)
    assert response.status_code == 422
    assert response.json["error"]["details"][0]["field"] == "q"


def test_a_chat_may_carry_nul_to_the_provider_and_its_fact_is_kept_without_it(world, upstream):
    world["svc"].memory_settings.update({"enabled": True})
    content = "I prefer Rust.\u0000"
    response = send(
        world,
        "POST",
        "/v1/chat/completions",
        {"model": "fake/m", "messages": [{"role": "user", "content": content}]},
        {"Authorization": f"Bearer {world['secret']}"},
    )
    assert response.status_code == 200, response.json
    assert upstream.last_body["messages"][-1]["content"] == content
    drained(world["svc"])
    found = world["svc"].memories.find(MemoryFilter(api_key_id=world["key"], type=None))
    assert "I prefer Rust" in [memory.content for memory in found]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/settings/qdrant", {"apiKey": "qk-\u00fc\u00dc"}, "apiKey"),
        ("/api/providers/fake", {"apiKey": "sk-\u2603"}, "apiKey"),
        ("/api/settings/memory",
         {"backendConfigs": {"b": {"baseUrl": "http://127.0.0.1:9", "apiKey": "k\u00e9"}}},
         "backendConfigs.b.apiKey"),
    ],
)  # fmt: skip
def test_a_key_a_header_cannot_carry_is_refused_when_saved(world, path, body, field):
    """Schemathesis found a Qdrant key with non-ASCII letters answered 500 at its probe."""
    response = send(world, "PUT", path, json.dumps(body))
    assert response.status_code == 422, response.json
    assert response.json["error"]["details"][0]["field"] == field
