"""The ``/v1/realtime`` WebSocket endpoint: the handshake, and one connection per client socket.

It checks the bearer token like the real API (any non-empty key is accepted), then pumps client
messages into a :class:`~realtime_standin.session.RealtimeConnection` one at a time and writes its
server events out through a single ordered queue, recording both directions in the event log.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable

from aiohttp import WSMsgType, web

from .event_log import EventLog
from .options import ConnectionOptions
from .protocol import JsonDict
from .session import RealtimeConnection
from .timings import TurnTimings

logger = logging.getLogger("realtime_standin")


class RealtimeEndpoint(EventLog):
    """The WebSocket side of :class:`~realtime_standin.server.RealtimeStandIn` (which sets these)."""

    options: ConnectionOptions
    connections: list[RealtimeConnection]
    rejected_handshakes: int
    timings: TurnTimings
    _sockets: set[web.WebSocketResponse]

    @staticmethod
    def _auth_ok(request: web.Request) -> bool:
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        return scheme.lower() == "bearer" and bool(token.strip())

    async def _ws_handler(self, request: web.Request) -> web.StreamResponse:
        if not self._auth_ok(request):
            self.rejected_handshakes += 1
            self._notify()
            return _missing_key_response()
        ws = web.WebSocketResponse(heartbeat=None, max_msg_size=16 * 1024 * 1024)
        await ws.prepare(request)
        self._sockets.add(ws)
        outbox: asyncio.Queue[JsonDict | None] = asyncio.Queue()
        conn = self._open_connection(request.query.get("model", "gpt-realtime"), outbox)
        number = len(self.connections)
        written = functools.partial(self.timings.written, number)
        writer_task = asyncio.create_task(_write_events(ws, outbox, written), name="standin-writer")
        conn.start()
        self._notify()
        try:
            await self._read_events(ws, conn, number)
        finally:
            conn.close()
            self.timings.forget(number)
            outbox.put_nowait(None)
            writer_task.cancel()
            await asyncio.gather(writer_task, return_exceptions=True)
            self._sockets.discard(ws)
            self._notify()
            logger.info("client disconnected")
        return ws

    def _open_connection(self, model: str, outbox: asyncio.Queue[JsonDict | None]) -> RealtimeConnection:
        """A connection whose server events are recorded, then queued for the socket writer."""

        def send(event: JsonDict) -> None:
            self._record_sent(event)
            logger.debug("server event %s", event.get("type"))
            outbox.put_nowait(event)

        conn = RealtimeConnection(model=model, options=self.options, send=send)
        self.connections.append(conn)
        logger.info("client connected (connection %d)", len(self.connections))
        return conn

    async def _read_events(self, ws: web.WebSocketResponse, conn: RealtimeConnection, number: int) -> None:
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            received_at = self.timings.now()
            try:
                event = json.loads(msg.data)
            except ValueError:
                conn.handle(msg.data)  # answers with an error event
                continue
            if isinstance(event, dict):
                self._record_received(event)
            before = conn.active_response
            conn.handle(event)
            started = conn.active_response
            if started is not None and started is not before and event.get("type") == "response.create":
                self.timings.response_requested(number, started.id, received_at)


def _missing_key_response() -> web.Response:
    """The real API's answer to a handshake without a bearer token."""
    return web.json_response(
        {
            "error": {
                "message": "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        },
        status=401,
    )


async def _write_events(
    ws: web.WebSocketResponse, outbox: asyncio.Queue[JsonDict | None], written: Callable[[JsonDict], None]
) -> None:
    while (event := await outbox.get()) is not None:
        if ws.closed:
            return
        await ws.send_str(json.dumps(event, ensure_ascii=False))
        written(event)  # after the write: what the stand-in took to get it out counts as its own time
