"""A slow OpenAI-compatible provider in a process of its own, for bench/concurrency.py.

On an event loop (uvicorn), so that thousands of open streams cost it little: a streamed chat
sends a word every `--chunk-seconds` for `--stream-seconds`, then `data: [DONE]`; a chat that
is not streamed answers at once. GET /stats tells how many streams are open now, the most
that were open at once, and how many ended early because the other side closed them.
`python bench/slow_provider.py` prints its base URL, then serves until killed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket

import uvicorn

WORD = "word"


class SlowProvider:
    def __init__(self, chunk_seconds: float, stream_seconds: float) -> None:
        self.chunk_seconds = chunk_seconds
        self.chunks = max(1, round(stream_seconds / chunk_seconds))
        self.open = 0
        self.max_open = 0
        self.closed_early = 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        if scope["path"].endswith("/stats"):
            stats = {
                "open": self.open,
                "max_open": self.max_open,
                "closed_early": self.closed_early,
            }
            return await _json(send, stats)
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        request = json.loads(body or b"{}")
        if not request.get("stream"):
            return await _json(send, completion(request.get("model", "m"), WORD))
        await self._stream(request.get("model", "m"), receive, send)

    async def _stream(self, model: str, receive, send) -> None:
        self.open += 1
        self.max_open = max(self.max_open, self.open)
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            for number in range(self.chunks):
                text = WORD if number == 0 else f" {WORD}"
                await send(_body(chunk(model, {"content": text})))
                await asyncio.wait([gone], timeout=self.chunk_seconds)
                if gone.done():
                    self.closed_early += 1
                    return
            await send(_body(chunk(model, {}, "stop") + b"data: [DONE]\n\n"))
            await send({"type": "http.response.body", "body": b""})
        finally:
            gone.cancel()
            self.open -= 1


async def _disconnected(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def chunk(model: str, delta: dict, finish: str | None = None) -> bytes:
    payload = {
        "id": "chatcmpl-slow",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(payload)}\n\n".encode()


def completion(model: str, text: str) -> dict:
    return {
        "id": "chatcmpl-slow",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _body(data: bytes) -> dict:
    return {"type": "http.response.body", "body": data, "more_body": True}


async def _json(send, payload) -> None:
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunk-seconds", type=float, default=0.25)
    parser.add_argument("--stream-seconds", type=float, default=15.0)
    args = parser.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)
    config = uvicorn.Config(
        SlowProvider(args.chunk_seconds, args.stream_seconds),
        log_level="warning",
        backlog=4096,
        timeout_keep_alive=60,
    )
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
