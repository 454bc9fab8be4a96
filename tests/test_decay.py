"""Typed decay in ranking: old episodic memories weigh less, unless used often."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from omniroute.core.clock import to_iso
from omniroute.memory.life.decay import DecayPolicy
from omniroute.memory.model import Memory
from omniroute.memory.search.fusion import RetrievalOptions
from omniroute.memory.search.retrieval import Retriever
from tests.helpers import backdate as age

NOW = datetime(2026, 6, 1, tzinfo=UTC)
DECAY = DecayPolicy(enabled=True, episodic_days=30, access_immunity=3)


def memory(type="episodic", created_days=0, accessed_days=None, count=0) -> Memory:
    accessed = to_iso(NOW - timedelta(days=accessed_days)) if accessed_days is not None else None
    return Memory(
        id="m", api_key_id="a", session_id="", type=type, key="k", content="c", metadata={},
        created_at=to_iso(NOW - timedelta(days=created_days)), updated_at=to_iso(NOW),
        access_count=count, last_accessed_at=accessed,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("item", "weight"),
    [
        (memory(created_days=0), 1.0),
        (memory(created_days=30), 0.5),  # half weight at the age the sweep deletes it
        (memory(created_days=60), 0.25),
        (memory(created_days=60, accessed_days=30, count=1), 0.5),  # age from the last use
        (memory(created_days=60, count=3), 1.0),  # immune: injected three times
        (memory(type="factual", created_days=300), 1.0),  # facts do not decay
    ],
)
def test_the_decay_factor(item, weight):
    assert DECAY.weight(item, NOW) == pytest.approx(weight)
    assert DecayPolicy(enabled=False).weight(item, NOW) == 1.0


@pytest.mark.both_stores
def test_decay_ranks_a_fresh_decision_above_an_old_one_of_equal_relevance(svc):
    for key in ("old", "new"):
        svc.memories.create(api_key_id="a", key=key, content="I chose Postgres", type="episodic")
    svc.memories.create(api_key_id="a", key="fact", content="Postgres is my database")
    age(svc.memories, "old", 20)
    age(svc.memories, "fact", 20)
    settings = svc.memory_settings.get()

    def order(decay):
        retriever = Retriever(
            svc.memories, svc.vectors, None, options=RetrievalOptions(decay=decay)
        )
        ranking = retriever.rank(
            api_key_id="a", query="postgres", settings=settings, strategy="keyword"
        )
        return {item.memory.key: item for item in ranking.items}

    plain, decayed = order(DecayPolicy()), order(DECAY)
    assert plain["old"].score == pytest.approx(plain["new"].score)
    assert decayed["old"].decay == pytest.approx(0.5 ** (20 / 30), rel=1e-3)
    assert decayed["old"].score == pytest.approx(plain["old"].score * decayed["old"].decay)
    assert decayed["new"].decay == pytest.approx(1.0, abs=1e-3)
    assert decayed["fact"].decay == 1.0 and decayed["fact"].score == plain["fact"].score
    ranked = list(decayed)
    assert ranked.index("new") < ranked.index("old")
