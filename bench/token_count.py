"""What counting tokens with tiktoken costs a request, against characters/4, and how far
apart the two counts are by language.

Each simulated request walks the budget over 20 ranked memories (LoCoMo turns of the
development split, and the same number of Chinese, Japanese and Korean sentences), the way
the gateway does before it injects. `cold` clears the count cache before every request (20
memories never counted before: the worst case); `warm` is a request whose memories were
counted before (the cache keeps 16,384 texts). Run with `make bench` or
`python bench/token_count.py`.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.proxy_overhead import locomo_corpus  # noqa: E402
from omniroute.memory.search import tokens  # noqa: E402

PER_REQUEST = 20
REQUESTS = 500
CJK = [
    "我喜欢用TypeScript写后端服务，不喜欢Java。",
    "我们下周在柏林见面，讨论数据库迁移到Postgres的计划。",
    "私はTypeScriptが好きです。バックエンドはGoで書きます。",
    "来月から東京のチームと一緒に新しい検索機能を作ります。",
    "저는 타입스크립트를 선호합니다. 백엔드는 Go로 작성합니다.",
    "다음 주에 베를린에서 데이터베이스 이전 계획을 논의합니다.",
]


def per_request_us(texts: list[str], cold: bool) -> float:
    """Median microseconds to count PER_REQUEST memories, over REQUESTS requests."""
    times = []
    for number in range(REQUESTS):
        start = number * PER_REQUEST % max(1, len(texts) - PER_REQUEST)
        batch = texts[start : start + PER_REQUEST]
        if cold:
            tokens._count.cache_clear()
        began = time.perf_counter()
        for text in batch:
            tokens.count_tokens(text)
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1e6


def main() -> None:
    english, _ = locomo_corpus(REQUESTS * PER_REQUEST)
    cjk = [f"{sentence} ({number})" for number in range(400) for sentence in CJK]
    print(f"{PER_REQUEST} memories a request, median of {REQUESTS} requests")
    print(f"{'corpus':<10} {'counter':<9} {'cold µs':>9} {'warm µs':>9} {'tokens/memory':>14}")
    for name, texts in (("locomo", english), ("cjk", cjk)):
        for counter in ("chars", "tiktoken"):
            tokens.use_counter(counter)
            cold = per_request_us(texts, cold=True)
            warm = per_request_us(texts, cold=False)
            mean = statistics.fmean(tokens.count_tokens(text) for text in texts)
            print(f"{name:<10} {counter:<9} {cold:>9.1f} {warm:>9.1f} {mean:>14.1f}")
    tokens.use_counter("auto")


if __name__ == "__main__":
    main()
