"""Bounds on MCP sessions, so no client can fill the server's session table and lock the others out.

Why: the server keeps one stateful session per client connection (a cancellation must reach the session
running its call). The SDK's session manager refuses new sessions with HTTP 503 once its table is full and
forgets idle ones only after 30 minutes, so a script opening sessions in a loop locked the worker's
gateway out for that long. This ASGI middleware sits in front of the manager and keeps the table small:

- each client holds at most `per_client` sessions; a client is its TCP peer address, and for IPv6 its /64
  network, the block one host is routinely given (one machine could otherwise be thousands of clients);
- the whole server holds at most `total`;
- a session with no request for `idle_s` seconds is closed (by `run_expiry`, a background sweep, and on
  every request). The SDK's own idle timer never fires for a client that keeps its event stream (GET)
  open, so the bound counts requests, not open streams. A session with a request in flight (other than
  that stream) is never idle: closing it would fail the call the client is waiting for.

A client at its own bound makes room by closing its own least recently used session. When the whole table
is full, room is taken only from the client(s) holding the most sessions, and only while they hold at least
two more than the newcomer: the newcomer may grow to, never past, what the largest holder keeps. Otherwise the
newcomer closes its own oldest session, or, holding none, is refused with 503 and a Retry-After of when the
oldest session will have gone idle. Why: the table used to close the least recently used session of anyone, so
40 addresses opening 16 sessions each (640 against 256) closed the worker's gateway's one live session, which
a flood from enough addresses can always outrun. With this rule a client is never closed below the count of
the client asking, so a client within its fair share (the table divided among the clients holding sessions)
keeps its sessions: to lose its k sessions, every client would have to hold k and the table still be full. A
flood churns the flooders' sessions among themselves, and a newcomer is refused only when every session
belongs to a different client. Sessions are closed the way a client closes one, with an HTTP DELETE for its
id handed to the manager, so only the SDK's public behaviour is relied on.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import anyio
from starlette.responses import JSONResponse
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
    in_flight: int = 0  # requests being answered, the event stream (GET) apart


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
        self._held: Counter[str] = Counter()  # sessions per client
        self._opening: dict[str, int] = {}  # per client, admitted but not yet answered
        self._lock = anyio.Lock()
        self.closed_for_room = 0
        self.closed_idle = 0
        self.refused = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def sessions_of(self, client: str) -> int:
        return self._held[client]

    def _add(self, session_id: str, session: _Session) -> None:
        self._forget(session_id)
        self._sessions[session_id] = session
        self._held[session.client] += 1

    def _forget(self, session_id: str) -> _Session | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self._held[session.client] -= 1
            if not self._held[session.client]:
                del self._held[session.client]
        return session

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = client_of(scope)
        session_id = _header(scope, SESSION_HEADER)
        await self._expire_idle()
        if session_id is None:
            await self._open(client, scope, receive, send)
            return
        known = self._sessions.get(session_id)
        counted = known is not None and scope.get("method") != "GET"
        if known is not None:
            known.last_used = self._clock()
            known.headers = _kept(scope)
            known.in_flight += int(counted)
            self._sessions.move_to_end(session_id)
        try:
            status = await _forward(self.app, scope, receive, send)
        finally:
            if known is not None:
                known.in_flight -= int(counted)
        if known is not None and session_id in self._sessions:
            known.last_used = self._clock()
        ended = scope.get("method") == "DELETE" and status is not None and status < 400
        if ended or status == 404:
            self._forget(session_id)

    async def run_expiry(self) -> None:
        """Close idle sessions every half idle period until cancelled (run it in the app's lifespan)."""
        while True:
            await anyio.sleep(min(self.idle_s / 2, 30.0))
            await self._expire_idle()

    async def _open(self, client: str, scope: Scope, receive: Receive, send: Send) -> None:
        async with self._lock:
            admitted = await self._make_room(client)
            if admitted:
                self._opening[client] = self._opening.get(client, 0) + 1
        if not admitted:
            self.refused += 1
            log.info("refused an MCP session to %s: every session belongs to a client holding no more", client)
            refusal = JSONResponse(
                {"error": "too many open sessions; retry later"},
                status_code=503,
                headers={"Retry-After": str(self._retry_after_s())},
            )
            await refusal(scope, receive, send)
            return
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
                self._add(new_id[0], _Session(client, self._clock(), _kept(scope)))

    async def _make_room(self, client: str) -> bool:
        """Close sessions until one more for `client` (counting openings in flight) fits; False: refuse it.

        The client's own least recently used first while it is at `per_client`; then, while the table is full,
        the least recently used session of a largest holder holding at least two more than `client`, else
        `client`'s own; with none of its own, the newcomer is refused (see the module's docstring for why)."""
        while self._held[client] + self._opening.get(client, 0) >= self.per_client:
            if not await self._close_oldest_of(client, "per-client bound"):
                break
        while self._sessions and len(self._sessions) + sum(self._opening.values()) >= self.total:
            mine = self._held[client] + self._opening.get(client, 0)
            largest = max(self._held.values())
            if largest >= mine + 2:
                victim = next(sid for sid, s in self._sessions.items() if self._held[s.client] == largest)
                await self._close(victim, "server bound, largest holder")
            elif not await self._close_oldest_of(client, "server bound, own session"):
                return False
        return True

    async def _close_oldest_of(self, client: str, why: str) -> bool:
        victim = next((sid for sid, s in self._sessions.items() if s.client == client), None)
        if victim is None:
            return False
        await self._close(victim, why)
        return True

    def _retry_after_s(self) -> int:
        """Whole seconds until the least recently used session will have gone idle (when its place frees)."""
        oldest = next(iter(self._sessions.values()), None)
        wait = self.idle_s - (self._clock() - oldest.last_used) if oldest is not None else 1.0
        return max(1, min(math.ceil(wait), math.ceil(self.idle_s)))

    async def _expire_idle(self) -> None:
        now = self._clock()
        for session_id, session in list(self._sessions.items()):  # least recently used first
            if now - session.last_used < self.idle_s:
                break
            if session.in_flight or session_id not in self._sessions:
                continue
            self.closed_idle += 1
            await self._close(session_id, "idle")

    async def _close(self, session_id: str, why: str) -> None:
        """Forget the session and end it on the server with the same DELETE a client would send."""
        session = self._forget(session_id)
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


def client_of(scope: Scope) -> str:
    """The peer's address; for IPv6 its /64 network (an IPv4-mapped address counts as the IPv4 one)."""
    peer = scope.get("client")
    if not peer:
        return "unknown"
    try:
        address = ipaddress.ip_address(str(peer[0]))
    except ValueError:
        return str(peer[0])
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        if not address.is_loopback:
            return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


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
