"""The memory steps around one chat request: retrieve and inject before, extract after."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from flask import Request

from omniroute.core.logs import log_event
from omniroute.core.metrics import MEMORIES_INJECTED, RETRIEVAL_LATENCY
from omniroute.core.providers.registry import Provider
from omniroute.jobs import request_extraction, request_extraction_of_text
from omniroute.memory.model import Memory
from omniroute.memory.search.budget import within_shares
from omniroute.memory.search.tokens import count_tokens
from omniroute.memory.settings import MemoryConfig
from omniroute.proxy.injection import Placement, inject, render
from omniroute.proxy.scopes import ChatScope, chat_scope
from omniroute.services import Services

log = logging.getLogger(__name__)

NO_MEMORY_HEADER = "x-omniroute-no-memory"
OPT_OUT_VALUES = frozenset({"true", "1", "yes"})
INJECTED_EVENT = "memory.injection.injected"  # the specification's log event
# How many memories the serving backend is asked for; the token budget then takes its share.
RECALL_LIMIT = 50


@dataclass
class MemoryTurn:
    """What memory does for one request; `enabled` False means the body goes untouched."""

    enabled: bool
    api_key_id: str
    scope: ChatScope
    user_text: str = ""
    injected: list[str] = field(default_factory=list)

    settings: MemoryConfig | None = None
    # Which backend answered the search, and those that failed first (remote primaries).
    backend: str | None = None
    failed_backends: tuple[str, ...] = ()
    strategy: str | None = None  # how the memories were ranked (the recall's)

    @classmethod
    def begin(
        cls, svc: Services, request: Request, api_key_id: str, body: dict[str, Any], user_text: str
    ) -> MemoryTurn:
        """`user_text` is what the user asked in this request: the query, and the text that
        extraction reads besides the reply; `body` names the end user, if any (scopes.py)."""
        settings = svc.memory_settings.get()
        opted_out = request.headers.get(NO_MEMORY_HEADER, "").strip().lower() in OPT_OUT_VALUES
        scope = chat_scope(request, body, settings)
        enabled = settings.enabled and settings.max_tokens > 0 and not opted_out and scope.allowed
        return cls(enabled, api_key_id, scope, user_text if enabled else "", settings=settings)

    def apply(
        self,
        svc: Services,
        body: dict[str, Any],
        provider: Provider,
        model: str,
        place: Placement = inject,
    ) -> dict[str, Any]:
        """Return the body to forward: with the relevant memories put in by `place` (chat's
        messages by default, a Responses request's input), if any."""
        if not self.enabled:
            return body
        started = time.perf_counter()
        found = self._recall(svc)
        svc.activity.retrieval(time.perf_counter() - started)
        memories = within_shares(
            found, self.settings.max_tokens, self.settings.global_budget_percent
        )
        if not memories:
            return body
        self.injected = [memory.id for memory in memories]
        log_event(
            log, INJECTED_EVENT, count=len(memories), strategy=self.strategy, model=model,
            backend=self.backend,
        )  # fmt: skip
        MEMORIES_INJECTED.inc(len(memories))
        svc.activity.add("injected", len(memories))
        svc.activity.add("tokens_added", sum(count_tokens(m.content) for m in memories))
        svc.access.record(self.injected)
        return place(
            body,
            render(memories),
            provider_id=provider.id,
            model=model,
            supports_system_role=provider.supports_system_role,
        )

    def _recall(self, svc: Services) -> list[Memory]:
        """The key's memories for this request, best first, from the serving backend (a
        fallback's when it fails): the retriever's ranking when it is the local store."""
        started = time.perf_counter()
        found = svc.serving.recall(
            self.api_key_id,
            self.user_text,
            RECALL_LIMIT,
            max_tokens=self.settings.max_tokens,
            settings=self.settings,
            user_id=self.scope.user_id,
            include_global=self.settings.global_budget_percent > 0,
            session_id=self.scope.search_session,
        )
        self.backend, self.failed_backends = found.backend, found.failed
        self.strategy = found.strategy
        fell_back = found.fallback_reason is not None or found.ranking_fell_back
        RETRIEVAL_LATENCY.labels(found.strategy, "yes" if fell_back else "no").observe(
            time.perf_counter() - started
        )
        return found.memories

    def finish(self, svc: Services, reply: str) -> None:
        """After a successful answer: extract facts from the user's message and the reply.

        The texts go to the extraction outbox first (in this request), so that no lost job
        can lose them; should that write fail, the jobs carry the texts themselves.
        """
        if not self.enabled:
            return
        texts = [(self.user_text, "user_message"), (reply, "llm_response")]
        try:
            scope = self.scope
            entries = svc.outbox.put(self.api_key_id, scope.session_id, texts, scope.user_id)
        except Exception:
            log.exception("extraction outbox not written; the jobs carry the texts")
            for text, source in texts:
                if text.strip():
                    request_extraction_of_text(
                        svc.jobs,
                        self.api_key_id,
                        self.scope.session_id,
                        text,
                        source,
                        self.scope.user_id,
                    )
            return
        for entry_id in entries:
            request_extraction(svc.jobs, entry_id)
