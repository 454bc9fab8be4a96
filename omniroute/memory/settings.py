"""The memory settings: the reference's fifteen fields plus the custom embeddings endpoint.

Normalisation follows the reference: any value that is not of the accepted kind (numeric
strings included) reads as the field's default; numbers are rounded and clamped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..settings_store import SettingsStore

STRATEGIES = ("recent", "semantic", "hybrid")
EMBEDDING_SOURCES = ("remote", "static", "transformers", "auto")
VECTOR_STORES = ("sqlite-vec", "qdrant", "auto")


def _boolean(value: Any) -> Any:
    return value if isinstance(value, bool) else None


def _number_between(low: int, high: int) -> Callable[[Any], Any]:
    def normalise(value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        if not math.isfinite(value):
            return None
        rounded = math.floor(value + 0.5)  # JavaScript's Math.round: halves round up
        return min(max(rounded, low), high)

    return normalise


def _one_of(*choices: str) -> Callable[[Any], Any]:
    return lambda value: value if isinstance(value, str) and value in choices else None


def _non_empty_string(value: Any) -> Any:
    return value if isinstance(value, str) and value.strip() else None


def _strings(value: Any) -> Any:
    if not isinstance(value, list):
        return None
    return [item for item in value if isinstance(item, str)]


def _object(value: Any) -> Any:
    return value if isinstance(value, dict) else None


@dataclass(frozen=True)
class Field:
    name: str  # as the API names it
    db_key: str  # as the settings table stores it
    default: Any
    # Returns the normalised value, or None when the value is not acceptable.
    normalise: Callable[[Any], Any]

    def read(self, stored: Mapping[str, Any]) -> Any:
        if self.db_key not in stored:
            return _copy(self.default)
        value = self.normalise(stored[self.db_key])
        return _copy(self.default) if value is None else value


def _copy(value: Any) -> Any:
    return type(value)(value) if isinstance(value, list | dict) else value


FIELDS: tuple[Field, ...] = (
    Field("enabled", "memoryEnabled", False, _boolean),
    Field("maxTokens", "memoryMaxTokens", 2000, _number_between(0, 16000)),
    Field("retentionDays", "memoryRetentionDays", 30, _number_between(1, 365)),
    Field("strategy", "memoryStrategy", "hybrid", _one_of(*STRATEGIES)),
    Field("skillsEnabled", "skillsEnabled", True, _boolean),
    Field("embeddingSource", "memoryEmbeddingSource", "auto", _one_of(*EMBEDDING_SOURCES)),
    Field("embeddingProviderModel", "memoryEmbeddingProviderModel", None, _non_empty_string),
    Field("transformersEnabled", "memoryTransformersEnabled", False, _boolean),
    Field("staticEnabled", "memoryStaticEnabled", False, _boolean),
    Field("rerankEnabled", "memoryRerankEnabled", False, _boolean),
    Field("rerankProviderModel", "memoryRerankProviderModel", None, _non_empty_string),
    Field("vectorStore", "memoryVectorStore", "auto", _one_of(*VECTOR_STORES)),
    Field("primaryBackend", "memoryPrimaryBackend", "sqlite", _non_empty_string),
    Field("fallbackBackends", "memoryFallbackBackends", [], _strings),
    Field("backendConfigs", "memoryBackendConfigs", {}, _object),
    Field("customBaseUrl", "memoryCustomBaseUrl", None, _non_empty_string),
    Field("customModelId", "memoryCustomModelId", None, _non_empty_string),
)
FIELDS_BY_NAME = {field.name: field for field in FIELDS}


def normalise(stored: Mapping[str, Any]) -> dict[str, Any]:
    """Map stored values (by DB key) to the normalised settings (by API name)."""
    return {field.name: field.read(stored) for field in FIELDS}


class MemorySettings:
    def __init__(self, store: SettingsStore) -> None:
        self.store = store

    def get(self) -> dict[str, Any]:
        return normalise(self.store.all())

    def update(self, changes: Mapping[str, Any]) -> dict[str, Any]:
        """Store the given fields (by API name), normalised; return all settings."""
        to_store = {}
        for name, value in changes.items():
            field = FIELDS_BY_NAME[name]
            normalised = field.normalise(value)
            to_store[field.db_key] = field.default if normalised is None else normalised
        self.store.put(to_store)
        return self.get()
