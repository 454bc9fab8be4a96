# `make run` serves the gateway; `make test` runs the test suite. Both install first when needed.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install run test bench fuzz lint format services settings-table

install: $(STAMP)

# Reinstalls only when a requirements file is newer than the last install.
$(STAMP): requirements.txt requirements-models.txt requirements-dev.txt requirements-mem0.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --quiet --disable-pip-version-check -r requirements-dev.txt
	$(BIN)/python -m pip install --quiet --quiet --disable-pip-version-check --no-deps -r requirements-mem0.txt
	@touch $@

run: install
	$(BIN)/flask --app app db upgrade
	$(BIN)/python -m omniroute.serve

# Three pytest-xdist workers, each taking whole files (a module's fixtures and its processes
# stay together): most of the suite's time is spent waiting on processes, so three overlap
# well on two cores (docs/benchmarks.md#the-test-suite has the figures).
test: install services
	$(BIN)/python -m pytest -n 3 --dist loadfile

services:
	@scripts/ensure-services

# Each store's figures side by side: SQLite, then PostgreSQL (pgserver's, with pgvector, or
# BENCH_POSTGRES_URL's).
bench: install
	$(BIN)/python bench/store_latency.py --store sqlite
	$(BIN)/python bench/store_latency.py --store postgresql
	$(BIN)/python bench/studio_pages.py
	$(BIN)/python bench/retrieval_quality.py
	$(BIN)/python bench/multilingual_quality.py
	$(BIN)/python bench/embedding_speed.py
	$(BIN)/python bench/retrieval_latency.py --store sqlite
	$(BIN)/python bench/retrieval_latency.py --store postgresql --sizes 10000 100000
	$(BIN)/python bench/pgvector_writes.py
	$(BIN)/python bench/preview_latency.py
	$(BIN)/python bench/qdrant_tier.py
	$(BIN)/python bench/sweep.py --store sqlite
	$(BIN)/python bench/sweep.py --store postgresql --memories 30000
	$(BIN)/python bench/proxy_overhead.py --corpus locomo --store sqlite
	$(BIN)/python bench/proxy_overhead.py --corpus locomo --store postgresql
	$(BIN)/python bench/proxy_overhead.py --corpus synthetic
	$(BIN)/python bench/proxy_overhead.py --corpus locomo --no-memory
	$(BIN)/python bench/token_count.py
	$(BIN)/python bench/concurrency.py --clients 100 500 1000 2000 --baseline 13c81e4
	$(BIN)/python bench/footprint.py --slim
	$(BIN)/python bench/app_start.py
	$(BIN)/python bench/ann_candidates.py --sizes 20000 50000 100000 1000000 --m 32 --ef-construction 256 --ef 256 512 1024
	$(BIN)/python bench/keyword_candidates.py --sizes 10000 100000 1000000
	$(BIN)/python bench/ingestion.py --memories 1000000
	$(BIN)/python bench/ingestion.py --memories 1000000 --store postgresql

# schemathesis, every check, over /api and /v1 of a served app (scripts/fuzz.py says how).
fuzz: install
	$(BIN)/python scripts/fuzz.py

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Prints the two settings tables of docs/configuration.md and docs/api.md from their registries (environment, then memory).
settings-table: install
	@$(BIN)/python -c 'from omniroute.core.config import markdown_table; print(markdown_table())'
	@echo
	@$(BIN)/python -c 'from omniroute.memory.settings import markdown_table; print(markdown_table())'
