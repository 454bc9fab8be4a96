"""The Qdrant settings: stored ones first, then the QDRANT_* environment, then defaults.

As the reference (section 7): the host gets `http://` when it has no scheme and the port when
it has none; `QDRANT_URL` (a whole URL, as hosted Qdrant gives it) stands for host and port.
Unlike it: the API key is sealed at rest and only its last four characters are shown, the URL
passes the outbound URL guard, and the embedding model defaults to the memory's own embedder
(its vectors are then the local index's, embedded once). `QDRANT_PATH` selects qdrant-client's
local mode, a folder on disk that one process at a time may open: for one machine and tests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from omniroute.core.config.qdrant import (
    DEFAULT_HNSW_EF_CONSTRUCT,
    HNSW_EF_CONSTRUCTS,
    VECTOR_SIZES,
)
from omniroute.core.db.settings_store import SettingsStore
from omniroute.core.sealed import SecretBox

QUANTIZATIONS = ("none", "int8", "binary")
DEFAULT_COLLECTION = "omniroute_memory"
DEFAULT_PORT = 6333
PORTS = range(1, 65_536)
# Collection names: what Qdrant accepts in a URL path segment without surprises.
COLLECTION_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,100}$")

# DB keys, as the reference names them.
ENABLED, HOST, PORT, API_KEY = "qdrantEnabled", "qdrantHost", "qdrantPort", "qdrantApiKey"
COLLECTION, EMBEDDING_MODEL = "qdrantCollection", "qdrantEmbeddingModel"
QUANTIZATION = "qdrantQuantization"
VECTOR_SIZE, HNSW_EF_CONSTRUCT = "qdrantVectorSize", "qdrantHnswEfConstruct"
VECTOR_STORE = "memoryVectorStore"


@dataclass(frozen=True)
class QdrantConfig:
    enabled: bool
    url: str | None  # the server's base URL, or None (local mode, or nothing configured)
    path: str | None  # local mode's folder (QDRANT_PATH), or ":memory:"
    api_key: str | None
    collection: str  # the base name; each embedding signature gets its own collection
    embedding_model: str | None  # `provider/model`, or None: the memory's embedder
    quantization: str
    host: str  # as configured (shown by GET), "" when none
    port: int
    vector_size: int | None = None  # None: the embedder's own dimension
    hnsw_ef_construct: int = DEFAULT_HNSW_EF_CONSTRUCT

    @property
    def mode(self) -> str:
        return "local" if self.path else "server"

    @property
    def configured(self) -> bool:
        return bool(self.path or self.url)

    @property
    def where(self) -> str:
        """Where Qdrant is, for reports (never the key)."""
        if self.path:
            return f"local mode at {self.path}"
        return self.url or "nowhere (no host)"


def server_url(host: str, port: int) -> str | None:
    """The reference's rule: add `http://` without a scheme, and the port without one."""
    host = host.strip()
    if not host:
        return None
    url = host if "://" in host else f"http://{host}"
    try:
        parts = urlsplit(url)
        has_port = parts.port is not None
    except ValueError:  # "http://[0]", a port past 65535
        return url.rstrip("/")  # the URL guard names what is wrong with it
    if not has_port and parts.hostname:
        netloc = parts.netloc + f":{port}"
        url = parts._replace(netloc=netloc).geturl()
    return url.rstrip("/")


class QdrantSettings:
    """Reads and writes the Qdrant settings; `env` is the app's config (QDRANT_*)."""

    def __init__(self, store: SettingsStore, box: SecretBox, env: Mapping[str, Any]) -> None:
        self._store = store
        self._box = box
        self._env = env

    def enabled(self) -> bool:
        """Whether Qdrant is on: the check every memory write and retrieval makes, so it reads
        the one setting (no key to unseal, no URL to build)."""
        return self._store.all().get(ENABLED) is True

    @property
    def local_mode(self) -> bool:
        """Local mode (QDRANT_PATH): only this process may open the folder, so Qdrant's jobs
        run here whatever the queue."""
        return bool(self._env.get("QDRANT_PATH"))

    def get(self) -> QdrantConfig:
        stored = self._store.all()
        env = self._env
        env_host, env_port = env.get("QDRANT_HOST") or "", env.get("QDRANT_PORT") or DEFAULT_PORT
        if env.get("QDRANT_URL") and not env.get("QDRANT_HOST"):
            env_host = env["QDRANT_URL"]
        host = _text(stored.get(HOST)) or env_host
        port = _within(stored.get(PORT), PORTS) or env_port
        sealed = stored.get(API_KEY)
        api_key = self._box.open(sealed) if _text(sealed) else None
        if not api_key and (host, port) == (env_host, env_port):
            api_key = env.get("QDRANT_API_KEY")  # the environment's key, for its own server only
        quantization = stored.get(QUANTIZATION)
        return QdrantConfig(
            enabled=stored.get(ENABLED) is True,
            url=None if env.get("QDRANT_PATH") else server_url(host, port),
            path=env.get("QDRANT_PATH"),
            api_key=api_key or None,
            collection=_collection(stored.get(COLLECTION))
            or _collection(env.get("QDRANT_COLLECTION"))
            or DEFAULT_COLLECTION,
            embedding_model=_text(stored.get(EMBEDDING_MODEL)) or env.get("QDRANT_EMBEDDING_MODEL"),
            quantization=quantization if quantization in QUANTIZATIONS else "none",
            host=host,
            port=port,
            vector_size=_within(stored.get(VECTOR_SIZE), VECTOR_SIZES)
            or env.get("QDRANT_VECTOR_SIZE"),
            hnsw_ef_construct=_within(stored.get(HNSW_EF_CONSTRUCT), HNSW_EF_CONSTRUCTS)
            or env.get("QDRANT_HNSW_EF_CONSTRUCT")
            or DEFAULT_HNSW_EF_CONSTRUCT,
        )

    def update(self, changes: Mapping[str, Any]) -> QdrantConfig:
        """Store the given API fields; `apiKey` "" removes the key, `enabled` also sets which
        vector store retrieval uses (qdrant when on, auto when off: reference #5597)."""
        names = {
            "host": HOST,
            "port": PORT,
            "collection": COLLECTION,
            "embeddingModel": EMBEDDING_MODEL,
            "quantization": QUANTIZATION,
            "vectorSize": VECTOR_SIZE,
            "hnswEfConstruct": HNSW_EF_CONSTRUCT,
        }
        values: dict[str, Any] = {names[name]: changes[name] for name in names if name in changes}
        if "apiKey" in changes:
            values[API_KEY] = self._box.seal(changes["apiKey"]) if changes["apiKey"] else None
        if "enabled" in changes:
            values[ENABLED] = changes["enabled"]
            values[VECTOR_STORE] = "qdrant" if changes["enabled"] else "auto"
        self._store.put(values)
        return self.get()

    def preview(self, changes: Mapping[str, Any]) -> QdrantConfig:
        """The configuration these changes would give, without storing them."""
        current = self.get()
        host = changes.get("host", current.host)
        port = changes.get("port", current.port)
        api_key = (changes["apiKey"] or None) if "apiKey" in changes else current.api_key
        return QdrantConfig(
            enabled=changes.get("enabled", current.enabled),
            url=None if current.path else server_url(host, port),
            path=current.path,
            api_key=api_key,
            collection=changes.get("collection", current.collection),
            embedding_model=changes.get("embeddingModel", current.embedding_model) or None,
            quantization=changes.get("quantization", current.quantization),
            host=host,
            port=port,
            vector_size=changes["vectorSize"] if "vectorSize" in changes else current.vector_size,
            hnsw_ef_construct=changes.get("hnswEfConstruct") or current.hnsw_ef_construct,
        )


def _text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _within(value: Any, allowed: range) -> int | None:
    """A stored whole number in `allowed`, or None (anything else reads as not set)."""
    if isinstance(value, int) and not isinstance(value, bool) and value in allowed:
        return value
    return None


def _collection(value: Any) -> str | None:
    return value if isinstance(value, str) and COLLECTION_PATTERN.match(value) else None
