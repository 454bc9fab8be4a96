"""The token budget: how many of the ranked memories go into a prompt."""

from __future__ import annotations

from omniroute.memory.model import Memory
from omniroute.memory.search.tokens import count_tokens
from omniroute.memory.settings import MAX_BUDGET_TOKENS


def within_budget(found: list[Memory], max_tokens: int, *, take_first: bool = True) -> list[Memory]:
    """Take memories in order while their tokens fit the budget (REFERENCE section 4.6).

    The budget is `max_tokens` clamped to MAX_BUDGET_TOKENS (the maxTokens setting's upper
    bound: one bound everywhere); none at all takes nothing. The
    first memory that does not fit ends the walk, except that a first memory is taken even
    when it alone is over the budget (unless `take_first` is False).
    """
    if max_tokens <= 0:
        return []
    budget = min(max_tokens, MAX_BUDGET_TOKENS)
    taken: list[Memory] = []
    used = 0
    for memory in found:
        cost = count_tokens(memory.content)
        if used + cost > budget:
            if not taken and take_first:
                taken.append(memory)
            break
        taken.append(memory)
        used += cost
    return taken


def within_shares(found: list[Memory], max_tokens: int, global_percent: int) -> list[Memory]:
    """The budget split between the global memories and the key's own (docs/scopes.md): the
    global ones, best first, within `global_percent` of the budget (never past it), then the
    key's and its user's within what is left; in the ranking's order."""
    budget = min(max(max_tokens, 0), MAX_BUDGET_TOKENS)
    shared = [memory for memory in found if memory.scope == "global"]
    kept = within_budget(shared, budget * global_percent // 100, take_first=False)
    used = sum(count_tokens(memory.content) for memory in kept)
    own = [memory for memory in found if memory.scope != "global"]
    taken = {memory.id for memory in kept + within_budget(own, budget - used)}
    return [memory for memory in found if memory.id in taken]
