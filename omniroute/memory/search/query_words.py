"""The topic words of a user's query: what keyword search looks for, in any script.

Only word characters survive, so no query can carry search syntax into either store's
engine (FTS5 MATCH, PostgreSQL's tsquery); stop words ("what", "is", "my") are left out.
"""

from __future__ import annotations

import re

from omniroute.memory.search.stopwords import STOP_WORDS

MAX_QUERY_CHARS = 8192
MAX_TOKENS = 256
# \w is Unicode-aware for str patterns: letters and digits of every script count.
_TOKEN = re.compile(r"\w+")


def topic_words(query: str) -> list[str]:
    """The query's distinct topic words, case-folded, at most MAX_TOKENS of them.

    An underscore joins word characters for \\w but separates words for both stores'
    tokenizers, so "dark_mode" becomes the two words "dark mode" in one item.
    """
    if len(query) > MAX_QUERY_CHARS:
        half = MAX_QUERY_CHARS // 2
        query = f"{query[:half]} {query[-half:]}"
    tokens = list(dict.fromkeys(token.casefold() for token in _TOKEN.findall(query)))
    tokens = [token for token in tokens if token not in STOP_WORDS]
    words = [token.replace("_", " ").strip() for token in tokens[:MAX_TOKENS]]
    return [word for word in words if word]
