"""The web process's chat front (ASGI): admission, then the provider's answer on the event loop.

For POST /v1/chat/completions and /v1/responses:
1. a place among MAX_OPEN_STREAMS is taken at once, or the chat gets 503 with Retry-After in
   OpenAI's error shape (never a queue);
2. Flask runs the view on a thread (the key, the memories, the body to forward), which leaves
   the prepared call in the request's Handoff (handoff.py) and gives its thread back;
3. here the provider is called with httpx's AsyncClient and its answer relayed, a stream
   chunk by chunk. No thread and no database connection waits for the provider; extraction,
   a database write, goes to a thread once the answer ends.

A client that leaves ends its relay at once: the provider's stream is closed, and extraction
reads the user's message and the part of the reply that was sent before it left. On shutdown
(OpenStreams.drain) open relays go on for the grace period, then end cleanly: a stream with
an in-band error event and a proper end, an answer not yet begun with 503.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from omniroute.core.errors import error_payload
from omniroute.core.handoff import SCOPE_KEY, Handoff
from omniroute.core.logs import log_request
from omniroute.core.metrics import HTTP_REQUESTS, STREAMS_ENDED
from omniroute.proxy.conversation import StreamedReply
from omniroute.proxy.relay import STREAM_HEADERS, PreparedChat, broken_stream_event
from omniroute.proxy.streams import OpenStreams
from omniroute.proxy.upstream import (
    UpstreamFailure,
    answer_of,
    fetch_async,
    open_upstream_async,
    read_whole_async,
    refused,
    relayed_headers,
)

log = logging.getLogger(__name__)

CHAT_PATHS = frozenset({"/v1/chat/completions", "/v1/responses"})
BUSY_RETRY_AFTER_SECONDS = 1
# Extraction's database writes after an answer, on threads of their own (sized with the pool).
FINISH_THREADS = 4
# The status logged for a chat whose client left before its answer began (nginx's).
CLIENT_CLOSED = 499
# Headers of the view's placeholder response that the real answer sets itself.
_REPLACED = frozenset({b"content-type", b"content-length"})

COMPLETE, CLIENT_LEFT, UPSTREAM_FAILED, SHUTDOWN = (
    "complete",
    "client_left",
    "upstream_failed",
    "shutdown",
)


SHUTDOWN_EVENT = (
    b'data: {"error": {"message": "The gateway is restarting: the answer was cut short.", '
    b'"type": "service_unavailable", "code": "server_shutdown"}}\n\n'
)


def error_message(status: int, message: str, code: str | None = None) -> bytes:
    """Our error shape as bytes; with OpenAI's `code` for /v1 answers."""
    payload = error_payload(status, message)
    if code is not None:
        payload["error"]["code"] = code
    return json.dumps(payload).encode()


@dataclass
class Progress:
    """How far one relay got: whether its answer began, its status, how it ended."""

    reply: StreamedReply
    report: Callable[[int], None] | None = None  # the request's log line and metrics
    status: int = 0
    began: bool = False
    ended: str | None = None

    def begin(self, status: int) -> None:
        self.status, self.began = status, True
        if self.report is not None:
            self.report(status)


@dataclass
class ChatFront:
    """ASGI: `app` (Flask behind a2wsgi) answers everything; chats are admitted and their
    answers relayed here."""

    app: ASGIApp
    streams: OpenStreams
    finish_threads: anyio.CapacityLimiter = field(
        default_factory=lambda: anyio.CapacityLimiter(FINISH_THREADS)
    )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not (
            scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in CHAT_PATHS
        ):
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        admitted = self.streams.admit()
        if admitted is None:
            await self._busy(scope, send, started)
            return
        try:
            await self._chat(scope, receive, send)
        finally:
            self.streams.release(admitted)

    async def _busy(self, scope: Scope, send: Send, started: float) -> None:
        message = (
            "The gateway is shutting down; retry on another instance."
            if self.streams.draining
            else f"The gateway is relaying {self.streams.cap} chats, its limit "
            "(MAX_OPEN_STREAMS); retry shortly."
        )
        body = error_message(503, message, "server_overloaded")
        await send_whole(send, 503, [], body, retry_after=BUSY_RETRY_AFTER_SECONDS)
        HTTP_REQUESTS.labels(scope["path"], "POST", "503").inc()
        log_request("POST", scope["path"], 503, started, rejected="MAX_OPEN_STREAMS")

    async def _chat(self, scope: Scope, receive: Receive, send: Send) -> None:
        handoff = Handoff()
        placeholder: list[Message] = []

        async def hold_placeholder(message: Message) -> None:
            if handoff.relay is None:  # Flask answered itself: an error, a refusal
                await send(message)
            elif message["type"] == "http.response.start":
                placeholder.append(message)

        await self.app({**scope, SCOPE_KEY: handoff}, receive, hold_placeholder)
        if handoff.relay is None:
            return
        headers = [(k, v) for k, v in placeholder[0]["headers"] if k not in _REPLACED]
        chat: PreparedChat = handoff.relay
        progress = Progress(chat.stream_reader(), handoff.report)
        await self._relay(chat, headers, receive, send, progress)
        if not progress.began and handoff.report is not None:
            handoff.report(CLIENT_CLOSED)
        STREAMS_ENDED.labels(progress.ended or COMPLETE).inc()

    async def _relay(self, chat, headers, receive, send, progress: Progress) -> None:
        async with anyio.create_task_group() as group:

            async def watch_client() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                if progress.ended is None:
                    progress.ended = CLIENT_LEFT
                group.cancel_scope.cancel()

            group.start_soon(watch_client)
            with self.streams.cut_at_shutdown(group.cancel_scope):
                try:
                    if chat.stream:
                        await self._stream(chat, headers, send, progress)
                    else:
                        await self._whole(chat, headers, send, progress)
                except UpstreamFailure as exc:
                    progress.ended = UPSTREAM_FAILED
                    if not progress.began:
                        body = error_message(exc.status, exc.message, "upstream_unavailable")
                        await self._begin_whole(send, progress, exc.status, headers, body)
            if progress.ended is None:
                progress.ended = COMPLETE
            group.cancel_scope.cancel()
        if progress.ended is None:  # cancelled, and not by the client: the shutdown's cut
            progress.ended = SHUTDOWN
        with anyio.CancelScope(shield=True):
            await self._end(chat, headers, send, progress)

    async def _whole(self, chat: PreparedChat, headers, send: Send, progress: Progress) -> None:
        answer = await fetch_async(chat.svc.provider_client, chat.provider, chat.request)
        with anyio.CancelScope(shield=True):  # the answer is here: its facts are kept
            await self._finish(chat, chat.finish_whole, answer)
        extra = [*headers, *_encoded(answer.headers)]
        await self._begin_whole(
            send, progress, answer.status, extra, answer.body, answer.content_type
        )

    async def _stream(self, chat: PreparedChat, headers, send: Send, progress: Progress) -> None:
        client, provider = chat.svc.provider_client, chat.provider
        upstream = await open_upstream_async(client, provider, chat.request)
        try:
            if refused(upstream):
                answer = answer_of(provider, upstream, await read_whole_async(provider, upstream))
                extra = [*headers, *_encoded(answer.headers)]
                await self._begin_whole(send, progress, answer.status, extra, answer.body)
                return
            stream_headers = {**relayed_headers(upstream), **STREAM_HEADERS}
            progress.begin(upstream.status_code)
            await send(
                {
                    "type": "http.response.start",
                    "status": upstream.status_code,
                    "headers": [
                        *headers,
                        (b"content-type", b"text/event-stream; charset=utf-8"),
                        *_encoded(stream_headers),
                    ],
                }
            )
            try:
                async for chunk in upstream.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    progress.reply.feed(chunk)  # what the client was sent, no more
            except httpx.HTTPError as exc:
                progress.ended = UPSTREAM_FAILED
                await send(_body(broken_stream_event(exc)))
            await send({"type": "http.response.body", "body": b""})
        finally:
            with anyio.CancelScope(shield=True):  # closes the provider's stream at once
                await upstream.aclose()

    async def _end(self, chat: PreparedChat, headers, send: Send, progress: Progress) -> None:
        """After the relay, whichever way it ended: end a stream the shutdown cut, answer a
        chat the shutdown caught before its answer, and extract what the client was sent."""
        began, cut_short = progress.began, progress.ended in (CLIENT_LEFT, SHUTDOWN)
        if progress.ended == SHUTDOWN and began:
            await send(_body(SHUTDOWN_EVENT))
            await send({"type": "http.response.body", "body": b""})
        elif progress.ended == SHUTDOWN:
            body = error_message(503, "The gateway is restarting; retry.", "server_shutdown")
            await self._begin_whole(send, progress, 503, headers, body, retry_after=1)
        if began and chat.stream and progress.ended != UPSTREAM_FAILED:
            status, reply = progress.status, progress.reply
            await self._finish(chat, lambda: chat.finish_stream(status, reply, cut_short=cut_short))
        elif not began and cut_short:  # accepted, but no answer reached the client
            await self._finish(chat, chat.finish, "")

    async def _finish(self, chat: PreparedChat, work, *args) -> None:
        """Extraction's writes, on a thread of their own (none with memory off for the chat);
        a failure is logged, never raised into an answer that is already on its way."""
        if not chat.turn.enabled:
            return
        try:
            await anyio.to_thread.run_sync(work, *args, limiter=self.finish_threads)
        except Exception:
            log.exception("extraction after a relayed answer failed")

    @staticmethod
    async def _begin_whole(
        send: Send,
        progress: Progress,
        status: int,
        headers,
        body: bytes,
        content_type: str = "application/json",
        retry_after: int | None = None,
    ) -> None:
        progress.begin(status)
        type_header = (b"content-type", content_type.encode("latin-1"))
        await send_whole(send, status, [*headers, type_header], body, retry_after)


async def send_whole(send: Send, status: int, headers, body: bytes, retry_after=None) -> None:
    """A whole answer (JSON unless `headers` name a content type) in two ASGI messages."""
    headers = [*headers, (b"content-length", str(len(body)).encode())]
    if not any(name == b"content-type" for name, _ in headers):
        headers.append((b"content-type", b"application/json"))
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _body(chunk: bytes) -> Message:
    return {"type": "http.response.body", "body": chunk, "more_body": True}


def _encoded(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [
        (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()
    ]
