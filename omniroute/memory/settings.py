"""The memory settings: one registry that the REST schemas, the studio and docs/api.md use,
and the frozen MemoryConfig built from it, which every reader takes (attributes a type
checker and a reader can follow: `config.max_tokens`, not `settings["maxTokens"]`).

The reference's fields (less `skillsEnabled`: there are no skills here) plus the custom
embeddings endpoint. Normalisation follows the reference: any stored or given value that is
not of the accepted kind (numeric strings included) reads as the field's default; numbers are
rounded and clamped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from omniroute.core.db.settings_store import SettingsStore

EMBEDDING_SOURCES = ("remote", "static", "transformers", "multilingual", "auto")
CHAT_STRATEGIES = ("recent", "semantic", "hybrid")  # how a chat retrieves (search.retrieval)
VECTOR_STORES = ("sqlite-vec", "qdrant", "auto")
# What a chat sees of its key: docs/scopes.md.
SCOPE_CHOICES = ("apiKey", "session", "user")

# The kinds of value a setting takes.
BOOLEAN = "boolean"
INTEGER = "integer"  # any finite number, rounded half up and clamped to [low, high]
CHOICE = "choice"
TEXT = "text"  # a non-blank string
URL = "url"  # a non-blank string that the outbound URL guard accepts (checked by the API)
STRINGS = "strings"  # a list; items that are not strings are dropped
OBJECT = "object"


@dataclass(frozen=True)
class Setting:
    name: str  # as the API names it
    db_key: str  # as the settings table stores it
    default: Any
    kind: str
    help: str
    low: int | None = None
    high: int | None = None
    choices: tuple[str, ...] = ()
    nullable: bool = False  # whether null is a value (it clears the setting)

    @property
    def attr(self) -> str:
        """Its MemoryConfig attribute: the name in snake case."""
        return re.sub(r"(?<!^)(?=[A-Z])", "_", self.name).lower()

    def normalise(self, value: Any) -> Any:
        """The value as stored and served, or None when it is not of this setting's kind."""
        if self.kind == BOOLEAN:
            return value if isinstance(value, bool) else None
        if self.kind == INTEGER:
            if isinstance(value, bool) or not isinstance(value, int | float):
                return None
            if isinstance(value, float):  # an int is whole and finite, however long
                if not math.isfinite(value):
                    return None
                value = math.floor(value + 0.5)  # JavaScript's Math.round: halves round up
            return min(max(value, self.low), self.high)
        if self.kind == CHOICE:
            return value if isinstance(value, str) and value in self.choices else None
        if self.kind in (TEXT, URL):
            return value if isinstance(value, str) and value.strip() else None
        if self.kind == STRINGS:
            return (
                [item for item in value if isinstance(item, str)]
                if isinstance(value, list)
                else None
            )
        if self.kind == OBJECT:
            return value if isinstance(value, dict) else None
        raise ValueError(f"unknown setting kind {self.kind!r}")

    def read(self, stored: Mapping[str, Any]) -> Any:
        if self.db_key not in stored:
            return _copy(self.default)
        value = self.normalise(stored[self.db_key])
        return _copy(self.default) if value is None else value

    def accepted(self) -> str:
        """What the setting accepts, in words (the docs' column)."""
        if self.kind == INTEGER:
            return f"number, rounded, clamped to {self.low}..{self.high}"
        if self.kind == CHOICE:
            return ", ".join(f"`{choice}`" for choice in self.choices)
        words = {
            BOOLEAN: "boolean",
            TEXT: "non-empty string",
            URL: "http(s) URL (checked by the outbound URL guard)",
            STRINGS: "list of strings",
            OBJECT: "JSON object",
        }[self.kind]
        return f"{words} or `null`" if self.nullable else words


def _copy(value: Any) -> Any:
    return type(value)(value) if isinstance(value, list | dict) else value


SETTINGS: tuple[Setting, ...] = (
    Setting("enabled", "memoryEnabled", False, BOOLEAN,
            "Retrieve, inject and extract memories in gateway requests."),
    Setting("maxTokens", "memoryMaxTokens", 2000, INTEGER,
            "The injection budget of one request, in tokens (0 injects nothing); a request "
            "injects at most 8000 whatever it says, as the reference does.",
            low=0, high=16000),
    Setting("retentionDays", "memoryRetentionDays", 30, INTEGER,
            "Memories older than this many days are not injected.", low=1, high=365),
    Setting("retentionSweep", "memoryRetentionSweep", False, BOOLEAN,
            "The retention sweep deletes memories older than retentionDays that were not "
            "injected since (off: they stay stored, only never injected)."),
    Setting("autoSummarize", "memoryAutoSummarize", False, BOOLEAN,
            "The summarise job folds each key's memories older than autoSummarizeDays into "
            "one summary memory (originals kept in history)."),
    Setting("autoSummarizeDays", "memoryAutoSummarizeDays", 30, INTEGER,
            "The age, in days, at which autoSummarize folds a memory into its key's summary.",
            low=1, high=365),
    Setting("summarizeBudgetTokens", "memorySummarizeBudgetTokens", 0, INTEGER,
            "With autoSummarize, a key whose memories hold more tokens than this has its "
            "oldest compacted to their first sentences until they fit (0: no budget).",
            low=0, high=1_000_000),
    Setting("summarizeProviderModel", "memorySummarizeProviderModel", None, TEXT,
            "A provider's chat model, `provider/model`, that writes summaries (null: the "
            "extractive first-sentences rule; it is also the fallback on any failure).",
            nullable=True),
    Setting("strategy", "memoryStrategy", "hybrid", CHOICE,
            "How chat requests retrieve: newest first, by meaning, or keywords and meaning.",
            choices=CHAT_STRATEGIES),
    Setting("scope", "memoryScope", "apiKey", CHOICE,
            "What a chat's retrieval sees of its key (docs/scopes.md): `apiKey`, the key's "
            "shared memories and the named end user's own; `session`, of those only the "
            "request's session's and those of no session; `user`, as apiKey but a request "
            "that names no end user gets no memory and leaves none.", choices=SCOPE_CHOICES),
    Setting("globalBudgetPercent", "memoryGlobalBudgetPercent", 25, INTEGER,
            "The share of a chat's budget that global memories (of no key, written by the "
            "admin) may take, in percent; 0 injects none.", low=0, high=100),
    Setting("embeddingSource", "memoryEmbeddingSource", "auto", CHOICE,
            "Where vectors come from; `auto` takes the first available of remote (the "
            "embeddingProviderModel), the first provider with an API key and an embedding "
            "model, multilingual, static, transformers.", choices=EMBEDDING_SOURCES),
    Setting("embeddingProviderModel", "memoryEmbeddingProviderModel", None, TEXT,
            "A provider's embedding model, `provider/model`.", nullable=True),
    Setting("transformersEnabled", "memoryTransformersEnabled", False, BOOLEAN,
            "Allow the packaged all-MiniLM-L6-v2 (384 dimensions) as a source."),
    Setting("staticEnabled", "memoryStaticEnabled", False, BOOLEAN,
            "Allow the static model2vec model (built offline the first time) as a source."),
    Setting("multilingualEnabled", "memoryMultilingualEnabled", False, BOOLEAN,
            "Allow multilingual-e5-small (4-bit, 384 dimensions, packaged; English, Dutch, "
            "German and about 100 more languages) as a source: the one for a team that "
            "writes in more than English."),
    Setting("rerankEnabled", "memoryRerankEnabled", False, BOOLEAN,
            "Reorder retrieved memories with the rerank model."),
    Setting("rerankProviderModel", "memoryRerankProviderModel", None, TEXT,
            "The rerank model, `provider/model` (POST {baseUrl}/rerank).", nullable=True),
    Setting("vectorStore", "memoryVectorStore", "auto", CHOICE,
            "Where retrieval's vector side comes from: `qdrant` asks Qdrant first (enabling "
            "Qdrant sets it), otherwise the local index (sqlite-vec or pgvector).",
            choices=VECTOR_STORES),
    Setting("primaryBackend", "memoryPrimaryBackend", "sqlite", TEXT,
            "The memory backend that serves chats (their retrieval and extracted facts), "
            "/api/memory, the studio's list and the MCP tools: `sqlite` (the local store, "
            "whichever database) or an id of backendConfigs; checked on PUT."),
    Setting("fallbackBackends", "memoryFallbackBackends", [], STRINGS,
            "Backends asked, in order, when the primary's search fails or its get finds "
            "nothing, and sent its updates and deletes in the background (ids as for "
            "primaryBackend)."),
    Setting("backendConfigs", "memoryBackendConfigs", {}, OBJECT,
            "Remote backends by id (letters, digits, '.', '_', '-'): a generic HTTP one "
            "{baseUrl, apiKey (sealed; shown masked), headers, timeout (ms), endpoints, "
            "queryParams, pathParams, backendType (what the service is, e.g. `mem0`: logs "
            "and the backend list name it beside the id; default `generic`)}, or `type` "
            "`obsidian` {baseUrl, apiKey, folder} or "
            "`notion` {apiKey, databaseId, baseUrl}; listed with their health at "
            "GET /api/memory/backends."),
    Setting("customBaseUrl", "memoryCustomBaseUrl", None, URL,
            "A memory-only OpenAI-compatible /embeddings endpoint.", nullable=True),
    Setting("customModelId", "memoryCustomModelId", None, TEXT,
            "The model to ask that endpoint for.", nullable=True),
)  # fmt: skip
BY_NAME = {setting.name: setting for setting in SETTINGS}
# The largest budget a request may spend on memories: the maxTokens setting's upper bound.
# What one request injects at most, whatever the setting says (the setting may be up to
# 16000, as the specification's range; the reference clamps each request to 8000).
MAX_BUDGET_TOKENS = 8000


@dataclass(frozen=True)
class MemoryConfig:
    """The memory settings as they are now, one attribute per registry entry (in its order,
    named in snake case: a test keeps the two in step). Lists are tuples and objects
    read-only, so a reader cannot change what another reads."""

    enabled: bool
    max_tokens: int
    retention_days: int
    retention_sweep: bool
    auto_summarize: bool
    auto_summarize_days: int
    summarize_budget_tokens: int
    summarize_provider_model: str | None
    strategy: str
    scope: str
    global_budget_percent: int
    embedding_source: str
    embedding_provider_model: str | None
    transformers_enabled: bool
    static_enabled: bool
    multilingual_enabled: bool
    rerank_enabled: bool
    rerank_provider_model: str | None
    vector_store: str
    primary_backend: str
    fallback_backends: tuple[str, ...]
    backend_configs: Mapping[str, Any]
    custom_base_url: str | None
    custom_model_id: str | None

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any]) -> MemoryConfig:
        """The config of stored values (by DB key), each normalised or its default."""
        return cls.of({setting.name: setting.read(stored) for setting in SETTINGS})

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> MemoryConfig:
        """The config of values by API name (every setting's default for those left out)."""
        read = {s.attr: values.get(s.name, _copy(s.default)) for s in SETTINGS}
        read["fallback_backends"] = tuple(read["fallback_backends"])
        read["backend_configs"] = MappingProxyType(dict(read["backend_configs"]))
        return cls(**read)

    def as_api(self) -> dict[str, Any]:
        """The settings by API name, as the REST API shows them (JSON values)."""
        shown = {s.name: getattr(self, s.attr) for s in SETTINGS}
        shown["fallbackBackends"] = list(self.fallback_backends)
        shown["backendConfigs"] = dict(self.backend_configs)
        return shown


def markdown_table() -> str:
    """docs/api.md's table of memory settings."""
    lines = ["| Field | Default | Accepted | What it does |", "|---|---|---|---|"]
    for setting in SETTINGS:
        default = _markdown_value(setting.default)
        lines.append(f"| `{setting.name}` | {default} | {setting.accepted()} | {setting.help} |")
    return "\n".join(lines)


def _markdown_value(value: Any) -> str:
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, list | dict):
        return f"`{value!r}`".replace("'", '"')
    return f"`{value}`"


class MemorySettings:
    def __init__(self, store: SettingsStore) -> None:
        self.store = store

    def get(self) -> MemoryConfig:
        return MemoryConfig.from_stored(self.store.all())

    def update(self, changes: Mapping[str, Any]) -> MemoryConfig:
        """Store the given fields (by API name), normalised; return all settings."""
        to_store = {}
        for name, value in changes.items():
            setting = BY_NAME[name]
            normalised = setting.normalise(value)
            to_store[setting.db_key] = setting.default if normalised is None else normalised
        self.store.put(to_store)
        return self.get()
