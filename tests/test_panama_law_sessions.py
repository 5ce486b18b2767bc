"""The search server's MCP sessions are bounded per client and in total, and idle ones expire; the worker's
gateway (the real `McpGateway`) keeps searching through a flood of session openings and recovers when the
server has expired its session.

Each client is a distinct loopback address (127.0.0.2, 127.0.0.3, ...): the server tells clients apart by
their TCP peer, exactly as it would tell two machines apart.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn

from agent.devstack.livekit_server import wait_http
from agent.mcp.gateway import GatewayOptions, McpGateway
from panama_law.serve.server import ServerState, SessionLimits, build_app
from panama_law.serve.sessions import SessionBounds, client_of

TOKEN = "token-de-prueba-sesiones"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "0"}},
}


class _NoHits:
    """A searcher that finds nothing: a valid, empty answer, so the test needs no index."""

    article_count = 0

    def search(self, query: str) -> list[Any]:
        return []


@dataclass
class RunningServer:
    url: str
    server: uvicorn.Server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    async def start(limits: SessionLimits) -> RunningServer:
        state = ServerState()
        state.set(_NoHits())  # type: ignore[arg-type]
        port = _free_port()
        # listen on every loopback address so 127.0.0.2 and friends can connect as other clients
        config = uvicorn.Config(
            build_app(state, token=TOKEN, limits=limits), host="127.0.0.1", port=port, log_level="warning"
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers.append((server, thread))
        await asyncio.to_thread(wait_http, f"http://127.0.0.1:{port}/healthz", ok_only=True, timeout=30)
        return RunningServer(url=f"http://127.0.0.1:{port}/mcp", server=server)

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
async def gateway_factory() -> AsyncIterator[Any]:
    made: list[McpGateway] = []

    def make(url: str) -> McpGateway:
        gw = McpGateway(GatewayOptions(url=url, token=TOKEN, connects_per_minute=10))
        made.append(gw)
        return gw

    yield make
    for gw in made:
        await gw.aclose()


async def _open_sessions(url: str, source: str, count: int) -> list[tuple[int, str | None]]:
    """Open `count` sessions from `source` the way a flooding script does: initialize, then walk away."""
    transport = httpx.AsyncHTTPTransport(local_address=source)
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    out: list[tuple[int, str | None]] = []
    async with httpx.AsyncClient(transport=transport, timeout=10) as http:
        for _ in range(count):
            resp = await http.post(url, json=INITIALIZE, headers=headers)
            out.append((resp.status_code, resp.headers.get("mcp-session-id")))
    return out


async def _session_status(url: str, source: str, session_id: str) -> int:
    """What the server answers for `session_id` now (404 once it has forgotten the session)."""
    transport = httpx.AsyncHTTPTransport(local_address=source)
    async with httpx.AsyncClient(transport=transport, timeout=10) as http:
        resp = await http.post(
            url,
            json={"jsonrpc": "2.0", "id": 2, "method": "ping"},
            headers={
                "Authorization": f"Bearer {TOKEN}",
                "Accept": "application/json, text/event-stream",
                "Mcp-Session-Id": session_id,
                "Mcp-Protocol-Version": "2025-06-18",
            },
        )
        return resp.status_code


async def test_a_session_flood_cannot_lock_out_the_gateway(serve: Any, gateway_factory: Any) -> None:
    running = await serve(SessionLimits(per_client=4, total=12, idle_s=300))
    gw = gateway_factory(running.url)
    assert (await gw.search({"query": "idioma oficial"})).sources == []
    assert gw.connects == 1

    # One flooder, far more sessions than the whole table holds: every opening is answered, none with 503,
    # and only the flooder's own sessions are churned.
    flood = await _open_sessions(running.url, "127.0.0.2", 300)
    assert {status for status, _ in flood} == {200}
    first_id = flood[0][1]
    assert first_id is not None
    assert await _session_status(running.url, "127.0.0.2", first_id) == 404  # closed to make room
    assert await _session_status(running.url, "127.0.0.2", flood[-1][1] or "") == 200  # the newest lives

    assert (await gw.search({"query": "idioma oficial"})).sources == []
    assert gw.connects == 1  # the gateway's own session was never touched

    # Many flooders together exceed the server's total: room is taken from the largest holders only, so the
    # gateway's one session is never closed.
    floods = await asyncio.gather(*(_open_sessions(running.url, f"127.0.0.{n}", 40) for n in range(3, 8)))
    assert {status for flood in floods for status, _ in flood} == {200}
    assert (await gw.search({"query": "idioma oficial"})).sources == []
    assert gw.connects == 1


async def test_many_addresses_flooding_cannot_close_another_clients_live_session(serve: Any) -> None:
    """The probe: 40 addresses opening 16 sessions each (640) against the default table of 256."""
    running = await serve(SessionLimits())
    [(status, victim)] = await _open_sessions(running.url, "127.0.0.2", 1)
    assert status == 200 and victim is not None

    floods = await asyncio.gather(*(_open_sessions(running.url, f"127.0.1.{n}", 16) for n in range(1, 41)))
    assert {status for flood in floods for status, _ in flood} == {200}  # nobody refused: flooders churn their own

    assert await _session_status(running.url, "127.0.0.2", victim) == 200


async def test_a_newcomer_is_refused_rather_than_closing_a_client_within_its_share(serve: Any) -> None:
    running = await serve(SessionLimits(per_client=1, total=2, idle_s=300))
    [(_, first)] = await _open_sessions(running.url, "127.0.0.2", 1)
    [(_, second)] = await _open_sessions(running.url, "127.0.0.3", 1)

    transport = httpx.AsyncHTTPTransport(local_address="127.0.0.4")
    async with httpx.AsyncClient(transport=transport, timeout=10) as http:
        refused = await http.post(
            running.url,
            json=INITIALIZE,
            headers={
                "Authorization": f"Bearer {TOKEN}",
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
            },
        )
    assert refused.status_code == 503
    assert 1 <= int(refused.headers["retry-after"]) <= 300
    assert await _session_status(running.url, "127.0.0.2", first or "") == 200
    assert await _session_status(running.url, "127.0.0.3", second or "") == 200


@pytest.mark.parametrize(
    ("peer", "client"),
    [
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:db8:1:2:ffff::9", "2001:db8:1:2::/64"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("::1", "::1"),
        ("192.0.2.7", "192.0.2.7"),
    ],
)
def test_an_ipv6_host_is_one_client_per_64_block(peer: str, client: str) -> None:
    assert client_of({"type": "http", "client": (peer, 1234)}) == client


async def test_the_gateway_recovers_when_its_session_is_expired(serve: Any, gateway_factory: Any) -> None:
    # 2 s: the gateway's connect is several requests, and a loaded host can leave half a second between two
    running = await serve(SessionLimits(per_client=4, total=12, idle_s=2.0))
    gw = gateway_factory(running.url)
    await gw.search({"query": "idioma oficial"})
    assert gw.connects == 1

    # Wait for the server to report the idle session expired (an event from its log, not a sleep).
    expired = threading.Event()

    class _Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "idle" in record.getMessage():
                expired.set()

    watch = _Watch()
    watched = [logging.getLogger("mcp.server.streamable_http_manager"), logging.getLogger("panama_law.serve.sessions")]
    for lg in watched:
        lg.addHandler(watch)
        lg.setLevel(logging.INFO)
    try:
        assert await asyncio.to_thread(expired.wait, 10), "the idle session was never expired"
    finally:
        for lg in watched:
            lg.removeHandler(watch)

    assert (await gw.search({"query": "idioma oficial"})).sources == []
    assert gw.connects == 2  # it noticed the expired session and opened a new one


class _SlowCallApp:
    """An MCP endpoint double: `initialize` opens session s<n>; a call holds until released; DELETE is recorded."""

    def __init__(self) -> None:
        self.opened = 0
        self.deleted: list[str] = []
        self.release = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        session = dict(scope["headers"]).get(b"mcp-session-id")
        headers: list[tuple[bytes, bytes]] = []
        if scope["method"] == "DELETE":
            self.deleted.append(session.decode())
        elif session is None:
            self.opened += 1
            headers.append((b"mcp-session-id", f"s{self.opened}".encode()))
        else:
            await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"{}"})


def _request(method: str, peer: str, session: str | None = None) -> dict[str, Any]:
    headers = [(b"host", b"127.0.0.1")] + ([(b"mcp-session-id", session.encode())] if session else [])
    return {"type": "http", "method": method, "headers": headers, "client": (peer, 5000), "path": "/mcp"}


async def _ask(bounds: SessionBounds, scope: dict[str, Any]) -> None:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(_message: Any) -> None:
        return None

    await bounds(scope, receive, send)


async def test_a_session_with_a_call_in_flight_is_not_closed_as_idle() -> None:
    """A search slower than the idle period (or a busy host between a client's requests) must not have its
    session closed under it: the client would get a 500 for a call the server was still answering."""
    now = [0.0]
    app = _SlowCallApp()
    bounds = SessionBounds(app, per_client=4, total=8, idle_s=1.0, clock=lambda: now[0])
    await _ask(bounds, _request("POST", "192.0.2.1"))  # opens s1
    call = asyncio.create_task(_ask(bounds, _request("POST", "192.0.2.1", "s1")))
    await asyncio.sleep(0)
    stream = asyncio.create_task(_ask(bounds, _request("GET", "192.0.2.1", "s1")))  # an open event stream
    await asyncio.sleep(0)

    now[0] = 30.0  # far past the idle period, the call still running
    try:
        await _ask(bounds, _request("POST", "192.0.2.2"))  # any request sweeps idle sessions
        assert app.deleted == [] and bounds.sessions_of("192.0.2.1") == 1
    finally:
        app.release.set()
        await asyncio.gather(call, stream)
    now[0] = 60.0  # idle now: nothing in flight since t=30
    await _ask(bounds, _request("POST", "192.0.2.3"))
    assert sorted(app.deleted) == ["s1", "s2"]  # the event stream alone does not keep a session alive


def test_session_limits_are_settings_with_sane_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    from panama_law.settings import ServerSettings

    defaults = ServerSettings()
    assert 1 <= defaults.max_sessions_per_client <= 64
    assert defaults.max_sessions_per_client <= defaults.max_sessions <= 10_000
    assert 0 < defaults.session_idle_timeout_s <= 1800
    monkeypatch.setenv("PANAMA_LAW_MAX_SESSIONS_PER_CLIENT", "50")
    monkeypatch.setenv("PANAMA_LAW_MAX_SESSIONS", "10")
    with pytest.raises(ValueError, match="PANAMA_LAW_MAX_SESSIONS_PER_CLIENT"):
        ServerSettings()
