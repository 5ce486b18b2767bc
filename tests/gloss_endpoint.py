"""A local stand-in of OpenAI's Chat Completions endpoint for `import --write-glosses`, driven by the real SDK.

It answers structured-output requests (a `json_schema` response format) with glosses derived from the article
text it was sent: each gloss carries a made-up word hashed from that text, so a test can search for it and expect
its article and no other. Failures are scripted per request number (1-based, counting every request received):
a status with a body and headers, a dropped connection, or a reply that breaks the schema. Replies can be held
back (a slow model) and their counted tokens set (a big bill).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.ports import free_port

QUOTA_BODY = {
    "error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}
}
AUTH_BODY = {
    "error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}
}


@dataclass
class Failure:
    status: int = 500
    body: dict[str, Any] = field(default_factory=lambda: {"error": {"message": "boom", "type": "server_error"}})
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False  # close the connection without an answer
    malformed: bool = False  # 200, but content that is not the schema


def made_up_word(text: str) -> str:
    """Letters only, so no tokenizer splits it: unique to the article text that was sent."""
    return "zq" + "".join(chr(ord("a") + int(c, 16)) for c in hashlib.sha256(text.encode()).hexdigest()[:10])


def glosses_for(user_text: str) -> dict[str, list[str]]:
    word = made_up_word(user_text)
    first = " ".join(user_text.split("\n", 2)[-1].split()[:6]).lower()
    return {
        "preguntas": [f"a quien le reclamo lo del {word} del huerto y la biblioteca de mi barrio"],
        "situaciones": [f"a mi me paso lo del {word} y no se que hacer", f"mi vecina dice {first}"],
        "sinonimos": [f"{word} arreglo vecinal"],
    }


class GlossEndpoint:
    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.requests: list[str] = []  # the user message of each request, in order
        self.times: list[float] = []
        self.failures: dict[int, Failure] = {}
        self.fail_from: tuple[int, Failure] | None = None  # every request from this number on fails
        self.schemas: list[dict[str, Any]] = []
        self.hold: threading.Event | None = None  # replies wait until it is set: a slow model, as long as a test needs
        self.prompt_tokens: int | None = None  # what the reply says was counted, when a test needs a big bill
        self.active = 0  # requests received and not yet answered
        self.most_active = 0  # the most at once
        self.answered: list[float] = []  # when each reply (or failure) went out
        self.delay_s = 0.0  # every reply takes this long: a model's seconds, shortened

    def failure_for(self, n: int) -> Failure | None:
        if n in self.failures:
            return self.failures[n]
        if self.fail_from and n >= self.fail_from[0]:
            return self.fail_from[1]
        return None

    async def completions(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        self.requests.append(user)
        self.times.append(time.monotonic())
        self.schemas.append(body.get("response_format", {}))
        failure = self.failure_for(len(self.requests))
        self.active += 1
        self.most_active = max(self.most_active, self.active)
        try:
            if self.hold is not None:
                await asyncio.get_running_loop().run_in_executor(None, self.hold.wait)
            await asyncio.sleep(self.delay_s)
            return self._answer(request, body, user, failure)
        finally:
            self.active -= 1
            self.answered.append(time.monotonic())

    def _answer(self, request: web.Request, body: dict[str, Any], user: str, failure: Failure | None) -> web.Response:
        if failure and failure.drop:
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        if failure and not failure.malformed:
            return web.json_response(failure.body, status=failure.status, headers=failure.headers)
        content = '{"preguntas": "no es una lista"' if failure else json.dumps(glosses_for(user), ensure_ascii=False)
        reply = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": self.prompt_tokens if self.prompt_tokens is not None else len(user) // 4 + 300,
                "completion_tokens": 120,
                "total_tokens": 0,
            },
        }
        return web.json_response(reply)


@contextmanager
def running() -> Iterator[GlossEndpoint]:
    """The stand-in on a loopback port, served from its own thread (the CLI under test is synchronous)."""
    endpoint = GlossEndpoint()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", endpoint.completions)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(runner.setup())
        loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", endpoint.port).start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(10)
    try:
        yield endpoint
    finally:
        if endpoint.hold is not None:
            endpoint.hold.set()  # a held reply would keep the cleanup waiting
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
