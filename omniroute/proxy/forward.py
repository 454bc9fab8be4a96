"""One request with memory, from the resolved model to the prepared provider call: shared by
chat completions and the Responses API, which differ only in their `Dialect`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Response, g, request
from flask_smorest import abort

from omniroute.core.handoff import handoff_of
from omniroute.core.providers.registry import UnknownProvider, resolve_model
from omniroute.proxy.blueprint import unknown_model
from omniroute.proxy.conversation import StreamedReply, StreamedResponse, reply_text, response_text
from omniroute.proxy.injection import Placement, inject, inject_into_input
from omniroute.proxy.pipeline import MemoryTurn
from omniroute.proxy.relay import PreparedChat, relay_here
from omniroute.proxy.upstream import UpstreamFailure, prepare_upstream
from omniroute.services import services

INJECTED_HEADER = "x-omniroute-memories"
BACKEND_HEADER = "x-omniroute-memory-backend"  # the backend that served the memories
FALLBACK_HEADER = "x-omniroute-memory-fallback"  # the backends that failed before it


@dataclass(frozen=True)
class Dialect:
    """Where an OpenAI endpoint keeps its texts: the provider path, where memory goes in,
    and how the reply's text is read (whole, or from its stream)."""

    path: str
    place: Placement
    reply_text: Callable[[Any], str]
    stream_reader: type[StreamedReply]


CHAT = Dialect("/chat/completions", inject, reply_text, StreamedReply)
RESPONSES = Dialect("/responses", inject_into_input, response_text, StreamedResponse)


def forward_with_memory(body: dict[str, Any], user_text: str, dialect: Dialect) -> Response:
    """Inject the key's relevant memories and forward to the provider; its answer (as it
    streams, when `stream` is true) is relayed by the web process's event loop, or here under
    a plain WSGI server, and extraction is queued once the answer ends."""
    svc = services()
    try:
        provider, model = resolve_model(svc.providers, body["model"])
    except UnknownProvider as exc:
        unknown_model(exc)
    g.provider, g.model = provider.id, model  # for the request's log line
    svc.activity.add("chats")
    turn = MemoryTurn.begin(svc, request, g.api_key.id, body, user_text)
    forwarded = turn.apply(svc, {**body, "model": model}, provider, model, dialect.place)
    g.memories_injected = len(turn.injected)
    g.memory_backend = turn.backend
    g.memory_fallback = ",".join(turn.failed_backends) or None
    try:
        upstream_request = prepare_upstream(svc.provider_client, provider, dialect.path, forwarded)
    except UpstreamFailure as exc:
        abort(exc.status, message=exc.message, code="upstream_unavailable")
    headers = {INJECTED_HEADER: str(len(turn.injected))}
    if turn.backend or turn.failed_backends:
        headers[BACKEND_HEADER] = turn.backend or "none"
    if turn.failed_backends:
        headers[FALLBACK_HEADER] = ",".join(turn.failed_backends)
    chat = PreparedChat(
        svc,
        provider,
        upstream_request,
        turn,
        dialect.reply_text,
        dialect.stream_reader,
        stream=body.get("stream") is True,
        headers=headers,
        request_id=g.get("request_id"),
    )
    handoff = handoff_of(request.environ)
    if handoff is None:
        return relay_here(chat)
    handoff.relay = chat
    return Response(status=200, headers=headers)  # its headers go out with the front's answer
