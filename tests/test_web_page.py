"""The page service's page: the built page and its assets with security headers, refused paths, a page not
built yet, and the read timeouts that close connections whose headers or body never arrive."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest
from aiohttp import web

from agent.settings import Settings
from agent.web.app import create_app
from agent.web.limits import runner_options
from agent.web.static import content_security_policy
from tests.web_app import ClientFactory, make_settings


async def test_serves_index_and_assets_with_security_headers(make_client: ClientFactory) -> None:
    client = await make_client()
    resp = await client.get("/")
    assert resp.status == 200
    assert "<title>Lexvoz</title>" in await resp.text()
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert resp.headers["Referrer-Policy"] == "no-referrer"
    csp = resp.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp
    assert "ws://127.0.0.1:7880" in csp
    assert "'unsafe-eval'" not in csp and "'unsafe-inline'" not in csp

    resp = await client.get("/assets/index-abc123.js")
    assert resp.status == 200
    assert "immutable" in resp.headers["Cache-Control"]
    assert "javascript" in resp.content_type


async def test_static_refuses_traversal_hidden_and_missing(make_client: ClientFactory) -> None:
    client = await make_client()
    for path in ("/../outside.txt", "/assets/../../outside.txt", "/%2e%2e/outside.txt", "/.hidden", "/nope.js"):
        resp = await client.get(path)
        assert resp.status == 404, path
        assert "outside" not in await resp.text()
        assert resp.headers["X-Content-Type-Options"] == "nosniff"


async def test_missing_page_is_a_clear_503(make_client: ClientFactory, tmp_path: Path) -> None:
    client = await make_client(static_dir=tmp_path / "not-built")
    resp = await client.get("/")
    assert resp.status == 503
    assert "make web" in await resp.text()
    assert resp.headers["Content-Security-Policy"]
    # The API still works without the page.
    assert (await client.post("/api/session")).status == 200


def test_csp_allows_secure_livekit_origins() -> None:
    csp = content_security_policy(make_settings(LEXVOZ_PUBLIC_LIVEKIT_URL="wss://lk.example.test:7443"))
    connect = next(d for d in csp.split("; ") if d.startswith("connect-src"))
    assert connect == "connect-src 'self' wss://lk.example.test:7443 https://lk.example.test:7443"


async def test_odd_page_paths_are_404_not_500(make_client: ClientFactory, caplog: pytest.LogCaptureFixture) -> None:
    """A NUL byte or a control character in the path used to raise inside the resolver: 500 and a traceback."""
    caplog.set_level(logging.DEBUG)
    client = await make_client()
    for path in ("/%00", "/index.html%00.js", "/assets/%00/x", "/%01", "/a%7Fb", "/a%5C..%5Coutside.txt"):
        resp = await client.get(path)
        assert resp.status == 404, path
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


async def _serve(settings: Settings, dist: Path) -> tuple[web.AppRunner, int]:
    """The app under the same server options `main` uses."""
    runner = web.AppRunner(create_app(settings, static_dir=dist), **runner_options(settings))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None and server.sockets  # type: ignore[attr-defined]
    return runner, int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]


async def test_half_open_connections_are_closed_after_the_header_timeout(dist: Path) -> None:
    """Connections that never finish their headers are dropped after LEXVOZ_WEB_HEADER_TIMEOUT_S."""
    runner, port = await _serve(make_settings(LEXVOZ_WEB_HEADER_TIMEOUT_S=0.5), dist)
    try:
        conns = [await asyncio.open_connection("127.0.0.1", port) for _ in range(30)]
        for i, (_reader, writer) in enumerate(conns):
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n" if i % 2 else b"")  # partial headers, or nothing
            await writer.drain()
        started = time.monotonic()
        async with asyncio.timeout(10):
            closed = await asyncio.gather(*(reader.read() for reader, _ in conns))
        assert all(data == b"" for data in closed)  # closed by the server, nothing answered
        assert time.monotonic() - started < 5
        for _reader, writer in conns:
            writer.close()
    finally:
        await runner.cleanup()


async def test_a_body_that_never_arrives_times_out(dist: Path) -> None:
    runner, port = await _serve(make_settings(LEXVOZ_WEB_BODY_TIMEOUT_S=0.5, LEXVOZ_WEB_HEADER_TIMEOUT_S=30), dist)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"POST /api/session HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"
        )
        await writer.drain()
        async with asyncio.timeout(10):
            status_line = await reader.readline()
        assert b" 408 " in status_line
        writer.close()
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(("rehearsal", "mode"), [(True, "rehearsal"), (False, "live")])
async def test_the_page_learns_the_sites_mode_before_a_session(
    make_client: ClientFactory, rehearsal: bool, mode: str
) -> None:
    """The first screen's privacy notice says where the voice will go before any agent has joined to say so:
    `GET /api/config` names the mode this service runs in, uncached (a restart into the other mode shows)."""
    client = await make_client(make_settings(LEXVOZ_REHEARSAL=rehearsal))
    resp = await client.get("/api/config")
    assert resp.status == 200
    assert await resp.json() == {"mode": mode}
    assert resp.headers["Cache-Control"] == "no-store"
    assert "Content-Security-Policy" in resp.headers
    assert (await client.post("/api/config")).status == 405
