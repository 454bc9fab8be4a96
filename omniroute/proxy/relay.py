"""A chat ready to go to its provider, and its answer relayed on the view's own thread.

`PreparedChat` is what both ways of relaying share: the checked request, the memory turn and
how the reply's text is read, and what to extract once an answer ends. Under the web process
the front relays it on the event loop (front.py); under a plain WSGI server (the Flask test
client, `flask run`) `relay_here` does, holding its thread while the provider answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from flask import Response, stream_with_context
from flask_smorest import abort

from omniroute.core.logs import bound_request_id
from omniroute.core.providers.registry import Provider
from omniroute.proxy.conversation import StreamedReply
from omniroute.proxy.pipeline import MemoryTurn
from omniroute.proxy.upstream import (
    Answer,
    UpstreamFailure,
    answer_of,
    fetch,
    open_upstream,
    read_whole,
    refused,
    relayed_headers,
)
from omniroute.services import Services

# What a relayed stream sends besides the provider's headers.
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


@dataclass
class PreparedChat:
    svc: Services
    provider: Provider
    request: httpx.Request
    turn: MemoryTurn
    reply_text: Callable[[Any], str]  # the text of a whole answer
    stream_reader: type[StreamedReply]
    stream: bool
    headers: dict[str, str]  # ours: memories injected, the backend that served
    request_id: str | None = None

    def finish_whole(self, answer: Answer) -> None:
        """After a whole answer: extract from the user's message and the reply, if it is one."""
        if answer.status != 200:
            return
        try:
            text = self.reply_text(json.loads(answer.body))
        except ValueError:
            return
        self.finish(text)

    def finish_stream(self, status: int, reply: StreamedReply, *, cut_short: bool) -> None:
        """After a stream: extract from the user's message and what the client got of the
        reply, when the stream was whole or the client (or a shutdown) cut it short; a stream
        the provider broke or failed is not extracted."""
        if status == 200 and (reply.complete or cut_short):
            self.finish(reply.text)

    def finish(self, reply: str) -> None:
        with bound_request_id(self.request_id):
            self.turn.finish(self.svc, reply)


def relay_here(chat: PreparedChat) -> Response:
    """Call the provider on this thread and answer with what it says (a stream as it comes)."""
    client = chat.svc.provider_client
    try:
        if not chat.stream:
            answer = fetch(client, chat.provider, chat.request)
        else:
            upstream = open_upstream(client, chat.provider, chat.request)
            if refused(upstream):
                answer = answer_of(chat.provider, upstream, read_whole(chat.provider, upstream))
            else:
                headers = {**chat.headers, **relayed_headers(upstream), **STREAM_HEADERS}
                body = stream_with_context(_relay(chat, upstream))
                return Response(body, 200, headers, mimetype="text/event-stream")
    except UpstreamFailure as exc:
        abort(exc.status, message=exc.message, code="upstream_unavailable")
    chat.finish_whole(answer)
    headers = {**chat.headers, **answer.headers}
    return Response(answer.body, answer.status, headers, content_type=answer.content_type)


def broken_stream_event(exc: BaseException) -> bytes:
    """The in-band error a stream ends with when the provider's stream breaks (the client
    already has its 200)."""
    message = {"error": {"message": f"The upstream stream broke: {type(exc).__name__}."}}
    return f"data: {json.dumps(message)}\n\n".encode()


def _relay(chat: PreparedChat, upstream: httpx.Response):
    """Pass the upstream's SSE bytes on as they arrive; extract once the stream is whole."""
    reply = chat.stream_reader()
    try:
        for chunk in upstream.iter_raw():
            reply.feed(chunk)
            yield chunk
    except Exception as exc:
        yield broken_stream_event(exc)
        return
    finally:
        upstream.close()
    chat.finish_stream(upstream.status_code, reply, cut_short=False)
