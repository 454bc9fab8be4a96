"""OmniRoute Memory: an OpenAI-compatible LLM gateway with persistent conversation memory.

The package imports nothing at import time: `omniroute.factory.create_app` builds the app, so
that importing a part of it (the memory core, say) loads only that part.
"""

__version__ = "0.1.0"  # pyproject.toml's, which a test keeps in step
