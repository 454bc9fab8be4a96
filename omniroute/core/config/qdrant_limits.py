"""The bounds of the Qdrant settings both the environment and the settings API take."""

VECTOR_SIZES = range(1, 65_537)  # Qdrant's own upper bound on a vector's size
HNSW_EF_CONSTRUCTS = range(4, 4_097)  # Qdrant refuses an ef_construct below 4
DEFAULT_HNSW_EF_CONSTRUCT = 128  # the reference's default (Qdrant's own is 100)
