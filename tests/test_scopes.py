"""Scopes (docs/scopes.md): a key's shared memories, its end users' own, sessions, and global
memories, through every door (chat, REST, MCP, the studio) on both stores. One set of
memories, every door asked who sees what: no key sees another key's memories, no end user
another user's, and no gateway key changes a global memory."""

from __future__ import annotations

import pytest

from omniroute.memory.model import MemoryFilter
from tests.helpers import ADMIN_TOKEN, csrf_of, drained, eventually, run_async
from tests.mcp_client import call, http_session

pytestmark = pytest.mark.both_stores

QUERY = "Which colour do I like?"
# Every memory shares the query's word, so keyword search alone finds each one it may see.
SEEN = {
    "grey": ("A", "", ""),  # the key's shared memory
    "teal": ("A", "u1", ""),  # end user u1 of key A
    "olive": ("A", "u1", "s1"),  # u1, in session s1
    "maroon": ("A", "u1", "s2"),  # u1, in session s2
    "crimson": ("A", "u2", ""),  # end user u2 of key A
    "amber": ("B", "u1", ""),  # an end user of key B with the same id as A's u1
    "navy": ("", "", ""),  # global: no key's
}


@pytest.fixture
def world(gateway_app):
    """Keys A and B and one memory per row of SEEN; the ids of the keys and their secrets."""
    svc = gateway_app.extensions["omniroute"]
    svc.memory_settings.update({"enabled": True, "strategy": "hybrid"})
    keys = {name: svc.keys.create(f"key {name}") for name in ("A", "B")}
    ids = {name: key.id for name, (key, _) in keys.items()}
    ids[""] = ""
    for colour, (key, user, session) in SEEN.items():
        svc.memories.create(
            api_key_id=ids[key],
            user_id=user,
            session_id=session,
            key=f"colour:{colour}",
            content=f"The colour I like is {colour}.",
        )
    return svc, ids, {name: secret for name, (_, secret) in keys.items()}


def chat(sdk, secret: str, upstream, *, user: str | None = None, headers=None) -> set[str]:
    """The colours a chat of this key (and end user) got injected."""
    extra = {"user": user} if user is not None else {}
    raw = sdk(secret).chat.completions.with_raw_response.create(
        model="fake/m",
        messages=[{"role": "user", "content": QUERY}],
        extra_headers=headers or {},
        **extra,
    )
    if raw.headers["x-omniroute-memories"] == "0":
        return set()
    injected = upstream.last_body["messages"][0]["content"]
    return {colour for colour in SEEN if colour in injected}


def test_chats_see_their_key_their_user_and_the_global_memories(world, sdk, upstream):
    svc, _, secret = world
    assert chat(sdk, secret["A"], upstream, user="u1") == {
        "grey",
        "teal",
        "olive",
        "maroon",
        "navy",
    }
    assert chat(sdk, secret["A"], upstream, user="u2") == {"grey", "crimson", "navy"}
    assert chat(sdk, secret["A"], upstream) == {"grey", "navy"}  # no user: the key's own only
    assert chat(sdk, secret["B"], upstream, user="u1") == {"amber", "navy"}
    # The header names the user as well as OpenAI's field, and wins over it.
    header = {"x-omniroute-user-id": "u2"}
    assert chat(sdk, secret["A"], upstream, user="u1", headers=header) == {
        "grey",
        "crimson",
        "navy",
    }


def test_the_session_scope_keeps_a_chat_to_its_session_and_those_of_none(world, sdk, upstream):
    svc, _, secret = world
    svc.memory_settings.update({"scope": "session"})
    in_s1 = {"x-omniroute-session-id": "s1"}
    assert chat(sdk, secret["A"], upstream, user="u1", headers=in_s1) == {
        "grey", "teal", "olive", "navy"
    }  # fmt: skip
    assert chat(sdk, secret["A"], upstream, user="u1") == {"grey", "teal", "navy"}


def test_the_user_scope_gives_a_chat_without_a_user_no_memory(world, sdk, upstream):
    svc, ids, secret = world
    svc.memory_settings.update({"scope": "user"})
    assert chat(sdk, secret["A"], upstream) == set()
    assert chat(sdk, secret["A"], upstream, user="u2") == {"grey", "crimson", "navy"}
    drained(svc)
    shared = svc.memories.find(MemoryFilter(api_key_id=ids["A"], user_id=""))
    assert [m.key for m in shared] == ["colour:grey"], "a chat of no user left nothing"


def test_global_memories_take_their_share_of_the_budget_and_none_at_zero(world, sdk, upstream):
    svc, _, secret = world
    svc.memory_settings.update({"globalBudgetPercent": 0})
    assert chat(sdk, secret["B"], upstream, user="u1") == {"amber"}


def test_facts_extracted_from_a_users_chat_are_that_users(world, sdk, upstream):
    svc, ids, secret = world
    said = [{"role": "user", "content": "My name is Zoltan."}]
    sdk(secret["A"]).chat.completions.create(model="fake/m", messages=said, user="u2")
    drained(svc)
    found = eventually(lambda: svc.memories.find(MemoryFilter(api_key_id=ids["A"], text="Zoltan")))
    assert [(m.user_id, m.scope, m.key) for m in found] == [("u2", "user", "profile:name")]
    asked = [{"role": "user", "content": "What is my name?"}]
    sdk(secret["A"]).chat.completions.create(model="fake/m", messages=asked, user="u1")
    assert "Zoltan" not in str(upstream.last_body["messages"])
    sdk(secret["A"]).chat.completions.create(model="fake/m", messages=asked, user="u2")
    assert "Zoltan" in str(upstream.last_body["messages"][0])


def test_a_bad_user_id_is_a_400_naming_it(world, sdk):
    _, _, secret = world
    with pytest.raises(Exception) as raised:
        sdk(secret["A"]).chat.completions.create(
            model="fake/m", messages=[{"role": "user", "content": "hi"}], user="a\x1fb"
        )
    assert raised.value.status_code == 400 and "user" in str(raised.value)
    with pytest.raises(Exception) as raised:
        sdk(secret["A"]).chat.completions.create(
            model="fake/m", messages=[{"role": "user", "content": "hi"}], extra_body={"user": 7}
        )
    assert raised.value.status_code == 400


ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def colours(memories) -> set[str]:
    return {memory["key"].removeprefix("colour:") for memory in memories}


def test_rest_lists_previews_clears_and_erases_by_end_user(world, gateway_app):
    svc, ids, _ = world
    client = gateway_app.test_client()
    listed = client.get(f"/api/memory?apiKeyId={ids['A']}&userId=u1", headers=ADMIN).json
    assert colours(listed["data"]) == {"teal", "olive", "maroon"}
    assert {m["scope"] for m in listed["data"]} == {"user"}
    assert colours(client.get("/api/memory?scope=global", headers=ADMIN).json["data"]) == {"navy"}
    by_user = client.get("/api/memory?userId=u1", headers=ADMIN).json["data"]
    assert colours(by_user) == {"teal", "olive", "maroon", "amber"}  # every key's u1
    preview = client.post(
        "/api/memory/retrieve-preview",
        json={"query": QUERY, "apiKeyId": ids["A"], "userId": "u2", "strategy": "keyword"},
        headers=ADMIN,
    ).json
    scopes = {item["key"].removeprefix("colour:"): item["scope"] for item in preview["memories"]}
    assert scopes == {"grey": "key", "crimson": "user", "navy": "global"}
    cleared = client.delete(f"/api/memory?apiKeyId={ids['A']}&userId=u2", headers=ADMIN).json
    assert cleared["deletedCount"] == 1
    erased = client.post(
        "/api/memory/erase", json={"apiKeyId": ids["A"], "userId": "u1"}, headers=ADMIN
    )
    assert erased.status_code == 200 and erased.json["memories"] == 3
    left = client.get(f"/api/memory?apiKeyId={ids['A']}", headers=ADMIN).json["data"]
    assert colours(left) == {"grey"}
    assert colours(client.get(f"/api/memory?apiKeyId={ids['B']}", headers=ADMIN).json["data"]) == {
        "amber"
    }


def test_rest_creates_global_memories_and_user_memories_upsert_apart(world, gateway_app):
    _, ids, _ = world
    client = gateway_app.test_client()
    made = client.post(
        "/api/memory", json={"key": "policy:tone", "content": "Be brief."}, headers=ADMIN
    )
    assert made.status_code == 201 and made.json["memory"]["scope"] == "global"
    refused = client.post(
        "/api/memory", json={"key": "k", "content": "x", "userId": "u1"}, headers=ADMIN
    )
    assert refused.status_code == 422 and refused.json["error"]["details"][0]["field"] == "userId"
    for user in ("u1", "u2", "u1"):
        body = {"apiKeyId": ids["A"], "userId": user, "key": "pref:tea", "content": f"{user} tea"}
        assert client.post("/api/memory", json=body, headers=ADMIN).status_code == 201
    teas = client.get(f"/api/memory?apiKeyId={ids['A']}&q=pref:tea", headers=ADMIN).json["data"]
    assert sorted((m["userId"], m["content"]) for m in teas) == [
        ("u1", "u1 tea"), ("u2", "u2 tea")
    ]  # fmt: skip
    for bad in ("", " ", "a\x00b", "x" * 257, "line\nbreak"):
        answer = client.post(
            "/api/memory",
            json={"apiKeyId": ids["A"], "userId": bad, "key": "k", "content": "x"},
            headers=ADMIN,
        )
        assert answer.status_code in ((201,) if bad == "" else (422,)), (bad, answer.json)


def test_mcp_searches_as_a_chat_and_never_changes_a_global_memory(world, gateway):
    svc, ids, secret = world
    global_id = svc.memories.find(MemoryFilter(api_key_id=""))[0].id

    async def work():
        async with http_session(gateway.url, secret["A"]) as session:
            _, found = await call(session, "omniroute_memory_search", query=QUERY, userId="u1")
            seen = {m["key"].removeprefix("colour:"): m["scope"] for m in found["data"]["memories"]}
            assert seen == {
                "grey": "key", "teal": "user", "olive": "user", "maroon": "user", "navy": "global"
            }  # fmt: skip
            _, shared = await call(session, "omniroute_memory_search", query=QUERY)
            assert colours(shared["data"]["memories"]) == {"grey", "navy"}
            _, got = await call(session, "omniroute_memory_get", id=global_id)
            assert got["data"]["memory"]["scope"] == "global"
            for tool, more in (
                ("omniroute_memory_update", {"content": "Mine now"}),
                ("omniroute_memory_delete", {}),
            ):
                error, text = await call(session, tool, id=global_id, **more)
                assert error and "global" in text, tool
            error, _ = await call(
                session, "omniroute_memory_add", key="pref:tea", content="Green", userId="u3"
            )
            assert not error
            error, text = await call(session, "omniroute_memory_search", query=QUERY, userId="\x1f")
            assert error and "userId" in text
        async with http_session(gateway.url, secret["B"]) as session:
            _, other = await call(session, "omniroute_memory_search", query=QUERY, userId="u1")
            assert colours(other["data"]["memories"]) == {"amber", "navy"}
            error, _ = await call(session, "omniroute_memory_get", key="colour:teal", userId="u1")
            assert error

    run_async(work)
    assert svc.memories.get(global_id).content == "The colour I like is navy."
    added = svc.memories.get_by_key(ids["A"], "pref:tea", "u3")
    assert added is not None and added.scope == "user"


def test_the_studio_lists_by_end_user_and_marks_global_memories(world, gateway_app):
    _, ids, _ = world
    studio = gateway_app.test_client()
    token = csrf_of(studio.get("/dashboard/login").text)
    studio.post("/dashboard/login", data={"token": ADMIN_TOKEN, "csrf_token": token})
    page = studio.get(f"/dashboard/memory?tab=memories&apiKeyId={ids['A']}&userId=u2").text
    assert "crimson" in page and "teal" not in page and "grey" not in page
    everything = studio.get("/dashboard/memory?tab=memories").text
    assert (
        '<span class="badge">Global</span>' in everything and "user <code>u1</code>" in everything
    )
    played = studio.get(
        f"/dashboard/memory?tab=playground&apiKeyId={ids['B']}&userId=u1&query=colour"
        "&strategy=keyword"
    ).text
    assert "amber" in played and "navy" in played and "teal" not in played
