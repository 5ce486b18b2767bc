"""Bounds on MCP sessions, so no client can fill the server's session table and lock the others out.

Why: the server keeps one stateful session per client connection (a cancellation must reach the session
running its call). The SDK's session manager refuses new sessions with HTTP 503 once its table is full and
forgets idle ones only after 30 minutes, so a script opening sessions in a loop locked the worker's
gateway out for that long. This ASGI middleware sits in front of the manager and keeps the table small:

- each client (its TCP peer address) holds at most `per_client` sessions;
- the whole server holds at most `total`;
- a session with no request for `idle_s` seconds is closed (by `run_expiry`, a background sweep, and on
  every request). The SDK's own idle timer never fires for a client that keeps its event stream (GET)
  open, so the bound counts requests, not open streams.

Opening a session never fails because of the bounds: the least recently used session (the client's own
first, then anyone's) is closed to make room. A flood therefore only churns the flooder's own sessions,
or, at worst, closes an idle session whose owner reconnects on its next call (the gateway does that when
the server answers 404 for its session). Sessions are closed the way a client closes one, with an HTTP
DELETE for its id handed to the manager, so only the SDK's public behaviour is relied on.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

SESSION_HEADER = b"mcp-session-id"
# Headers a DELETE needs to pass the manager's checks (Host for DNS-rebinding protection).
_KEPT_HEADERS = frozenset({b"host", b"origin", b"mcp-protocol-version"})


@dataclass(slots=True)
class _Session:
    client: str
    last_used: float
    headers: list[tuple[bytes, bytes]]


class SessionBounds:
    """ASGI middleware bounding live MCP sessions per client and in total, and expiring idle ones."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        per_client: int,
        total: int,
        idle_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_client < 1 or total < per_client or idle_s <= 0:
            raise ValueError("session bounds need 1 <= per_client <= total and idle_s > 0")
        self.app = app
        self.per_client = per_client
        self.total = total
        self.idle_s = idle_s
        self._clock = clock
        self._sessions: OrderedDict[str, _Session] = OrderedDict()  # least recently used first
        self._opening: dict[str, int] = {}  # per client, admitted but not yet answered
        self._lock = anyio.Lock()
        self.closed_for_room = 0
        self.closed_idle = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def sessions_of(self, client: str) -> int:
        return sum(1 for s in self._sessions.values() if s.client == client)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = _client(scope)
        session_id = _header(scope, SESSION_HEADER)
        await self._expire_idle()
        if session_id is None:
            await self._open(client, scope, receive, send)
            return
        known = self._sessions.get(session_id)
        if known is not None:
            known.last_used = self._clock()
            known.headers = _kept(scope)
            self._sessions.move_to_end(session_id)
        status = await _forward(self.app, scope, receive, send)
        if known is not None and session_id in self._sessions:
            known.last_used = self._clock()
        ended = scope.get("method") == "DELETE" and status is not None and status < 400
        if ended or status == 404:
            self._sessions.pop(session_id, None)

    async def run_expiry(self) -> None:
        """Close idle sessions every half idle period until cancelled (run it in the app's lifespan)."""
        while True:
            await anyio.sleep(min(self.idle_s / 2, 30.0))
            await self._expire_idle()

    async def _open(self, client: str, scope: Scope, receive: Receive, send: Send) -> None:
        async with self._lock:
            await self._make_room(client)
            self._opening[client] = self._opening.get(client, 0) + 1
        new_id: list[str] = []

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start" and message.get("status", 500) < 400:
                for name, value in message.get("headers", []):
                    if name.lower() == SESSION_HEADER:
                        new_id.append(value.decode("latin-1"))
            await send(message)

        try:
            await self.app(scope, receive, capture)
        finally:
            self._opening[client] -= 1
            if not self._opening[client]:
                del self._opening[client]
            if new_id:
                self._sessions[new_id[0]] = _Session(client, self._clock(), _kept(scope))

    async def _make_room(self, client: str) -> None:
        """Close least recently used sessions until one more (counting openings in flight) fits."""
        while self.sessions_of(client) + self._opening.get(client, 0) >= self.per_client:
            victim = next((sid for sid, s in self._sessions.items() if s.client == client), None)
            if victim is None:
                break
            await self._close(victim, "per-client bound")
        while self._sessions and len(self._sessions) + sum(self._opening.values()) >= self.total:
            await self._close(next(iter(self._sessions)), "server bound")

    async def _expire_idle(self) -> None:
        now = self._clock()
        while self._sessions:
            session_id, session = next(iter(self._sessions.items()))
            if now - session.last_used < self.idle_s:
                break
            self.closed_idle += 1
            await self._close(session_id, "idle")

    async def _close(self, session_id: str, why: str) -> None:
        """Forget the session and end it on the server with the same DELETE a client would send."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            return
        if why != "idle":
            self.closed_for_room += 1
        log.info("closing MCP session of %s (%s)", session.client, why)
        headers = [*session.headers, (SESSION_HEADER, session_id.encode("latin-1"))]
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "DELETE",
            "scheme": "http",
            "path": "/mcp",
            "raw_path": b"/mcp",
            "query_string": b"",
            "root_path": "",
            "headers": headers,
            "client": ("127.0.0.1", 0),
            "server": ("127.0.0.1", 0),
        }

        async def receive() -> Message:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(_message: Message) -> None:
            return None

        try:
            with anyio.fail_after(5):
                await self.app(scope, receive, discard)
        except Exception:  # the session may already be gone on the server: nothing to do
            log.debug("closing MCP session failed", exc_info=True)


def _client(scope: Scope) -> str:
    peer = scope.get("client")
    return str(peer[0]) if peer else "unknown"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return None


def _kept(scope: Scope) -> list[tuple[bytes, bytes]]:
    return [(k.lower(), v) for k, v in scope.get("headers", []) if k.lower() in _KEPT_HEADERS]


async def _forward(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> int | None:
    """Pass the request on and report the status it was answered with."""
    status: list[int] = []

    async def watch(message: Message) -> None:
        if message["type"] == "http.response.start":
            status.append(int(message.get("status", 0)))
        await send(message)

    await app(scope, receive, watch)
    return status[0] if status else None
