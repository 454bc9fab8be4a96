"""A real OpenAI-compatible HTTP server on loopback, for tests and benchmarks.

It answers POST /v1/chat/completions, /v1/responses, /v1/embeddings (deterministic
8-dimensional vectors) and /v1/rerank (documents in reverse order), records every request it
receives, and behaves by the requested model: `slow` waits `slow_seconds` before answering;
`fail-429` (with Retry-After and x-ratelimit-* headers), `fail-500` and `fail-401` answer
with those errors. With `"stream": true` chat sends the reply as SSE chunks, one word each
(each of `n` choices in turn), `chunk_delay` seconds apart, ending with `data: [DONE]`;
Responses sends its events, a text delta per word, ending with `response.completed` (or, for
the model `cut-off`, with `response.failed`); a chat streamed with the model `break-off`
hangs up after its first chunk, short of the length it announced. It counts the streams
open now, the most at once, and those cut short because the reader closed the connection
(`stream_cut` is set at the first); with a `gate`, each stream waits for it after its first
word.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.loopback import LoopbackServer


class FakeUpstream(LoopbackServer):
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.reply = "Noted."
        self.chunk_delay = 0.0
        self.slow_seconds = 2.0
        # Streams sending now, the most at once, and those whose reader left before the end.
        self.open_streams = 0
        self.max_open_streams = 0
        self.streams_cut = 0
        self.stream_cut = threading.Event()
        self._lock = threading.Lock()
        # Set, a stream sends its first word, then waits for the gate to open.
        self.gate: threading.Event | None = None
        super().__init__(_handler_for(self))

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def last_body(self) -> dict[str, Any]:
        return self.requests[-1]["body"]


def completion(model: str, text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def response_object(model: str, text: str, status: str = "completed") -> dict[str, Any]:
    """A Responses API answer: one assistant message with one output_text part."""
    message = {
        "type": "message",
        "id": "msg-fake",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }
    return {
        "id": "resp-fake",
        "object": "response",
        "created_at": 1_700_000_000,
        "status": status,
        "model": model,
        "output": [message] if text else [],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }


def event(payload: dict[str, Any]) -> bytes:
    return f"event: {payload['type']}\ndata: {json.dumps(payload)}\n\n".encode()


EMBEDDING_DIMENSIONS = 8


def fake_embedding(text: str) -> list[float]:
    """A deterministic vector: the same text always gives the same one."""
    digest = hashlib.sha256(text.encode()).digest()
    return [byte / 255 - 0.5 for byte in digest[:EMBEDDING_DIMENSIONS]]


# What a provider says of its limits: on every answer, and with Retry-After when it refuses.
RATE_HEADERS = {"x-ratelimit-limit-requests": "500", "x-ratelimit-remaining-requests": "499"}
RATE_LIMITED_HEADERS = {
    "retry-after": "7",
    "x-ratelimit-remaining-requests": "0",
    "x-ratelimit-reset-requests": "7s",
}


def chunk(model: str, delta: dict[str, Any], finish: str | None = None, index: int = 0) -> bytes:
    payload = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": index, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(payload)}\n\n".encode()


def _handler_for(upstream: FakeUpstream) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length) or b"{}")
            upstream.requests.append(
                {"path": self.path, "headers": dict(self.headers), "body": body}
            )
            model = body.get("model", "")
            if self.path == "/v1/embeddings":
                return self._embeddings(model, body.get("input", []), body.get("dimensions"))
            if self.path == "/v1/rerank":
                return self._rerank(model, body.get("documents", []))
            if self.path.startswith("/v1/moved"):  # a redirect, which callers never follow
                self.send_response(307)
                self.send_header("Location", "/v1/chat/completions")
                self.send_header("Content-Length", "0")
                return self.end_headers()
            if self.path == "/v1/text":
                return self._send(200, b"not json", "text/plain")
            if self.path not in ("/v1/chat/completions", "/v1/responses"):
                return self._send(404, {"error": {"message": "no such route"}})
            if model == "slow":
                time.sleep(upstream.slow_seconds)
            if model == "fail-429":
                return self._send(
                    429,
                    {"error": {"message": "Rate limit reached", "type": "rate"}},
                    headers=RATE_LIMITED_HEADERS,
                )
            if model == "fail-401":  # the provider refuses the gateway's key for it
                return self._send(401, {"error": {"message": "Incorrect API key provided"}})
            if model == "fail-500":
                return self._send(500, b"upstream exploded", "text/plain")
            if self.path == "/v1/responses":
                if body.get("stream"):
                    return self._counted(self._stream_response, model)
                return self._send(200, response_object(model, upstream.reply))
            if body.get("stream") and model == "break-off":
                return self._break_off(model)
            if body.get("stream"):
                return self._counted(self._stream, model, body.get("n") or 1)
            return self._send(200, completion(model, upstream.reply), headers=RATE_HEADERS)

        def _embeddings(self, model: str, given, dimensions: int | None) -> None:
            if model == "fail-401":
                return self._send(401, {"error": {"message": "bad key"}})
            if model == "fail-429":
                return self._send(429, {"error": {"message": "slow down"}})
            if model == "slow":
                time.sleep(upstream.slow_seconds)
            # OpenAI's input: a string, a token array, or a list of strings or token arrays.
            if isinstance(given, str) or (given and all(isinstance(t, int) for t in given)):
                given = [given]
            if dimensions is not None and not 1 <= dimensions <= EMBEDDING_DIMENSIONS:
                message = f"dimensions must be 1 to {EMBEDDING_DIMENSIONS}"
                return self._send(400, {"error": {"message": message}})
            data = [
                {
                    "object": "embedding",
                    "index": index,
                    # `dimensions` shortens a vector as text-embedding-3 does: its first
                    # components (the client normalises them again)
                    "embedding": fake_embedding(
                        item if isinstance(item, str) else json.dumps(item)
                    )[:dimensions],
                }
                for index, item in enumerate(given)
            ]
            return self._send(200, {"object": "list", "data": data, "model": model})

        def _rerank(self, model: str, documents: list[str]) -> None:
            """Answers in reverse document order, so that a rerank is visible."""
            if model == "fail-500":
                return self._send(500, b"reranker down", "text/plain")
            if model == "slow":
                time.sleep(upstream.slow_seconds)
            count = len(documents)
            results = [
                {"index": index, "relevance_score": (index + 1) / count}
                for index in reversed(range(count))
            ]
            return self._send(200, {"results": results, "model": model})

        def _send(
            self,
            status: int,
            payload: Any,
            content_type: str = "application/json",
            headers: dict[str, str] | None = None,
        ):
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _counted(self, stream, *args) -> None:
            """Run a stream, counting it open; a reader that left is counted as a cut."""
            with upstream._lock:
                upstream.open_streams += 1
                upstream.max_open_streams = max(upstream.max_open_streams, upstream.open_streams)
            try:
                stream(*args)
            except (BrokenPipeError, ConnectionResetError):
                with upstream._lock:
                    upstream.streams_cut += 1
                upstream.stream_cut.set()
            finally:
                with upstream._lock:
                    upstream.open_streams -= 1

        def _break_off(self, model: str) -> None:
            """A stream that breaks: it promises more bytes than it sends, then hangs up."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(chunk(model, {"role": "assistant", "content": upstream.reply}))
            self.wfile.flush()
            self.close_connection = True

        def _stream(self, model: str, choices: int) -> None:
            """The reply word by word; with `n` above 1, each choice's chunks interleaved
            (each chunk carries one choice, by its index, as OpenAI streams them)."""
            self.send_response(200)
            for name, value in RATE_HEADERS.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            words = upstream.reply.split(" ")
            for number in range(choices):
                self.wfile.write(chunk(model, {"role": "assistant", "content": ""}, index=number))
            for index, word in enumerate(words):
                self.wfile.flush()
                if index == 1 and upstream.gate is not None:
                    upstream.gate.wait(60)
                time.sleep(upstream.chunk_delay)
                text = word if index == 0 else f" {word}"
                for number in range(choices):
                    self.wfile.write(chunk(model, {"content": text}, index=number))
            for number in range(choices):
                self.wfile.write(chunk(model, {}, "stop", index=number))
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

        def _stream_response(self, model: str) -> None:
            """The Responses API's events for one message, a text delta per word."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            place = {"item_id": "msg-fake", "output_index": 0, "content_index": 0}
            self.wfile.write(
                event({"type": "response.created", "response": response_object(model, "")})
            )
            words = upstream.reply.split(" ")
            for index, word in enumerate(words):
                delta = word if index == 0 else f" {word}"
                self.wfile.write(
                    event({"type": "response.output_text.delta", "delta": delta, **place})
                )
                self.wfile.flush()
                time.sleep(upstream.chunk_delay)
            if model == "cut-off":
                failed = response_object(model, "", status="failed")
                self.wfile.write(event({"type": "response.failed", "response": failed}))
            else:
                done = response_object(model, upstream.reply)
                self.wfile.write(event({"type": "response.completed", "response": done}))
            self.wfile.flush()

    return Handler


if __name__ == "__main__":  # a process of its own (bench/proxy_overhead.py): prints its URL
    served = FakeUpstream().start()
    print(served.base_url, flush=True)
    threading.Event().wait()
