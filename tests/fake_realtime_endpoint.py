"""A Realtime endpoint that fails the way the real one does, for driving the real plugin into each fault.

Two behaviours, switchable while running (`GET /v1/models/{model}` follows the same refusal, for the
doctor's key check):
- refuse every WebSocket handshake with an HTTP status and an OpenAI-shaped error body (401 bad key,
  403 no access, 404 unknown model, 429 quota, 503 overloaded), counting the attempts;
- forward each connection to an upstream Realtime server (the local stand-in) until `drop()`, which
  closes the open connections the way a dying network does and refuses the reconnects that follow
  (or lets them through again with `drop(refuse=None)`).

Loopback only.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import aiohttp
from aiohttp import WSMsgType, web

ERROR_BODIES: dict[int, dict[str, Any]] = {
    401: {
        "message": "Incorrect API key provided: sk-test****. You can find your API key at the dashboard.",
        "type": "invalid_request_error",
        "code": "invalid_api_key",
    },
    403: {
        "message": "Project does not have access to model gpt-realtime.",
        "type": "invalid_request_error",
        "code": "model_not_found",
    },
    404: {"message": "The model does not exist.", "type": "invalid_request_error", "code": "model_not_found"},
    429: {"message": "You exceeded your current quota.", "type": "insufficient_quota", "code": "insufficient_quota"},
    503: {"message": "The engine is currently overloaded.", "type": "server_error", "code": None},
}


class FakeRealtimeEndpoint:
    """`base_url` goes into OPENAI_BASE_URL; `handshakes` counts every connection attempt."""

    def __init__(
        self, *, refuse: int | None = None, upstream: str | None = None, models: tuple[str, ...] = ("gpt-realtime",)
    ) -> None:
        self.refuse = refuse
        self.models = models
        self.upstream = upstream
        self.handshakes = 0
        self.forwarded = 0
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._client_sockets: set[web.WebSocketResponse] = set()
        self._changed = asyncio.Event()
        self._http: aiohttp.ClientSession | None = None

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise RuntimeError("endpoint not started")
        return f"http://127.0.0.1:{self._port}/v1"

    async def __aenter__(self) -> FakeRealtimeEndpoint:
        app = web.Application()
        app.router.add_get("/v1/realtime", self._handshake)
        app.router.add_get("/v1/models/{model}", self._model)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])
        self._http = aiohttp.ClientSession()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for ws in list(self._client_sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._http is not None:
            await self._http.close()

    async def drop(self, *, refuse: int | None = 503) -> None:
        """Cut every open connection; later handshakes get `refuse` (None: forwarded again)."""
        self.refuse = refuse
        for ws in list(self._client_sockets):
            await ws.close(code=1011, message=b"upstream connection lost")

    async def wait_for_handshakes(self, count: int, *, timeout_s: float = 15.0) -> None:
        async with asyncio.timeout(timeout_s):
            while self.handshakes < count:
                changed = self._changed
                await changed.wait()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _model(self, request: web.Request) -> web.Response:
        """`GET /v1/models/{model}` as OpenAI answers it: the refusal status, 404 for an unknown model."""
        status = self.refuse or (200 if request.match_info["model"] in self.models else 404)
        if status == 200:
            return web.json_response({"id": request.match_info["model"], "object": "model"})
        body = ERROR_BODIES.get(status, {"message": "error", "type": "server_error", "code": None})
        return web.json_response({"error": body}, status=status)

    async def _handshake(self, request: web.Request) -> web.StreamResponse:
        self.handshakes += 1
        self._notify()
        if self.refuse is not None:
            body = ERROR_BODIES.get(self.refuse, {"message": "error", "type": "server_error", "code": None})
            return web.json_response({"error": body}, status=self.refuse)
        return await self._forward(request)

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        if self.upstream is None or self._http is None:
            return web.json_response({"error": ERROR_BODIES[503]}, status=503)
        url = self.upstream.replace("http://", "ws://").rstrip("/") + "/realtime?" + request.query_string
        headers = {"Authorization": request.headers.get("Authorization", "")}
        upstream = await self._http.ws_connect(url, headers=headers, max_msg_size=16 * 1024 * 1024)
        client = web.WebSocketResponse(heartbeat=None, max_msg_size=16 * 1024 * 1024)
        await client.prepare(request)
        self._client_sockets.add(client)
        self.forwarded += 1
        self._notify()

        async def pump(src: Any, dst: Any) -> None:
            async for msg in src:
                if msg.type != WSMsgType.TEXT or dst.closed:
                    return
                await dst.send_str(msg.data)

        tasks = [asyncio.create_task(pump(client, upstream)), asyncio.create_task(pump(upstream, client))]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            with contextlib.suppress(Exception):
                await upstream.close()
            self._client_sockets.discard(client)
            if not client.closed:
                await client.close()
        return client
