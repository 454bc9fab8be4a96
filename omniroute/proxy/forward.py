"""One request with memory, from the resolved model to the relayed answer: shared by chat
completions and the Responses API, which differ only in their `Dialect`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Response, g, request, stream_with_context
from flask_smorest import abort

from ..providers.registry import UnknownProvider, resolve_model
from ..services import services
from .blueprint import bad_field
from .conversation import StreamedReply, StreamedResponse, reply_text, response_text
from .injection import Placement, inject, inject_into_input
from .pipeline import MemoryTurn
from .upstream import UpstreamFailure, open_upstream, refusal, relayed_headers

INJECTED_HEADER = "x-omniroute-memories"
BACKEND_HEADER = "x-omniroute-memory-backend"  # the backend that served (a remote primary)
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
    """Inject the key's relevant memories, forward to the provider, relay its answer (as it
    streams, when `stream` is true) and queue extraction once the answer is whole."""
    svc = services()
    try:
        provider, model = resolve_model(svc.providers, body["model"])
    except UnknownProvider as exc:
        bad_field("model", str(exc))
    g.provider, g.model = provider.id, model  # for the request's log line
    svc.activity.add("chats")
    turn = MemoryTurn.begin(svc, request, g.api_key.id, user_text)
    forwarded = turn.apply(svc, {**body, "model": model}, provider, model, dialect.place)
    g.memories_injected = len(turn.injected)
    g.memory_backend = turn.backend
    g.memory_fallback = ",".join(turn.failed_backends) or None
    try:
        upstream = open_upstream(svc.provider_client, provider, dialect.path, forwarded)
    except UpstreamFailure as exc:
        abort(exc.status, message=exc.message, code="upstream_unavailable")
    headers = {INJECTED_HEADER: str(len(turn.injected)), **relayed_headers(upstream)}
    if turn.backend or turn.failed_backends:
        headers[BACKEND_HEADER] = turn.backend or "none"
    if turn.failed_backends:
        headers[FALLBACK_HEADER] = ",".join(turn.failed_backends)
    refused = refusal(provider, upstream, headers)
    if refused is not None:
        return refused
    if body.get("stream") is True:
        return Response(
            stream_with_context(_relay(upstream, turn, dialect.stream_reader())),
            upstream.status_code,
            {**headers, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            mimetype="text/event-stream",
        )
    try:
        raw = upstream.read()
    finally:
        upstream.close()
    if upstream.status_code == 200:
        try:
            turn.finish(svc, dialect.reply_text(json.loads(raw)))
        except ValueError:
            pass
    content_type = upstream.headers.get("content-type", "application/json")
    return Response(raw, upstream.status_code, headers, content_type=content_type)


def _relay(upstream, turn: MemoryTurn, reply: StreamedReply):
    """Pass the upstream's SSE bytes on as they arrive; extract once the stream is whole."""
    svc = services()
    try:
        for chunk in upstream.iter_raw():
            reply.feed(chunk)
            yield chunk
    except Exception as exc:  # the client already has a 200: report in-band, then stop
        message = {"error": {"message": f"The upstream stream broke: {type(exc).__name__}."}}
        yield f"data: {json.dumps(message)}\n\n".encode()
        return
    finally:
        upstream.close()
    if upstream.status_code == 200 and reply.complete:
        turn.finish(svc, reply.text)
