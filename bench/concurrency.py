"""Many slow streams through one web process: does it hold them, and stay quick meanwhile?

A slow provider (bench/slow_provider.py: a chunk every 0.25 s for 15 s) runs in a process of
its own, the gateway as the web process (`python -m omniroute.serve`, SQLite, memory on, the
key holding 1,000 LoCoMo turns, jobs in-process) in another, and the N clients in a third
(asyncio). The clients start over `--ramp` seconds (N/ramp new chats a second, as traffic
arrives, not one burst), each reading its whole stream. Meanwhile a probe asks `/healthz`
every 0.2 s and a non-streamed chat (a fast answer, memory on) goes every 0.5 s. Printed per
N: streams completed with their full text, time to the first chunk p50/p95, /healthz p95,
the non-streamed chat's median, the web process's CPU (share of one core over the run) and
peak RSS, and RSS per open stream (peak less idle, over N). Then 20 clients that leave after
1 s: how many of their provider streams are still open 1 s later, and /healthz meanwhile.

`--baseline REF` runs the same load against an earlier commit's web process (a git worktree
of REF, with `--baseline-threads` Flask threads): the serving model the chat front replaced.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.proxy_overhead import (  # noqa: E402
    locomo_corpus,
    percentile,
    seed_memories,
    wait_until_up,
)
from omniroute.factory import create_app  # noqa: E402
from tests.helpers import environment, free_port  # noqa: E402

CHUNK_SECONDS = 0.25


# -- the clients' process ---------------------------------------------------------------


async def open_stream(gateway: str, secret: str, body: dict):
    """POST a streamed chat on a raw connection (`Connection: close`: the answer ends with
    it). httpx's client cost more CPU than the gateway it measured; this costs little."""
    host, port = gateway.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    data = json.dumps(body).encode()
    writer.write(
        (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
            f"Authorization: Bearer {secret}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
        ).encode()
        + data
    )
    await writer.drain()
    return reader, writer


async def one_stream(gateway, secret, body, delay, expected_words, results) -> None:
    await asyncio.sleep(delay)
    started = time.perf_counter()
    first = None
    text = b""
    try:
        reader, writer = await open_stream(gateway, secret, body)
        while data := await reader.read(65536):
            text += data
            if first is None and b"data:" in text:
                first = time.perf_counter() - started
        writer.close()
    except OSError as exc:
        results.append({"ok": False, "error": type(exc).__name__})
        return
    status = int(text.split(b" ", 2)[1]) if text.startswith(b"HTTP/") else 0
    words = text.count(b'"content": "') - text.count(b'"content": ""')
    whole = status == 200 and b"data: [DONE]" in text and words == expected_words
    results.append({"ok": whole, "status": status, "first": first, "words": words})


async def dropped_stream(gateway, secret, body, after) -> None:
    try:
        reader, writer = await open_stream(gateway, secret, body)
        await reader.read(1)
        await asyncio.sleep(after)
        writer.close()  # leaves
    except OSError:
        return


async def probe(client, url, every, stop, latencies, headers=None, body=None) -> None:
    while not stop.is_set():
        started = time.perf_counter()
        try:
            if body is None:
                response = await client.get(url, headers=headers)
            else:
                response = await client.post(url, json=body, headers=headers)
            if response.status_code == 200:
                latencies.append((time.perf_counter() - started) * 1000)
        except httpx.HTTPError:
            pass
        await asyncio.sleep(every)


async def drive(args) -> dict:
    headers = {"Authorization": f"Bearer {args.secret}"}
    url = f"{args.gateway}/v1/chat/completions"
    timeout = httpx.Timeout(120, connect=60)
    _, questions = locomo_corpus(0)

    def body(number: int, stream: bool) -> dict:
        question = questions[number % len(questions)]  # each chat asks its own
        messages = [{"role": "user", "content": question}]
        return {"model": "slow/m", "messages": messages, "stream": stream}

    async with httpx.AsyncClient(timeout=timeout) as prober:
        stop = asyncio.Event()
        health, chats = [], []
        probes = [
            asyncio.create_task(probe(prober, f"{args.gateway}/healthz", 0.2, stop, health)),
            asyncio.create_task(probe(prober, url, 0.5, stop, chats, headers, body(7, False))),
        ]
        started = time.perf_counter()
        if args.drop:
            streams = [
                dropped_stream(args.gateway, args.secret, body(number, True), args.drop_after)
                for number in range(args.clients)
            ]
            await asyncio.gather(*streams)
            await asyncio.sleep(1.0)  # the provider's streams should all be closed by now
            results = []
        else:
            results = []
            streams = [
                one_stream(
                    args.gateway,
                    args.secret,
                    body(number, True),
                    args.ramp * number / args.clients,
                    round(args.stream_seconds / CHUNK_SECONDS),
                    results,
                )
                for number in range(args.clients)
            ]
            await asyncio.gather(*streams)
        stop.set()
        await asyncio.gather(*probes)
    firsts = [r["first"] for r in results if r.get("first") is not None]
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "client_cpu": time.process_time() / seconds,
        "completed": sum(1 for r in results if r["ok"]),
        "statuses": sorted({str(r.get("status", r.get("error"))) for r in results}),
        "first_p50": statistics.median(firsts) if firsts else None,
        "first_p95": percentile(firsts, 0.95) if firsts else None,
        "health_p95": percentile(health, 0.95) if health else None,
        "chat_median": statistics.median(chats) if chats else None,
    }


# -- the bench's own process -------------------------------------------------------------


def start(command, env, cwd=ROOT, stdout=None) -> subprocess.Popen:
    return subprocess.Popen(command, env=env, cwd=cwd, stdout=stdout, text=True)


def stats(provider_url: str) -> dict:
    return httpx.get(f"{provider_url}/stats", timeout=5).json()


def cpu_seconds(process: psutil.Process) -> float:
    return sum(process.cpu_times()[:2])


def run_load(gateway, secret, web, provider, clients, ramp, stream_seconds=15.0, drop=False):
    """Drive one load from the clients' process, sampling the web process's CPU and RSS."""
    idle_rss = web.memory_info().rss
    cpu_before, provider_before = cpu_seconds(web), cpu_seconds(provider)
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--drive",
        "--gateway",
        gateway,
        "--secret",
        secret,
        "--clients",
        str(clients),
        "--ramp",
        str(ramp),
        "--stream-seconds",
        str(stream_seconds),
    ] + (["--drop"] if drop else [])
    started = time.monotonic()
    driver = start(command, environment(), stdout=subprocess.PIPE)
    peak = idle_rss
    while driver.poll() is None:
        peak = max(peak, web.memory_info().rss)
        time.sleep(0.25)
    wall = time.monotonic() - started
    result = json.loads(driver.stdout.read())
    result["cpu_share"] = (cpu_seconds(web) - cpu_before) / wall
    result["provider_cpu"] = (cpu_seconds(provider) - provider_before) / wall
    result["rss_peak_mb"] = peak / 2**20
    result["rss_per_stream_kb"] = (peak - idle_rss) / 1024 / clients
    return result


def serve(stack: ExitStack, folder: str, provider_url: str, cwd: Path, threads: int) -> tuple:
    port = free_port()
    settings = {
        "DATA_DIR": folder,
        "OMNIROUTE_ADMIN_TOKEN": "bench",
        "OMNIROUTE_SECRET_KEY": "bench-secret-key",
        "LOG_LEVEL": "WARNING",
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "WEB_THREADS": str(threads),
        "MAX_OPEN_STREAMS": "5000",
    }
    providers = [{"id": "slow", "baseUrl": provider_url, "models": ["m"]}]
    env = environment(**settings, OMNIROUTE_PROVIDERS=json.dumps(providers))
    web = start([sys.executable, "-m", "omniroute.serve"], env, cwd=cwd)
    stack.callback(lambda: (web.terminate(), web.wait(60)))
    gateway = f"http://127.0.0.1:{port}"
    wait_until_up(f"{gateway}/healthz")
    return gateway, psutil.Process(web.pid)


def seed(folder: str, memories: int) -> str:
    app = create_app(
        {
            "DATA_DIR": folder,
            "OMNIROUTE_ADMIN_TOKEN": "bench",
            "OMNIROUTE_SECRET_KEY": "bench-secret-key",
        }
    )
    svc = app.extensions["omniroute"]
    svc.memory_settings.update({"enabled": True, "strategy": "hybrid"})
    key, secret = svc.keys.create("bench")
    facts, _ = locomo_corpus(memories)
    seed_memories(svc, key.id, facts)
    svc.close()
    return secret


def report(model: str, clients: int, ramp: float, r: dict) -> None:
    def ms(seconds):
        return "-" if seconds is None else f"{seconds * 1000:,.0f}"

    def plain(value, form=",.1f"):
        return "-" if value is None else format(value, form)

    print(
        f"{model:<18} {clients:>6} {ramp:>5.0f} {r['completed']:>6}/{clients:<6} "
        f"{ms(r['first_p50']):>8} {ms(r['first_p95']):>8} {plain(r['health_p95']):>9} "
        f"{plain(r['chat_median']):>9} {r['cpu_share']:>5.2f} {r['rss_peak_mb']:>7.0f} "
        f"{r['rss_per_stream_kb']:>7.0f} {r['client_cpu']:>6.2f} {r['provider_cpu']:>6.2f}  "
        f"{','.join(r['statuses'])}",
        flush=True,
    )


def compare(args) -> None:
    print(
        f"concurrency: streams of {args.stream_seconds:.0f} s (a chunk every 0.25 s), SQLite, "
        f"memory on ({args.memories:,} memories in the key); clients start over the ramp"
    )
    print(
        f"{'model':<18} {'N':>6} {'ramp':>5} {'completed':>13} {'1st p50':>8} {'1st p95':>8} "
        f"{'health95':>9} {'chat p50':>9} {'cpu':>5} {'rss MB':>7} {'KB/strm':>7} "
        f"{'client':>6} {'prov.':>6}  statuses"
    )
    print(f"{'':<18} {'':>6} {'s':>5} {'':>13} {'ms':>8} {'ms':>8} {'ms':>9} {'ms':>9}")
    models = [("chat front", ROOT, args.threads, args.clients)]
    with tempfile.TemporaryDirectory() as work:
        if args.baseline:
            tree = Path(work) / "baseline"
            subprocess.run(
                ["git", "worktree", "add", "--detach", str(tree), args.baseline],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            models.append(
                (
                    f"threads={args.baseline_threads}",
                    tree,
                    args.baseline_threads,
                    args.baseline_clients,
                )
            )
        try:
            for name, cwd, threads, sizes in models:
                for clients in sizes:
                    with ExitStack() as stack, tempfile.TemporaryDirectory() as folder:
                        provider = start(
                            [
                                sys.executable,
                                str(ROOT / "bench" / "slow_provider.py"),
                                "--stream-seconds",
                                str(args.stream_seconds),
                            ],
                            environment(),
                            stdout=subprocess.PIPE,
                        )
                        stack.callback(lambda p=provider: (p.terminate(), p.wait(30)))
                        provider_url = provider.stdout.readline().strip()
                        secret = seed(folder, args.memories)
                        gateway, web = serve(stack, folder, provider_url, cwd, threads)
                        slow = (provider_url, psutil.Process(provider.pid))
                        result = run_load(
                            gateway, secret, web, slow[1], clients, args.ramp, args.stream_seconds
                        )
                        report(name, clients, args.ramp, result)
                        if clients == sizes[0]:
                            dropped(name, gateway, secret, web, slow)
        finally:
            if args.baseline:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT)


def dropped(name, gateway, secret, web, provider) -> None:
    provider_url, process = provider
    idle = run_load(gateway, secret, web, process, 1, 0, drop=True)  # /healthz nearly at rest
    before = stats(provider_url)["closed_early"]
    result = run_load(gateway, secret, web, process, 20, 0, drop=True)
    after = stats(provider_url)
    print(
        f"  {name}: 20 clients left after 1 s: provider streams still open 1 s later: "
        f"{after['open']}, closed early: {after['closed_early'] - before}; /healthz p95 "
        f"{result['health_p95']:.1f} ms meanwhile (one stream, left after 1 s: "
        f"{idle['health_p95']:.1f} ms)",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[100, 500, 1000])
    parser.add_argument("--ramp", type=float, default=10.0, help="seconds over which clients start")
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--stream-seconds", type=float, default=15.0)
    parser.add_argument("--threads", type=int, default=8, help="WEB_THREADS of the chat front")
    parser.add_argument("--baseline", help="a git ref whose web process to run beside")
    parser.add_argument("--baseline-threads", type=int, default=512)
    parser.add_argument("--baseline-clients", type=int, nargs="+", default=[100, 500])
    # The clients' own process (run by the bench itself).
    parser.add_argument("--drive", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--drop", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--drop-after", type=float, default=1.0, help=argparse.SUPPRESS)
    parser.add_argument("--gateway", help=argparse.SUPPRESS)
    parser.add_argument("--secret", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.drive:
        args.clients = args.clients[0]
        print(json.dumps(asyncio.run(drive(args))))
    else:
        compare(args)


if __name__ == "__main__":
    main()
