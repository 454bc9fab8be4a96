"""Latency the gateway adds: the same fake upstream called directly and through the proxy.

Memory is on and the key has N memories (default 1,000), in one of two corpora:
- `locomo` (default): real dialogue turns of the LoCoMo development split as memories, asked
  that split's own questions, so a question matches what such a question matches;
- `synthetic`: a worst case where every memory shares words with the one question, so the
  whole budget (about 100 memories) is retrieved and injected into every request.
Every proxied request authenticates, retrieves, injects and forwards. The gateway runs as the
web process does (`python -m omniroute.serve`, jobs in-process as without REDIS_URL), the fake
upstream and this client in processes of their own, as a provider and a client would be: in
one process, the three shared one GIL. Direct and proxied calls alternate in one run so machine
noise hits both alike. Non-streaming: whole response;
streaming: time to the first byte. Run with `make bench` or
`python bench/proxy_overhead.py --corpus synthetic --requests 300`.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stores import STORES, database_url  # noqa: E402
from omniroute.factory import create_app  # noqa: E402
from tests.helpers import environment, free_port  # noqa: E402

TOPICS = "postgres redis sqlite docker neovim typescript rust coffee berlin hiking".split()
SYNTHETIC_QUESTION = "Which database did we pick for the analytics project, postgres or sqlite?"
LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "locomo10.json"
DEVELOPMENT = ("conv-26", "conv-30", "conv-41", "conv-42", "conv-43")


def synthetic_corpus(count: int) -> tuple[list[str], list[str]]:
    rng = random.Random(11)
    facts = [
        f"Fact {n}: the user mentioned {' '.join(rng.choice(TOPICS) for _ in range(6))}."
        for n in range(count)
    ]
    return facts, [SYNTHETIC_QUESTION]


def locomo_corpus(count: int) -> tuple[list[str], list[str]]:
    conversations = [c for c in json.loads(LOCOMO.read_text()) if c["sample_id"] in DEVELOPMENT]
    turns, questions = [], []
    for conversation in conversations:
        for name, session in conversation["conversation"].items():
            if name.startswith("session_") and isinstance(session, list):
                turns += [f"{turn['speaker']}: {turn['text']}" for turn in session]
        questions += [qa["question"] for qa in conversation["qa"] if qa["category"] in (1, 2, 3, 4)]
    return turns[:count], questions


def seed_memories(svc, api_key_id: str, facts: list[str]) -> None:
    with svc.db.write() as conn:
        for number, content in enumerate(facts):
            svc.memories.create(
                api_key_id=api_key_id, key=f"fact:{number}", content=content, connection=conn
            )


def timed(client: httpx.Client, url: str, body: dict, headers: dict, stream: bool):
    """(milliseconds, response headers) of one call."""
    started = time.perf_counter()
    with client.stream("POST", url, json=body, headers=headers) as response:
        if stream:
            chunks = response.iter_raw()
            next(chunks)
            elapsed = time.perf_counter() - started
            for _ in chunks:  # drain the rest of the stream
                pass
        else:
            response.read()
            elapsed = time.perf_counter() - started
        assert response.status_code == 200, response.status_code
    return elapsed * 1000, response.headers


def request_body(questions: list[str], number: int, stream: bool) -> dict:
    question = questions[number % len(questions)]
    return {"model": "m", "messages": [{"role": "user", "content": question}], "stream": stream}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * share) - 1)]


@contextmanager
def process(command: list[str], env: dict[str, str], stdout=None) -> Iterator[subprocess.Popen]:
    child = subprocess.Popen(command, env=env, cwd=ROOT, stdout=stdout, text=True)
    try:
        yield child
    finally:
        child.terminate()
        child.wait(timeout=30)


def wait_until_up(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--corpus", choices=("locomo", "synthetic"), default="locomo")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--no-memory", action="store_true", help="the proxy's own cost alone")
    parser.add_argument("--store", choices=STORES, default="sqlite")
    args = parser.parse_args()

    upstream_command = [sys.executable, "-m", "tests.fake_upstream"]
    with (
        tempfile.TemporaryDirectory() as folder,
        database_url(args.store, folder) as url,
        process(upstream_command, environment(), subprocess.PIPE) as upstream,  # prints its URL
    ):
        upstream_url = upstream.stdout.readline().strip()
        port = free_port()
        settings = {
            "DATA_DIR": folder,
            "DATABASE_URL": url,
            "OMNIROUTE_ADMIN_TOKEN": "bench",
            "OMNIROUTE_SECRET_KEY": "bench-secret-key",
            "LOG_LEVEL": "WARNING",
            "HOST": "127.0.0.1",
            "PORT": str(port),
        }
        providers = [{"id": "fake", "baseUrl": upstream_url, "models": ["m"]}]
        app = create_app({**settings, "OMNIROUTE_PROVIDERS": providers})
        svc = app.extensions["omniroute"]
        svc.memory_settings.update({"enabled": not args.no_memory, "strategy": "hybrid"})
        key, secret = svc.keys.create("bench")
        facts, questions = (locomo_corpus if args.corpus == "locomo" else synthetic_corpus)(
            args.memories
        )
        seed_memories(svc, key.id, facts)
        svc.close()
        gateway_env = environment(**settings, OMNIROUTE_PROVIDERS=json.dumps(providers))
        with process([sys.executable, "-m", "omniroute.serve"], gateway_env):
            gateway = f"http://127.0.0.1:{port}"
            wait_until_up(f"{gateway}/healthz")
            measure(args, questions, f"{upstream_url}/chat/completions", gateway, secret, facts)


def measure(args, questions, direct: str, gateway: str, secret: str, facts: list[str]) -> None:
    proxied = (f"{gateway}/v1/chat/completions", {"Authorization": f"Bearer {secret}"})
    print(
        f"proxy overhead on {args.store}: {len(facts):,} memories ({args.corpus}) for the key, "
        f"memory {'off' if args.no_memory else 'on'}, {args.requests} requests per case; "
        "the gateway, the fake upstream and this client each in a process of their own"
    )
    print(f"{'case':<34} {'direct ms':>10} {'gateway ms':>11} {'added ms':>9} {'p95 added':>10}")
    with httpx.Client(timeout=30) as client:
        injected = []
        for stream in (False, True):
            for number in range(20):  # warm up connections and caches
                body = request_body(questions, number, stream)
                timed(client, direct, body, {}, stream)
                timed(client, proxied[0], {**body, "model": "fake/m"}, proxied[1], stream)
            plain, through, added = [], [], []
            for number in range(args.requests):
                body = request_body(questions, number, stream)
                a, _ = timed(client, direct, body, {}, stream)
                b, headers = timed(
                    client, proxied[0], {**body, "model": "fake/m"}, proxied[1], stream
                )
                injected.append(int(headers["x-omniroute-memories"]))
                plain.append(a)
                through.append(b)
                added.append(b - a)
            name = "streaming, time to first byte" if stream else "non-streaming, whole response"
            print(
                f"{name:<34} {statistics.median(plain):>10.2f} "
                f"{statistics.median(through):>11.2f} {statistics.median(added):>9.2f} "
                f"{percentile(added, 0.95):>10.2f}"
            )
    print(
        f"memories injected per proxied request: median {statistics.median(injected):.0f}, "
        f"max {max(injected)}"
    )


if __name__ == "__main__":
    main()
