"""The ``/v1/realtime`` WebSocket endpoint: the handshake, and one connection per client socket.

It checks the bearer token like the real API (any non-empty key is accepted), then pumps client
messages into a :class:`~realtime_standin.session.RealtimeConnection` one at a time and writes its
server events out through a single ordered queue, recording both directions in the event log.

Connections are numbered from 1 in the order they open (the number tags their events and timings).
A closed connection stays readable (``connections``, its events, its timings) until
``KEEP_CLOSED_CONNECTIONS`` newer ones have closed, then it is forgotten: a test reads the few it
opened, while a stand-in serving a conversation after another for hours must not keep them all.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections import deque
from collections.abc import Callable

from aiohttp import WSMsgType, web

from .event_log import EventLog
from .options import ConnectionOptions
from .protocol import JsonDict
from .session import RealtimeConnection
from .timings import TurnTimings

logger = logging.getLogger("realtime_standin")

KEEP_CLOSED_CONNECTIONS = 8
"""Closed connections kept readable: a test's reconnects (the plugin retries three times) several times over."""


class RealtimeEndpoint(EventLog):
    """The WebSocket side of :class:`~realtime_standin.server.RealtimeStandIn` (which sets these)."""

    options: ConnectionOptions
    connections: list[RealtimeConnection]
    """Open connections and the most recent closed ones, in the order they opened."""
    opened_connections: int
    """Connections opened so far: the number of the latest one."""
    _closed: deque[tuple[int, RealtimeConnection]]
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
        number, conn = self._open_connection(request.query.get("model", "gpt-realtime"), outbox)
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
            self._retire(number, conn)
            self._notify()
            logger.info("client disconnected")
        return ws

    def _open_connection(self, model: str, outbox: asyncio.Queue[JsonDict | None]) -> tuple[int, RealtimeConnection]:
        """A new connection and its number; its server events are recorded, then queued for the socket writer."""
        self.opened_connections += 1
        number = self.opened_connections

        def send(event: JsonDict) -> None:
            self._record_sent(event, number)
            logger.debug("server event %s", event.get("type"))
            outbox.put_nowait(event)

        conn = RealtimeConnection(model=model, options=self.options, send=send)
        self.connections.append(conn)
        logger.info("client connected (connection %d)", number)
        return number, conn

    def _retire(self, number: int, conn: RealtimeConnection) -> None:
        """A connection closed: forget the oldest closed one once more than the kept number have closed."""
        self._closed.append((number, conn))
        while len(self._closed) > KEEP_CLOSED_CONNECTIONS:
            old_number, old = self._closed.popleft()
            self.connections.remove(old)
            self.received.forget(old_number)
            self.sent.forget(old_number)
            self.timings.forget_entries(old_number)

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
                self._record_received(event, number)
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
