"""The text of a summary: extractive (the reference's first-sentences rule) or by an LLM.

Extractive: one line per memory, `[type] key: first sentences`, under a heading in the
memories' language (`metadata.language`, as extraction records it: en, nl, de; English when
unknown). Sentences end at `.`, `!` or `?` followed by a space, except after the language's
common abbreviations ("e.g.", "z.B.", "bijv."), so a sentence is not cut inside them.

LLM: a provider's chat model (`summarizeProviderModel`, `provider/model`) is asked for JSON
only, `{"summary": "..."}`, within a timeout. Any failure (no provider, timeout, an error, a
body that is not that JSON) raises SummaryFailed; the caller then uses the extractive text
and reports why.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from omniroute.core.providers.client import TIMEOUT, ProviderClient, ProviderError
from omniroute.core.providers.registry import ProviderStore
from omniroute.memory.model import Memory

LINE_SENTENCES = 1  # each memory's line keeps its first sentence
LINE_MAX_CHARS = 300
LLM_TIMEOUT_SECONDS = 30.0
LLM_MAX_SUMMARY_CHARS = 8000

HEADINGS = {
    "en": "Summary of {count} memories (older than {days} days):",
    "nl": "Samenvatting van {count} herinneringen (ouder dan {days} dagen):",
    "de": "Zusammenfassung von {count} Erinnerungen (älter als {days} Tage):",
}
ABBREVIATIONS = {
    "en": ("e.g.", "i.e.", "etc.", "vs.", "mr.", "mrs.", "dr.", "approx."),
    "nl": ("bijv.", "bv.", "d.w.z.", "o.a.", "enz.", "ca.", "dhr.", "mevr."),
    "de": ("z.b.", "d.h.", "u.a.", "usw.", "bzw.", "ca.", "evtl.", "ggf.", "hr.", "fr."),
}
_BOUNDARY = re.compile(r"[.!?]+(?=\s)")


class SummaryFailed(RuntimeError):
    pass


def language_of(memories: Sequence[Memory]) -> str:
    """The most common known language of the memories, else English."""
    known = Counter(
        m.metadata.get("language") for m in memories if m.metadata.get("language") in HEADINGS
    )
    return known.most_common(1)[0][0] if known else "en"


def first_sentences(text: str, count: int, language: str = "en") -> str:
    """The first `count` sentences of `text`, whitespace folded (all of it if it has fewer)."""
    text = " ".join(text.split())
    abbreviations = ABBREVIATIONS.get(language, ABBREVIATIONS["en"])
    found = 0
    for match in _BOUNDARY.finditer(text):
        head = text[: match.end()]
        if head.lower().endswith(abbreviations) and match.group() == ".":
            continue
        found += 1
        if found == count:
            return head
    return text


def line_of(memory: Memory, language: str) -> str:
    sentence = first_sentences(memory.content, LINE_SENTENCES, language)
    if len(sentence) > LINE_MAX_CHARS:
        sentence = sentence[: LINE_MAX_CHARS - 1].rstrip() + "…"
    return f"[{memory.type}] {memory.key}: {sentence}"


def heading(count: int, days: int, language: str) -> str:
    return HEADINGS[language].format(count=count, days=days)


def extractive(memories: Sequence[Memory], days: int) -> str:
    language = language_of(memories)
    lines = [line_of(memory, language) for memory in memories]
    return "\n".join([heading(len(memories), days, language), *lines])


class LlmWriter:
    """Summaries written by a provider's chat model, through the provider registry."""

    def __init__(
        self, providers: ProviderStore, client: ProviderClient, timeout: float = LLM_TIMEOUT_SECONDS
    ) -> None:
        self._providers = providers
        self._client = client
        self.timeout = timeout

    def write(self, model: str, memories: Sequence[Memory]) -> str:
        found = self._providers.for_model_ref(model)
        if found is None:
            raise SummaryFailed(f"no provider for summarise model {model!r}")
        provider, bare = found
        language = language_of(memories)
        body = {
            "model": bare,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": _PROMPT.format(language=language)},
                {"role": "user", "content": "\n".join(line_of(m, language) for m in memories)},
            ],
        }
        try:
            answer = self._client.post_json(
                provider, "/chat/completions", body, timeout=self.timeout
            )
        except ProviderError as exc:
            if exc.kind == TIMEOUT:
                raise SummaryFailed(f"{model} did not answer within {self.timeout:g} s") from None
            raise SummaryFailed(f"{model}: {exc.message}") from None
        return _summary_of(model, answer)


_PROMPT = (
    "You compress a user's stored memories into one short summary that keeps every durable "
    "fact, name, preference and decision and drops repetition. Write it in the language "
    "with code {language!r}. Answer with a JSON object only, exactly "
    '{{"summary": "<the summary>"}}, and nothing else.'
)


def _summary_of(model: str, answer: Any) -> str:
    try:
        content = answer["choices"][0]["message"]["content"]
        text = json.loads(_unfenced(content))["summary"]
    except (KeyError, IndexError, TypeError, ValueError):
        raise SummaryFailed(f"{model} did not answer with the JSON asked for") from None
    if not isinstance(text, str) or not text.strip():
        raise SummaryFailed(f"{model} answered with an empty summary")
    return text.strip()[:LLM_MAX_SUMMARY_CHARS]


def _unfenced(content: str) -> str:
    """The JSON inside a ```json fence, which models add though told not to."""
    stripped = content.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`").removeprefix("json").strip()
    return stripped
