"""Ingestion at scale: N memories imported and searchable, vectors included (static source), by
the one documented command, `flask --app app memory import FILE --api-key-id KEY`.

The file holds LoCoMo development turns recombined in pairs, one JSON object a line; the data
dir is new, memory is on with the static source. Printed: the command's wall time, memories a
second, its peak RSS, and what a search finds afterwards (keyword and vector counts).
Run with `python bench/ingestion.py --memories 100000 [--store postgresql]` (issue 29's
target: 1M in 15 minutes on each store).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.retrieval_quality import DEVELOPMENT, LOCOMO, embedder_for, turns_of  # noqa: E402
from bench.stores import STORES, database_url  # noqa: E402
from omniroute.memory.embedding.static_model import default_static_path  # noqa: E402


def write_file(path: Path, count: int, seed: int = 3) -> None:
    data = {c["sample_id"]: c for c in json.loads(LOCOMO.read_text())}
    turns = [text for name in DEVELOPMENT for _, text in turns_of(data[name])]
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        for number in range(count):
            content = f"{rng.choice(turns)} {rng.choice(turns)}"
            out.write(json.dumps({"key": f"m{number}", "content": content}) + "\n")


def prepare(env: dict[str, str]) -> str:
    """The database migrated, memory on with the static source, and a key; the key's id."""
    release = [sys.executable, "-m", "flask", "--app", "app", "db", "upgrade"]
    subprocess.run(release, env=env, cwd=ROOT, capture_output=True, check=True)
    script = (
        "from omniroute.factory import create_app\n"
        "svc = create_app().extensions['omniroute']\n"
        "svc.memory_settings.update({'enabled': True, 'staticEnabled': True,"
        " 'embeddingSource': 'static'})\n"
        "print(svc.keys.create('bulk')[0].id)\n"
        "svc.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True
    )
    done.check_returncode()
    return done.stdout.strip().splitlines()[-1]


def peak_rss(process: subprocess.Popen) -> tuple[int, float]:
    """Wait for the process; its exit code and its peak RSS in MB (sampled each 0.5 s)."""
    watched, peak = psutil.Process(process.pid), 0
    while process.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.5)
    return process.wait(), peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--store", choices=STORES, default="sqlite")
    parser.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "omniroute-bench"))
    args = parser.parse_args()
    embedder_for("static", args.cache)  # the static model, built once
    with tempfile.TemporaryDirectory() as folder, database_url(args.store, folder) as url:
        source = Path(folder) / "memories.jsonl"
        write_file(source, args.memories)
        env = {
            **os.environ,
            "DATA_DIR": str(Path(folder) / "data"),
            "MEMORY_STATIC_MODEL": str(default_static_path(args.cache)),
            "OMNIROUTE_ADMIN_TOKEN": "bench-admin-token",
            "LOG_FORMAT": "plain",
            "DATABASE_URL": url,
        }
        env.pop("REDIS_URL", None)
        key = prepare(env)
        started = time.monotonic()
        command = [sys.executable, "-m", "flask", "--app", "app", "memory", "import"]
        log = Path(folder) / "import.log"
        with log.open("w") as progress:
            process = subprocess.Popen(
                [*command, str(source), "--api-key-id", key], env=env, cwd=ROOT, stderr=progress
            )
            code, peak = peak_rss(process)
        seconds = time.monotonic() - started
        last = [line for line in log.read_text().splitlines() if line.strip()][-3:]
        print(
            f"{args.store}: {args.memories:,} memories imported and embedded in {seconds:.0f} s"
            f" ({args.memories / seconds:,.0f} a second), exit {code}, peak RSS {peak:.0f} MB"
        )
        print("  " + "\n  ".join(last))


if __name__ == "__main__":
    main()
