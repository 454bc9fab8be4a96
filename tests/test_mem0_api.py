"""mem0's platform API (docs/mem0.md), driven by mem0's own client, `mem0ai` 2.2.1 (pinned
in requirements-mem0.txt), against the gateway on loopback: the same memories as the chats,
per end user, never another key's."""

from __future__ import annotations

import os
import tempfile
from datetime import date

# mem0's client sends telemetry to PostHog unless told not to, and keeps a config folder in
# the home directory: neither may happen here (loopback only). Both are read at its import.
os.environ["MEM0_TELEMETRY"] = "False"
os.environ.setdefault("MEM0_DIR", tempfile.mkdtemp(prefix="mem0-"))

import httpx  # noqa: E402
import pytest  # noqa: E402
from mem0 import AsyncMemoryClient, MemoryClient  # noqa: E402
from mem0.exceptions import AuthenticationError, MemoryNotFoundError  # noqa: E402

from omniroute.core.keys import READ_MEMORY  # noqa: E402
from omniroute.memory.model import MemoryFilter  # noqa: E402
from tests.gateway_server import call, web_process  # noqa: E402
from tests.helpers import ADMIN_TOKEN, drained, eventually, run_async  # noqa: E402

pytestmark = pytest.mark.both_stores


@pytest.fixture
def keys(gateway_app):
    """Keys alice-app and bob-app (their secrets), memory on, as a team would have it."""
    svc = gateway_app.extensions["omniroute"]
    svc.memory_settings.update({"enabled": True})
    made = {name: svc.keys.create(name) for name in ("alice-app", "bob-app")}
    return svc, {name: secret for name, (_, secret) in made.items()}


@pytest.fixture
def mem0(gateway):
    """A mem0 MemoryClient of the gateway for a key's secret (closed at the end)."""
    made = []

    def client(secret: str) -> MemoryClient:
        made.append(MemoryClient(api_key=secret, host=gateway.url))
        return made[-1]

    yield client
    for each in made:
        each.client.close()


def contents(answer) -> set[str]:
    return {memory["memory"] for memory in answer["results"]}


def test_every_memory_method_through_the_mem0_client(keys, mem0):
    _, secret = keys
    every_method(mem0(secret["alice-app"]))


def every_method(alice: MemoryClient) -> None:
    """Each memory method of the client, for two end users of one key."""
    added = alice.add(
        [{"role": "user", "content": "I prefer Neovim over VS Code. My name is Ana."}],
        user_id="ana",
    )
    assert added["status"] == "SUCCEEDED" and added["event_id"]
    assert {(r["memory"], r["event"]) for r in added["results"]} == {
        ("I prefer Neovim over VS Code", "ADD"),
        ("My name is Ana", "ADD"),
    }
    as_given = alice.add(
        "Deploys go out on Fridays", user_id="ana", run_id="r1", agent_id="planner",
        metadata={"team": "web"}, infer=False,
    )  # fmt: skip
    (note,) = as_given["results"]
    again = alice.add("Deploys go out on Fridays", user_id="ana", run_id="r1", infer=False)
    assert again["results"] == [{**note, "event": "UPDATE"}], "the same text: one memory"
    alice.add("I prefer tea over coffee", user_id="ben")

    mine = alice.get_all(filters={"user_id": "ana"})
    assert mine["count"] == 3 and mine["next"] is None
    assert contents(mine) == {"I prefer Neovim over VS Code", "My name is Ana",
                              "Deploys go out on Fridays"}  # fmt: skip
    page = alice.get_all(filters={"user_id": "ana"}, page=1, page_size=2)
    assert len(page["results"]) == 2 and page["count"] == 3 and "page=2" in page["next"]
    today = {"user_id": "ana", "created_at": {"gte": "2000-01-01", "lte": date.today().isoformat()}}
    assert alice.get_all(filters=today)["count"] == 3, "lte a date takes that whole day in"
    assert (
        alice.get_all(filters={"AND": [{"user_id": "ana"}, {"created_at": {"gt": "2999-01-01"}}]})[
            "count"
        ]
        == 0
    )
    by_agent = alice.get_all(filters={"AND": [{"user_id": "ana"}, {"agent_id": "planner"}]})
    assert contents(by_agent) == {"Deploys go out on Fridays"}
    shown = by_agent["results"][0]
    assert (shown["user_id"], shown["run_id"], shown["agent_id"], shown["metadata"]["team"]) == (
        "ana", "r1", "planner", "web",
    )  # fmt: skip

    found = alice.search("Which editor does Neovim beat?", filters={"user_id": "ana"})
    assert "I prefer Neovim over VS Code" in contents(found)
    assert all(r["user_id"] == "ana" and "score" in r for r in found["results"])
    assert alice.search("tea or coffee", filters={"user_id": "ana"})["results"] == [], (
        "Ben's memory is Ben's"
    )
    assert contents(alice.search("tea", filters={"user_id": "ben"})) == {"I prefer tea over coffee"}

    got = alice.get(note["id"])
    assert got["memory"] == "Deploys go out on Fridays" and got["hash"]
    changed = alice.update(note["id"], text="Deploys go out on Thursdays")
    assert changed["memory"] == "Deploys go out on Thursdays"
    assert [(h["event"], h["new_memory"]) for h in alice.history(note["id"])] == [
        ("ADD", "Deploys go out on Fridays"),
        ("UPDATE", "Deploys go out on Thursdays"),
    ], "adding the same text again changed nothing, and left no row"
    relabelled = alice.update(note["id"], metadata={"team": "ops"}, expiration_date="2099-01-31")
    assert (relabelled["metadata"]["team"], relabelled["agent_id"]) == ("ops", "planner"), (
        "the metadata is replaced, the agent stays"
    )
    assert relabelled["expiration_date"] == "2099-01-31"
    assert alice.delete(note["id"])["message"]
    with pytest.raises(MemoryNotFoundError):
        alice.get(note["id"])
    assert alice.delete_all(user_id="ana")["message"]
    assert alice.get_all(filters={"user_id": "ana"})["count"] == 0
    assert alice.get_all(filters={"user_id": "ben"})["count"] == 1, "another user's stay"


def test_the_async_client_takes_the_same_routes(keys, gateway):
    _, secret = keys

    async def work():
        async with httpx.AsyncClient() as http:
            client = AsyncMemoryClient(api_key=secret["alice-app"], host=gateway.url, client=http)
            await client.add("I prefer Zig over C", user_id="ana")
            found = await client.search("Zig or C?", filters={"user_id": "ana"})
            listed = await client.get_all(filters={"user_id": "ana"})
            return contents(found), listed["count"]

    assert run_async(work) == ({"I prefer Zig over C"}, 1)


def test_users_are_listed_and_one_is_forgotten_whole(keys, mem0):
    svc, secret = keys
    alice, bob = mem0(secret["alice-app"]), mem0(secret["bob-app"])
    (cat,) = alice.add("My cat is called Tom", user_id="ana", infer=False)["results"]
    alice.add("My dog is called Rex", user_id="ana", infer=False)
    (ben,) = alice.add("I like chess", user_id="ben", infer=False)["results"]
    alice.add("The team ships on Fridays", agent_id="planner", infer=False)
    users = alice.users()["results"]
    assert [(u["name"], u["type"], u["total_memories"]) for u in users] == [
        ("ana", "user", 2),
        ("ben", "user", 1),
    ]
    assert bob.users()["results"] == [], "another key's users are not listed"
    alice.delete_users(user_id="ana")
    assert alice.get_all(filters={"user_id": "ana"})["count"] == 0
    assert svc.memories.history(cat["id"]) == [], "erased with its history, as a person asks"
    assert [u["name"] for u in alice.users()["results"]] == ["ben"]
    assert alice.history(ben["id"])[0]["event"] == "ADD", "Ben's are kept"
    with httpx.Client(
        base_url=alice.host, headers={"Authorization": f"Token {secret['alice-app']}"}
    ) as http:
        wrong = http.delete("/v2/entities/robot/x/")
        assert wrong.status_code == 400 and wrong.json()["details"][0]["field"] == "entity_type"
    assert alice.get_all()["count"] == 2, "a kind of entity it does not know deletes nothing"
    alice.delete_users(agent_id="planner")
    assert alice.get_all(filters={"agent_id": "planner"})["count"] == 0
    alice.reset()
    assert alice.get_all()["count"] == 0


def test_another_key_never_sees_them_whatever_user_it_names(keys, mem0):
    _, secret = keys
    alice, bob = mem0(secret["alice-app"]), mem0(secret["bob-app"])
    (memory,) = alice.add("My cat is called Tom", user_id="ana", infer=False)["results"]
    assert bob.get_all(filters={"user_id": "ana"})["count"] == 0
    assert bob.search("cat Tom", filters={"user_id": "ana"})["results"] == []
    for method in (bob.get, bob.history, bob.delete):
        with pytest.raises(MemoryNotFoundError):
            method(memory["id"])
    with pytest.raises(MemoryNotFoundError):
        bob.update(memory["id"], text="My cat is called Felix")
    bob.delete_all(user_id="ana")
    assert alice.get(memory["id"])["memory"] == "My cat is called Tom"


def test_one_memory_two_doors_chats_and_mem0(keys, mem0, sdk, upstream):
    svc, secret = keys
    alice = mem0(secret["alice-app"])
    alice.add("My dog is called Rex", user_id="ana", infer=False)
    reply = sdk(secret["alice-app"]).chat.completions.with_raw_response.create(
        model="fake/m", messages=[{"role": "user", "content": "What is my dog called?"}],
        user="ana",
    )  # fmt: skip
    assert reply.headers["x-omniroute-memories"] == "1"
    assert "My dog is called Rex" in upstream.last_body["messages"][0]["content"]
    sdk(secret["alice-app"]).chat.completions.create(
        model="fake/m", messages=[{"role": "user", "content": "I prefer Rust over Go."}],
        user="ana",
    )  # fmt: skip
    drained(svc)
    found = alice.search("Rust or Go?", filters={"user_id": "ana"})
    assert "I prefer Rust over Go" in contents(found), "extracted from the chat, found by mem0"
    other = sdk(secret["alice-app"]).chat.completions.with_raw_response.create(
        model="fake/m", messages=[{"role": "user", "content": "What is my dog called?"}],
        user="ben",
    )  # fmt: skip
    assert other.headers["x-omniroute-memories"] == "0", "Ana's memories are not Ben's"


def test_refusals_come_in_mem0s_shape_with_the_right_status(keys, gateway, mem0):
    svc, secret = keys
    with httpx.Client() as http, pytest.raises(ValueError, match="Invalid API key"):
        MemoryClient(api_key="sk-omr-guessed", host=gateway.url, client=http)
    token = {"Authorization": f"Token {secret['alice-app']}"}
    with httpx.Client(base_url=gateway.url, headers=token) as http:
        for path, body, field in [
            ("/v3/memories/add/", {"messages": "hi"}, "user_id"),
            ("/v3/memories/add/", {"messages": [], "user_id": "ana"}, "messages"),
            ("/v3/memories/add/", {"messages": "hi", "user_id": "a\x07b"}, "user_id"),
            ("/v3/memories/add/", {"messages": "hi", "user_id": "ana", "infer": "yes"}, "infer"),
            ("/v3/memories/add/", {"messages": "hi", "run_id": "r",
                                   "expiration_date": "2001-01-01"}, "expiration_date"),
            ("/v3/memories/", {"filters": {"OR": [{"user_id": "ana"}]}}, "filters.OR"),
            ("/v3/memories/", {"filters": {"AND": [{"user_id": "a"}, {"user_id": "b"}]}},
             "filters.AND.1.user_id"),
            ("/v3/memories/search/", {"query": "", "filters": {"user_id": "ana"}}, "query"),
            ("/v3/memories/search/", {"query": "x", "top_k": 0}, "top_k"),
        ]:  # fmt: skip
            answer = http.post(path, json=body)
            assert answer.status_code == 400, (path, body, answer.text)
            error = answer.json()
            assert error["error"] == "400 Bad Request" and field in error["detail"]
            assert [d["field"] for d in error["details"]] == [field], answer.text
        assert http.delete("/v1/memories/").status_code == 400, "never the whole key"
        huge = http.post("/v3/memories/add/", json={"messages": "x" * 2_000_000, "user_id": "a"})
        assert huge.status_code == 413 and huge.json()["error"] == "413 Request Entity Too Large"
        missing = http.get("/v1/memories/no-such-id/")
        assert missing.status_code == 404 and "not found" in missing.json()["detail"]
        assert http.post("/v3/memories/add/", content=b"{", headers={
            "Content-Type": "application/json"}).status_code == 400  # fmt: skip
    key, reader_secret = svc.keys.create("reader", scopes=[READ_MEMORY])
    reader = mem0(reader_secret)
    with pytest.raises(AuthenticationError, match="lacks the write:memory scope"):
        reader.add("I prefer tea", user_id="ana")
    assert reader.get_all(filters={"user_id": "ana"})["count"] == 0


def test_guessing_keys_is_slowed_with_429(keys, gateway):
    with httpx.Client(base_url=gateway.url) as http:
        answers = [
            http.get("/v1/ping/", headers={"Authorization": f"Token sk-omr-guess-{n}"})
            for n in range(30)
        ]
    statuses = [answer.status_code for answer in answers]
    assert statuses[0] == 401 and statuses[-1] == 429
    assert answers[-1].headers["Retry-After"] and "detail" in answers[-1].json()


@pytest.mark.sqlite_only
def test_the_mem0_client_against_the_web_process(tmp_path, static_path):
    """`python -m omniroute.serve` as a platform runs it, with a real embedding model (the
    static one, distilled from the packaged MiniLM): every method again, and a search that
    finds by meaning alone."""
    settings = {"DATA_DIR": str(tmp_path / "data"), "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
                "MEMORY_STATIC_MODEL": str(static_path)}  # fmt: skip
    memory = {"enabled": True, "staticEnabled": True, "embeddingSource": "static"}
    with web_process(tmp_path / "web.log", **settings) as (url, _):
        assert call(f"{url}/api/settings/memory", "PUT", memory, ADMIN_TOKEN)[0] == 200
        secrets = []
        for name in ("alice-app", "bob-app"):
            status, _, created = call(f"{url}/api/keys", "POST", {"name": name}, ADMIN_TOKEN)
            assert status == 201
            secrets.append(created["key"])
        with httpx.Client() as first, httpx.Client() as second:
            alice = MemoryClient(api_key=secrets[0], host=url, client=first)
            bob = MemoryClient(api_key=secrets[1], host=url, client=second)
            every_method(alice)
            alice.add("I prefer Helix over Vim", user_id="ana")
            assert contents(alice.search("Helix or Vim?", filters={"user_id": "ana"})) == {
                "I prefer Helix over Vim"
            }
            assert bob.get_all(filters={"user_id": "ana"})["count"] == 0
            listed = call(f"{url}/api/memory?userId=ana", token=ADMIN_TOKEN)[2]
            assert [m["content"] for m in listed["data"]] == ["I prefer Helix over Vim"]
            alice.add("My golden retriever is called Max", user_id="zoe", infer=False)
            alice.add("I am allergic to shellfish", user_id="zoe", infer=False)

            def max_first():  # no word in common: found once the memories have vectors
                found = alice.search("What dog do I have?", filters={"user_id": "zoe"})
                results = found["results"]
                return results if results and results[0]["memory"].startswith("My golden") else None

            ranked = eventually(max_first, timeout=60)
            assert ranked, "found by meaning with the static model's vectors"
            assert 0 < ranked[0]["score"] <= 1
            assert "I am allergic to shellfish" not in contents({"results": ranked})


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('{"messages": "bad \\ud800 text", "user_id": "ana", "infer": false}', "messages"),
        ('{"messages": "bad \\u0000 text", "user_id": "ana", "infer": false}', "messages"),
        ('{"messages": "hi", "user_id": "ana \\ud800"}', "user_id"),
        ('{"messages": "hi", "user_id": "ana", "metadata": {"n": 1e400}}', "metadata.n"),
        ('{"messages": "hi", "user_id": "ana", "metadata": {"k": "\\u0000"}}', "metadata.k"),
        ("[" * 100_000 + "]" * 100_000, "body"),
    ],
)
def test_hostile_json_is_a_400_naming_the_field_and_stores_nothing(keys, gateway, body, field):
    svc, secret = keys
    headers = {"Authorization": f"Token {secret['alice-app']}", "Content-Type": "application/json"}
    with httpx.Client(base_url=gateway.url, headers=headers) as http:
        answer = http.post("/v3/memories/add/", content=body.encode())
    assert answer.status_code == 400, answer.text
    error = answer.json()
    assert error["error"] == "400 Bad Request"
    if field != "body":
        assert [d["field"] for d in error["details"]] == [field]
    assert svc.memories.find(MemoryFilter()) == []
