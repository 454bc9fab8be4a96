"""The install's size and the static model's build time, with the machine they were measured on.

    python bench/footprint.py            # the static model's build, in this venv
    python bench/footprint.py --slim     # also a fresh venv of requirements.txt alone (minutes)

The docs quote what this prints (docs/deployment.md, docs/retrieval.md); run it again on your
machine rather than trusting a figure from another.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def machine() -> str:
    model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )  # fmt: skip
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    return f"{os.cpu_count()} cores ({model}), load {load}, Python {platform.python_version()}"


def megabytes(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 1e6


def static_build_seconds() -> float:
    from omniroute.memory.embedding.static_model import build_default_static

    with tempfile.TemporaryDirectory() as data_dir:
        started = time.perf_counter()
        build_default_static(data_dir)
        return time.perf_counter() - started


def slim_install_mb() -> float:
    with tempfile.TemporaryDirectory() as folder:
        venv = Path(folder) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run(
            [str(venv / "bin/python"), "-m", "pip", "install", "--quiet", "--quiet",
             "--disable-pip-version-check", "-r", str(ROOT / "requirements.txt")],
            check=True,
        )  # fmt: skip
        (site,) = (venv / "lib").glob("python*/site-packages")
        return megabytes(site)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slim", action="store_true", help="also measure the slim install")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    print(f"static model build: {static_build_seconds():.1f} s")
    (site,) = (ROOT / ".venv/lib").glob("python*/site-packages")
    print(f"full install (.venv site-packages): {megabytes(site):.0f} MB")
    if args.slim:
        print(
            f"slim install (requirements.txt, fresh venv site-packages): {slim_install_mb():.0f} MB"
        )


if __name__ == "__main__":
    main()
