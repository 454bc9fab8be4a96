"""The memory steps around one chat request: retrieve and inject before, extract after."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from flask import Request, current_app

from jobs import EXTRACTION_QUEUE
from jobs.memory import extract_facts

from ..memory.retrieval import RetrievalConfig, within_budget
from ..services import Services
from .conversation import last_user_text
from .injection import inject, render
from .providers import Provider

NO_MEMORY_HEADER = "x-omniroute-no-memory"
SESSION_HEADER = "x-omniroute-session-id"
OPT_OUT_VALUES = frozenset({"true", "1", "yes"})


def retrieval_config(settings: Mapping[str, Any], config: Mapping[str, Any]) -> RetrievalConfig:
    """The retrieval configuration from the memory settings and the MEMORY_* env settings."""
    return RetrievalConfig.from_settings(
        settings,
        top_k=config["MEMORY_VEC_TOP_K"],
        fusion=config["MEMORY_FUSION"],
        rrf_k=config["MEMORY_RRF_K"],
    )


@dataclass
class MemoryTurn:
    """What memory does for one request; `enabled` False means the body goes untouched."""

    enabled: bool
    api_key_id: str
    session_id: str
    user_text: str = ""
    config: RetrievalConfig | None = None
    injected: list[str] = field(default_factory=list)

    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def begin(cls, svc: Services, request: Request, api_key_id: str, body: dict) -> MemoryTurn:
        settings = svc.memory_settings.get()
        opted_out = request.headers.get(NO_MEMORY_HEADER, "").strip().lower() in OPT_OUT_VALUES
        session_id = request.headers.get(SESSION_HEADER, "").strip() or f"req-{uuid.uuid4()}"
        enabled = settings["enabled"] and settings["maxTokens"] > 0 and not opted_out
        turn = cls(enabled, api_key_id, session_id, settings=settings)
        if enabled:
            turn.user_text = last_user_text(body["messages"])
            turn.config = retrieval_config(settings, current_app.config)
        return turn

    def apply(
        self, svc: Services, body: dict[str, Any], provider: Provider, model: str
    ) -> dict[str, Any]:
        """Return the body to forward: with the relevant memories injected, if any."""
        if not self.enabled or self.config is None:
            return body
        ranking = svc.retriever.rank(
            api_key_id=self.api_key_id,
            query=self.user_text,
            config=self.config,
            settings=self.settings,
        )
        memories = within_budget([item.memory for item in ranking.items], self.config.max_tokens)
        if not memories:
            return body
        self.injected = [memory.id for memory in memories]
        svc.access.record(self.injected)
        return inject(
            body,
            render(memories),
            provider_id=provider.id,
            model=model,
            supports_system_role=provider.supports_system_role,
        )

    def finish(self, svc: Services, reply: str) -> None:
        """After a successful answer: extract facts from the user's message and the reply."""
        if not self.enabled:
            return
        for text, source in ((self.user_text, "user_message"), (reply, "llm_response")):
            if text.strip():
                svc.jobs.enqueue(
                    EXTRACTION_QUEUE, extract_facts, self.api_key_id, self.session_id, text, source
                )
