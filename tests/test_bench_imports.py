"""Every benchmark still imports, and `make bench` runs each: it runs rarely, and a rename in
the package (a function moved, a settings reader changed) must fail here, not on the day of
a bench."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(path.stem for path in (ROOT / "bench").glob("*.py") if path.stem != "__init__")
# Helpers the benches share, and a provider that proxy_overhead starts: no bench of their own.
HELPERS = {"stores", "slow_provider"}


@pytest.mark.parametrize("name", MODULES)
def test_a_bench_imports(name):
    module = importlib.import_module(f"bench.{name}")
    if name not in HELPERS:
        assert callable(getattr(module, "main", None)), f"bench/{name}.py has no main()"


def test_make_bench_runs_every_bench():
    run = set(re.findall(r"bench/(\w+)\.py", (ROOT / "Makefile").read_text()))
    assert run == set(MODULES) - HELPERS
