"""The studio's pages and the export/import behind them, on a store of N memories.

Each figure is one request through Flask (test client, no network): the server's own cost of
rendering a page or streaming an export. Run with `make bench` or
`python bench/studio_pages.py --memories 10000 --repeat 50`.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.store_latency import measure, populate  # noqa: E402
from omniroute.factory import create_app  # noqa: E402

TOKEN = "bench-admin-token"


def logged_in(app):
    client = app.test_client()
    login = client.get("/dashboard/login").text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', login).group(1)
    client.post("/dashboard/login", data={"token": TOKEN, "csrf_token": csrf})
    page = client.get("/dashboard/memory").text
    client.csrf = re.search(r'name="csrf-token" content="([^"]+)"', page).group(1)
    return client


def fetch(client, path: str):
    def run() -> None:
        with client.get(path) as response:
            assert response.status_code == 200, path
            response.get_data()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        app = create_app({"DATA_DIR": folder, "OMNIROUTE_ADMIN_TOKEN": TOKEN, "LOG_LEVEL": "ERROR"})
        svc = app.extensions["omniroute"]
        key, _ = svc.keys.create("bench")
        populate(svc.memories, key.id, args.memories, random.Random(7))
        client = logged_in(app)
        last_page = (args.memories + 19) // 20
        pages = {
            "memories tab, page 1": "/dashboard/memory",
            f"memories tab, page {last_page}": f"/dashboard/memory?page={last_page}",
            "memories tab, search q=": "/dashboard/memory?q=coffee%20tea",
            "playground, keyword query": "/dashboard/memory?tab=playground&strategy=keyword"
            f"&apiKeyId={key.id}&query=where+did+I+go+hiking",
            "engine tab": "/dashboard/memory?tab=engine",
            "keys page": "/dashboard/keys",
        }
        print(f"studio, {args.memories:,} memories in one key, {args.repeat} requests each")
        print(f"{'page':<36} {'median ms':>10} {'p95 ms':>10}")
        for name, path in pages.items():
            median, p95 = measure(fetch(client, path), args.repeat)
            print(f"{name:<36} {median:>10.2f} {p95:>10.2f}")

        started = time.perf_counter()
        with client.get("/api/memory/export") as response:
            exported = response.get_data()
        export_s = time.perf_counter() - started
        items = json.loads(exported)["memories"]
        started = time.perf_counter()
        for start in range(0, len(items), 1000):  # as the studio sends a big file
            answer = client.post(
                "/api/memory/import",
                json={"memories": items[start : start + 1000]},
                headers={"X-CSRF-Token": client.csrf},
            )
            assert answer.status_code == 200 and answer.json["failed"] == 0
        import_s = time.perf_counter() - started
        print(f"export of all {len(items):,}: {export_s:.2f} s, {len(exported) / 1e6:.1f} MB")
        print(f"import of all {len(items):,} (each an update): {import_s:.2f} s")
        svc.close()


if __name__ == "__main__":
    main()
