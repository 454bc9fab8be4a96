"""The environment settings of the Qdrant tier (config.py adds them to its registry), and the
bounds of those the settings API takes as well. Stored Qdrant settings win over them."""

from __future__ import annotations

from omniroute.core.config.values import Setting, int_range, optional, port, positive_int

VECTOR_SIZES = range(1, 65_537)  # Qdrant's own upper bound on a vector's size
HNSW_EF_CONSTRUCTS = range(4, 4_097)  # Qdrant refuses an ef_construct below 4
DEFAULT_HNSW_EF_CONSTRUCT = 128  # the reference's default (Qdrant's own is 100)

QDRANT_SETTINGS: tuple[Setting, ...] = (
    Setting(
        "QDRANT_URL",
        None,
        "A Qdrant server's URL (`https://...:6333`), standing for `QDRANT_HOST` and "
        "`QDRANT_PORT`. The Qdrant settings (`/api/settings/qdrant`) win over every `QDRANT_*`.",
        optional,
    ),
    Setting(
        "QDRANT_HOST",
        None,
        "A Qdrant server's host (`http://` is added without a scheme).",
        optional,
    ),
    Setting(
        "QDRANT_PORT",
        None,
        "The Qdrant server's port when the host has none.",
        port,
        default_doc="`6333`",
    ),
    Setting(
        "QDRANT_API_KEY",
        None,
        "Sent as the `api-key` header to the Qdrant server.",
        optional,
    ),
    Setting(
        "QDRANT_COLLECTION",
        None,
        "Base name of the Qdrant collections; each embedding model gets its own, named after it.",
        optional,
        default_doc="`omniroute_memory`",
    ),
    Setting(
        "QDRANT_EMBEDDING_MODEL",
        None,
        "A provider's embedding model (`provider/model`) "
        "for the Qdrant vectors. Unset: the memory's own embedding source.",
        optional,
    ),
    Setting(
        "QDRANT_VECTOR_SIZE",
        None,
        "The size of Qdrant's vectors. Unset: the embedding model's own. Set: a provider's "
        "model is asked for vectors of that size (OpenAI's `dimensions`: text-embedding-3 "
        "shortens its vectors); a model that cannot shorten is refused, naming the setting.",
        int_range(VECTOR_SIZES.start, VECTOR_SIZES.stop - 1),
    ),
    Setting(
        "QDRANT_HNSW_EF_CONSTRUCT",
        None,
        "The HNSW index's `ef_construct` for Qdrant's collections: higher builds a better "
        "graph, slower. A collection made with another value is changed to this one.",
        int_range(HNSW_EF_CONSTRUCTS.start, HNSW_EF_CONSTRUCTS.stop - 1),
        default_doc=f"`{DEFAULT_HNSW_EF_CONSTRUCT}`",
    ),
    Setting(
        "QDRANT_PATH",
        None,
        "qdrant-client's local mode: a folder (or `:memory:`) instead of a server, for one "
        "machine and for tests. One process at a time may open it, so Qdrant's jobs then run "
        "in the web process and a separate worker refuses to start.",
        optional,
    ),
    Setting(
        "QDRANT_TIMEOUT_MS",
        300,
        "Longest a retrieval waits for Qdrant before it falls "
        "back to the local vector index (writes wait up to 10 s).",
        positive_int,
    ),
    Setting(
        "QDRANT_RETRY_SECONDS",
        30,
        "After Qdrant fails a retrieval, how long retrievals "
        "skip it (falling back at once) before trying it again.",
        positive_int,
    ),
)
