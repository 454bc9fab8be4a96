"""The token budget: how many of the ranked memories go into a prompt."""

from __future__ import annotations

from omniroute.memory.model import Memory
from omniroute.memory.search.tokens import count_tokens
from omniroute.memory.settings import MAX_BUDGET_TOKENS


def within_budget(found: list[Memory], max_tokens: int) -> list[Memory]:
    """Take memories in order while their tokens fit the budget (REFERENCE section 4.6).

    The budget is `max_tokens` clamped to MAX_BUDGET_TOKENS (the maxTokens setting's upper
    bound: one bound everywhere); none at all takes nothing. The
    first memory that does not fit ends the walk, except that a first memory is taken even
    when it alone is over the budget.
    """
    if max_tokens <= 0:
        return []
    budget = min(max_tokens, MAX_BUDGET_TOKENS)
    taken: list[Memory] = []
    used = 0
    for memory in found:
        cost = count_tokens(memory.content)
        if used + cost > budget:
            if not taken:
                taken.append(memory)
            break
        taken.append(memory)
        used += cost
    return taken
