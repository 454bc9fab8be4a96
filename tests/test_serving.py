"""The web process under real traffic (issue 26): many slow streams at once with every other
route still answering, a client that leaves, the cap on open streams, chunked bodies, a
database that goes away, and SIGTERM's drain.

The fake provider's `gate` holds every stream after its first word, so a test waits for the
event it needs (N streams open at the provider) instead of guessing at timings.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading

import httpx
import openai
import pytest

from omniroute.factory import create_app
from omniroute.memory.model import MemoryFilter
from tests.gateway_server import ROOT, RunningGateway, call, web_process
from tests.helpers import (
    ADMIN_TOKEN,
    app_settings,
    drained,
    environment,
    eventually,
    free_port,
    run_async,
)
from tests.tcp_relay import CuttableRelay

pytestmark = pytest.mark.slow

STREAMS = 100
REPLY = " ".join(f"w{number}" for number in range(12))
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def chat_body(text: str = "Hello there.", stream: bool = True) -> dict:
    return {"model": "fake/m", "messages": [{"role": "user", "content": text}], "stream": stream}


def streamed_text(raw: bytes) -> str:
    words = []
    for line in raw.splitlines():
        if line.startswith(b"data: {"):
            delta = json.loads(line[6:])["choices"][0]["delta"]
            words.append(delta.get("content") or "")
    return "".join(words)


@pytest.fixture
def gated(upstream):
    upstream.reply = REPLY
    upstream.gate = threading.Event()
    yield upstream
    upstream.gate.set()


def test_one_web_process_holds_a_hundred_streams_on_four_threads(tmp_path, gated):
    provider = {"id": "fake", "baseUrl": gated.base_url, "models": ["m"]}
    settings = {
        "DATA_DIR": str(tmp_path / "data"),
        "OMNIROUTE_ADMIN_TOKEN": ADMIN_TOKEN,
        "OMNIROUTE_PROVIDERS": json.dumps([provider]),
        "WEB_THREADS": "4",
    }
    with web_process(tmp_path / "web.log", **settings) as (base, _):
        _, _, key = call(f"{base}/api/keys", "POST", {"name": "load"}, ADMIN_TOKEN)
        headers = {"Authorization": f"Bearer {key['key']}"}

        async def one(client: httpx.AsyncClient) -> tuple[int, bytes]:
            url = f"{base}/v1/chat/completions"
            async with client.stream("POST", url, json=chat_body(), headers=headers) as answer:
                return answer.status_code, await answer.aread()

        async def load():
            limits = httpx.Limits(max_connections=None)
            async with httpx.AsyncClient(limits=limits, timeout=120) as client:
                streams = [asyncio.create_task(one(client)) for _ in range(STREAMS)]
                await asyncio.to_thread(eventually, lambda: gated.open_streams == STREAMS, 90)
                # Every stream is open at the provider, far past the four threads, and the
                # other routes answer meanwhile: the probe, and a chat that is not streamed.
                health = await client.get(f"{base}/healthz")
                whole = await client.post(
                    f"{base}/v1/chat/completions", json=chat_body(stream=False), headers=headers
                )
                gated.gate.set()
                return health, whole, await asyncio.gather(*streams)

        health, whole, answers = run_async(load)
    assert health.status_code == 200
    assert whole.status_code == 200 and whole.json()["choices"][0]["message"]["content"] == REPLY
    assert [status for status, _ in answers] == [200] * STREAMS
    assert all(streamed_text(raw) == REPLY for _, raw in answers)
    assert all(raw.rstrip().endswith(b"data: [DONE]") for _, raw in answers)


@pytest.fixture
def memory_gateway(gateway_app):
    gateway_app.extensions["omniroute"].memory_settings.update({"enabled": True})
    server = RunningGateway(gateway_app).start()
    yield server
    server.stop()


def test_a_client_that_leaves_closes_the_provider_stream_and_only_what_it_got_is_kept(
    gateway_app, memory_gateway, upstream
):
    svc = gateway_app.extensions["omniroute"]
    key, secret = svc.keys.create("leaver")
    upstream.reply = "Sure. " + " ".join(["filler"] * 30) + " I live in Berlin."
    upstream.chunk_delay = 0.1
    body = chat_body("I prefer TypeScript over Python.")
    with httpx.Client(timeout=30) as client:
        url = f"{memory_gateway.url}/v1/chat/completions"
        with client.stream("POST", url, json=body, headers={"Authorization": f"Bearer {secret}"}):
            pass  # the headers came (the first chunk is on its way); the client leaves
    assert upstream.stream_cut.wait(10), "the provider's stream was not closed"
    assert eventually(lambda: memories_of(svc, key.id), timeout=20)
    drained(svc)
    contents = " ".join(memory.content for memory in memories_of(svc, key.id))
    assert "TypeScript" in contents  # the user's message is extracted
    assert "Berlin" not in contents  # the reply's end never reached the client


def test_a_stream_the_provider_breaks_ends_with_an_error_event_and_extracts_nothing(
    gateway_app, memory_gateway, upstream
):
    svc = gateway_app.extensions["omniroute"]
    key, secret = svc.keys.create("broken")
    upstream.reply = "I prefer Rust."
    body = {**chat_body("I prefer TypeScript over Python."), "model": "fake/break-off"}
    answer = httpx.post(
        f"{memory_gateway.url}/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {secret}"},
        timeout=30,
    )
    assert answer.status_code == 200
    assert b"The upstream stream broke" in answer.content
    # The relay's extraction step runs after the answer's end: wait for the relay to end.
    assert eventually(lambda: memory_gateway.server.dispatch.streams.open == 0)
    drained(svc)
    assert memories_of(svc, key.id) == []


def memories_of(svc, api_key_id: str):
    return svc.memories.find(MemoryFilter(api_key_id=api_key_id))


def test_past_max_open_streams_a_chat_gets_503_at_once_and_metrics_count_it(make_app, gated):
    app = make_app(MAX_OPEN_STREAMS=2)
    _, secret = app.extensions["omniroute"].keys.create("capped")
    server = RunningGateway(app).start()
    sdk = openai.OpenAI(base_url=f"{server.url}/v1", api_key=secret, max_retries=0)
    try:
        held = [sdk.chat.completions.create(**chat_body()) for _ in range(2)]
        assert eventually(lambda: gated.open_streams == 2)
        with pytest.raises(openai.APIStatusError) as refused:
            sdk.chat.completions.create(**chat_body())
        assert refused.value.status_code == 503
        assert refused.value.response.headers["retry-after"] == "1"
        error = refused.value.response.json()["error"]
        assert error["code"] == "server_overloaded" and "MAX_OPEN_STREAMS" in error["message"]
        metrics = httpx.get(f"{server.url}/metrics", headers=ADMIN).text
        assert "omniroute_open_streams 2.0" in metrics
        assert "omniroute_chats_rejected_total 1.0" in metrics
        gated.gate.set()
        assert ["".join(c.choices[0].delta.content or "" for c in s) for s in held] == [REPLY] * 2
    finally:
        gated.gate.set()
        sdk.close()
        server.stop()


def chunked(payload: dict, size: int = 7):
    data = json.dumps(payload).encode()
    for start in range(0, len(data), size):
        yield data[start : start + size]


def test_chunked_bodies_are_read_on_api_and_v1_under_the_same_limits(make_app, upstream):
    app = make_app(MAX_BODY_BYTES=4096)
    _, secret = app.extensions["omniroute"].keys.create("chunky")
    key_id = app.extensions["omniroute"].keys.list_keys()[0].id
    server = RunningGateway(app).start()
    try:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            memory = {"apiKeyId": key_id, "key": "lang", "content": "I prefer TypeScript"}
            as_json = {**ADMIN, "Content-Type": "application/json"}
            created = client.post("/api/memory", content=chunked(memory), headers=as_json)
            chat = client.post(
                "/v1/chat/completions",
                content=chunked(chat_body(stream=False)),
                headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
            )
            too_big = {**memory, "content": "x" * 5000}
            refused = client.post("/api/memory", content=chunked(too_big, 512), headers=as_json)
    finally:
        server.stop()
    assert created.status_code == 201, created.text
    assert chat.status_code == 200, chat.text
    assert refused.status_code == 413


def test_a_database_that_goes_away_is_a_503_and_readyz_names_no_host(
    tmp_path, upstream, system_postgres
):
    system_postgres.migrate()
    relay = CuttableRelay(("127.0.0.1", 5432))
    url = system_postgres.url.replace("127.0.0.1:5432", f"127.0.0.1:{relay.port}")
    provider = {"id": "fake", "baseUrl": upstream.base_url, "models": ["m"]}
    app = create_app(app_settings(tmp_path, url, OMNIROUTE_PROVIDERS=[provider], SCHEDULER="off"))
    _, secret = app.extensions["omniroute"].keys.create("down")
    app.extensions["omniroute"].memory_settings.update({"enabled": True})  # a chat reads rows
    server = RunningGateway(app).start()
    try:
        relay.cut()
        with httpx.Client(base_url=server.url, timeout=30) as client:
            chat = client.post(
                "/v1/chat/completions",
                json=chat_body(stream=False),
                headers={"Authorization": f"Bearer {secret}"},
            )
            listing = client.get("/api/memory", headers=ADMIN)
            ready = client.get("/readyz")
            ready_admin = client.get("/readyz", headers=ADMIN)
    finally:
        server.stop()
        app.extensions["omniroute"].close()
    assert chat.status_code == 503 and chat.headers["retry-after"] == "1"
    assert chat.json()["error"]["code"] == "database_unavailable"
    assert listing.status_code == 503 and "code" not in listing.json()["error"]
    assert ready.status_code == 503
    assert str(relay.port) not in ready.text and "127.0.0.1" not in ready.text
    assert ready.json()["error"]["details"] == [{"field": "database", "message": "unavailable"}]
    assert str(relay.port) in ready_admin.text  # the admin is told what failed


def serve(tmp_path, upstream, **settings):
    port = free_port()
    provider = {"id": "fake", "baseUrl": upstream.base_url, "models": ["m"]}
    env = environment(
        PORT=str(port),
        DATA_DIR=str(tmp_path / "data"),
        OMNIROUTE_ADMIN_TOKEN=ADMIN_TOKEN,
        OMNIROUTE_PROVIDERS=json.dumps([provider]),
        **settings,
    )
    with (tmp_path / "web.log").open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "omniroute.serve"], cwd=ROOT, env=env, stdout=log, stderr=log
        )
    base = f"http://127.0.0.1:{port}"
    assert eventually(lambda: _answers(f"{base}/healthz"), timeout=60), "no web process"
    return process, base


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.parametrize("grace", ["25", "1"])
def test_sigterm_lets_open_streams_finish_or_ends_them_cleanly_and_keeps_extraction(
    tmp_path, upstream, grace
):
    """With the grace longer than the stream, the stream finishes whole; with one second,
    it ends with an in-band error and a proper end. Either way the accepted chat's facts are
    extracted before the process exits."""
    upstream.reply = "Noted. " + " ".join(["more"] * 20)
    upstream.chunk_delay = 0.2
    process, base = serve(tmp_path, upstream, SHUTDOWN_GRACE_SECONDS=grace)
    try:
        _, _, key = call(f"{base}/api/keys", "POST", {"name": "drain"}, ADMIN_TOKEN)
        call(f"{base}/api/settings/memory", "PUT", {"enabled": True}, ADMIN_TOKEN)
        headers = {"Authorization": f"Bearer {key['key']}"}
        body = chat_body("I prefer TypeScript over Python.")
        with httpx.stream(
            "POST", f"{base}/v1/chat/completions", json=body, headers=headers, timeout=60
        ) as answer:
            chunks = answer.iter_raw()
            first = next(chunks)
            process.send_signal(signal.SIGTERM)
            raw = first + b"".join(chunks)  # ends without a broken connection
        assert process.wait(timeout=60) in (0, -signal.SIGTERM)
    finally:
        if process.poll() is None:
            process.kill()
    if grace == "25":
        assert streamed_text(raw) == upstream.reply and raw.rstrip().endswith(b"[DONE]")
    else:
        assert b'"code": "server_shutdown"' in raw and b"[DONE]" not in raw
    app = create_app({"DATA_DIR": str(tmp_path / "data"), "SCHEDULER": "off"})
    try:
        svc = app.extensions["omniroute"]
        contents = [memory.content for memory in memories_of(svc, key["id"])]
    finally:
        app.extensions["omniroute"].close()
    assert any("TypeScript" in content for content in contents)
