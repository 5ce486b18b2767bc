"""The token and page service: what the token allows, how bad requests are refused, and the page serving.

Each test runs the real aiohttp app on a loopback port through aiohttp's own test client, and decodes the
token with LiveKit's verifier, so a grant that LiveKit would read differently fails here.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import jwt
import pytest
from aiohttp.test_utils import TestClient, TestServer
from livekit import api

from agent.settings import Settings, get_settings
from agent.web.service import (
    ROOM_PATTERN,
    PeerRateLimiter,
    content_security_policy,
    create_app,
    main,
)

API_KEY = "test-key"
API_SECRET = "test-secret-that-must-never-leak-0123456789"

ClientFactory = Callable[..., Any]


def make_settings(**overrides: Any) -> Settings:
    """Settings built from explicit values only: no `.env`, no environment surprises."""
    values: dict[str, Any] = {
        "LIVEKIT_URL": "ws://127.0.0.1:7880",
        "LIVEKIT_API_KEY": API_KEY,
        "LIVEKIT_API_SECRET": API_SECRET,
        "LEXVOZ_AGENT_NAME": "lexvoz-test",
        "LEXVOZ_TOKEN_TTL_S": 600,
        "LEXVOZ_TOKEN_REQUESTS_PER_MINUTE": 100,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


@pytest.fixture
def dist(tmp_path: Path) -> Path:
    """A stand-in for `web/dist`: an index page, one hashed asset, and a secret file just outside it."""
    root = tmp_path / "dist"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_text("<!doctype html><title>Lexvoz</title>", encoding="utf-8")
    (root / "assets" / "index-abc123.js").write_text("console.log('lexvoz')", encoding="utf-8")
    (root / ".hidden").write_text("nope", encoding="utf-8")
    (tmp_path / "outside.txt").write_text("outside", encoding="utf-8")
    return root


@pytest.fixture
async def make_client(dist: Path) -> AsyncIterator[ClientFactory]:
    clients: list[TestClient[Any, Any]] = []

    async def factory(settings: Settings | None = None, static_dir: Path | None = None) -> TestClient[Any, Any]:
        app = create_app(settings or make_settings(), static_dir=static_dir if static_dir is not None else dist)
        client: TestClient[Any, Any] = TestClient(TestServer(app, host="127.0.0.1"))
        await client.start_server()
        clients.append(client)
        return client

    yield factory
    for client in clients:
        await client.close()


def verify(token: str) -> api.access_token.Claims:
    return api.TokenVerifier(API_KEY, API_SECRET).verify(token)


async def test_session_token_grants_one_room_microphone_and_dispatches_agent(make_client: ClientFactory) -> None:
    client = await make_client()
    resp = await client.post("/api/session")
    assert resp.status == 200
    assert resp.headers["Cache-Control"] == "no-store"
    body = await resp.json()
    assert set(body) == {"url", "token", "room", "identity"}
    assert body["url"] == "ws://127.0.0.1:7880"
    assert body["room"].startswith("lexvoz-") and ROOM_PATTERN.fullmatch(body["room"])
    assert body["identity"].startswith("usuario-")

    claims = verify(body["token"])
    assert claims.identity == body["identity"]
    video = claims.video
    assert video is not None
    assert video.room_join is True
    assert video.room == body["room"]
    assert video.can_publish is True
    assert video.can_publish_sources == ["microphone"]
    assert video.can_publish_data is True
    assert video.can_subscribe is True
    # Nothing that would make the browser an administrator.
    assert not video.room_admin and not video.room_create and not video.room_list and not video.room_record
    assert claims.room_config is not None
    assert [a.agent_name for a in claims.room_config.agents] == ["lexvoz-test"]


async def test_token_ttl_is_at_most_fifteen_minutes(make_client: ClientFactory) -> None:
    client = await make_client(make_settings(LEXVOZ_TOKEN_TTL_S=900))
    before = int(time.time())
    body = await (await client.post("/api/session")).json()
    raw = jwt.decode(body["token"], API_SECRET, algorithms=["HS256"], issuer=API_KEY)
    assert raw["exp"] - before <= 15 * 60 + 1
    assert raw["exp"] > before

    client = await make_client(make_settings(LEXVOZ_TOKEN_TTL_S=60))
    before = int(time.time())
    raw = jwt.decode(
        (await (await client.post("/api/session")).json())["token"], API_SECRET, algorithms=["HS256"], issuer=API_KEY
    )
    assert raw["exp"] - before <= 61


async def test_random_rooms_and_identities_differ(make_client: ClientFactory) -> None:
    client = await make_client()
    bodies = [await (await client.post("/api/session")).json() for _ in range(5)]
    assert len({b["room"] for b in bodies}) == 5
    assert len({b["identity"] for b in bodies}) == 5


async def test_requested_room_is_honoured(make_client: ClientFactory) -> None:
    client = await make_client()
    resp = await client.post("/api/session", json={"room": "sala-de-prueba-1"})
    assert resp.status == 200
    body = await resp.json()
    assert body["room"] == "sala-de-prueba-1"
    assert verify(body["token"]).video.room == "sala-de-prueba-1"  # type: ignore[union-attr]


async def test_empty_object_and_null_room_get_a_fresh_room(make_client: ClientFactory) -> None:
    client = await make_client()
    for payload in ({}, {"room": None}):
        body = await (await client.post("/api/session", json=payload)).json()
        assert body["room"].startswith("lexvoz-")


async def test_public_url_is_preferred(make_client: ClientFactory) -> None:
    settings = make_settings(LEXVOZ_PUBLIC_LIVEKIT_URL="wss://livekit.example.test")
    client = await make_client(settings)
    body = await (await client.post("/api/session")).json()
    assert body["url"] == "wss://livekit.example.test"


@pytest.mark.parametrize(
    "room",
    ["", "ab", "Sala", "-sala", "sala_1", "sala 1", "sala/../x", "a" * 64, "ñandú", "sala\n", 12, ["sala"], True],
)
async def test_bad_room_names_are_refused(make_client: ClientFactory, room: Any) -> None:
    client = await make_client()
    resp = await client.post("/api/session", json={"room": room})
    assert resp.status == 400
    assert resp.content_type == "application/json"
    assert "error" in await resp.json()


@pytest.mark.parametrize(
    ("data", "content_type", "status"),
    [
        (b"{not json", "application/json", 400),
        (b"\xff\xfe", "application/json", 400),
        (b"[]", "application/json", 400),
        (b'"sala"', "application/json", 400),
        (b"42", "application/json", 400),
        (b'{"room": "sala-1", "admin": true}', "application/json", 400),
        (b'{"room": "sala-1"}', "text/plain", 415),
        (b'{"room": "sala-1"}', "application/x-www-form-urlencoded", 415),
        (b'{"room": "' + b"a" * 2000 + b'"}', "application/json", 413),
    ],
)
async def test_malformed_bodies_get_json_4xx(
    make_client: ClientFactory, data: bytes, content_type: str, status: int
) -> None:
    client = await make_client()
    resp = await client.post("/api/session", data=data, headers={"Content-Type": content_type})
    assert resp.status == status
    assert resp.content_type == "application/json"
    body = await resp.json()
    assert isinstance(body["error"], str) and body["error"]


async def test_wrong_method_and_unknown_api_path_are_json(make_client: ClientFactory) -> None:
    client = await make_client()
    resp = await client.get("/api/session")
    assert resp.status == 405
    assert "error" in await resp.json()
    assert "POST" in resp.headers.get("Allow", "")
    resp = await client.post("/api/nothing")
    assert resp.status in (404, 405)
    assert "error" in await resp.json()


async def test_rate_limit_per_address(make_client: ClientFactory) -> None:
    client = await make_client(make_settings(LEXVOZ_TOKEN_REQUESTS_PER_MINUTE=3))
    statuses = [(await client.post("/api/session")).status for _ in range(3)]
    assert statuses == [200, 200, 200]
    resp = await client.post("/api/session")
    assert resp.status == 429
    assert int(resp.headers["Retry-After"]) >= 1
    assert "error" in await resp.json()


async def test_rate_limit_ignores_forwarded_headers(make_client: ClientFactory) -> None:
    client = await make_client(make_settings(LEXVOZ_TOKEN_REQUESTS_PER_MINUTE=2))
    statuses = [
        (
            await client.post("/api/session", headers={"X-Forwarded-For": f"203.0.113.{i}", "Forwarded": f"for=x{i}"})
        ).status
        for i in range(4)
    ]
    assert statuses == [200, 200, 429, 429]


async def test_peer_limiter_table_is_bounded() -> None:
    limiter = PeerRateLimiter(5, max_peers=10)
    for i in range(50):
        assert await limiter.try_acquire(f"198.51.100.{i}")
    assert len(limiter) <= 10


async def test_secret_never_in_response(make_client: ClientFactory) -> None:
    client = await make_client()
    for method, path in (("POST", "/api/session"), ("GET", "/healthz"), ("GET", "/"), ("POST", "/api/nothing")):
        resp = await client.request(method, path)
        text = await resp.text()
        assert API_SECRET not in text
        assert all(API_SECRET not in v for v in resp.headers.values())


async def test_healthz(make_client: ClientFactory) -> None:
    client = await make_client()
    resp = await client.get("/healthz")
    assert resp.status == 200
    assert await resp.json() == {"status": "ok"}


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


async def test_logs_never_carry_token_or_secret(make_client: ClientFactory, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client = await make_client()
    body = await (await client.post("/api/session", json={"room": "sala-log"})).json()
    await client.post("/api/session", data=b"{bad", headers={"Content-Type": "application/json"})
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "sala-log" in logged  # the service does log sessions...
    assert body["token"] not in logged  # ...but never the bearer token
    assert body["token"].split(".")[2] not in logged
    assert API_SECRET not in logged


async def test_error_messages_are_utf8_json(make_client: ClientFactory) -> None:
    client = await make_client()
    resp = await client.post("/api/session", json={"room": "X"})
    raw = await resp.read()
    assert "válido".encode() in raw


def test_main_reports_bad_settings_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LEXVOZ_TOKEN_TTL_S", "5000")
    get_settings.cache_clear()
    try:
        assert main([]) == 2
    finally:
        get_settings.cache_clear()
    err = capsys.readouterr().err
    assert "LEXVOZ_TOKEN_TTL_S" in err and len(err.strip().splitlines()) == 1
