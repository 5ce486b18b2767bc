"""The token service: what the token allows, who may rejoin which room, how bad requests are refused and
how refusals are logged. (The page serving and the read timeouts: `test_web_page.py`.)

Each test runs the real aiohttp app on a loopback port through aiohttp's own test client, and decodes the
token with LiveKit's verifier, so a grant that LiveKit would read differently fails here.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import jwt
import pytest
from livekit import api

from agent.settings import get_settings
from agent.web.app import main
from agent.web.limits import LogThrottle, PeerRateLimiter
from agent.web.tokens import ResumeError, ResumeTokens
from tests.web_app import API_KEY, API_SECRET, ClientFactory, make_settings

ROOM_PATTERN = re.compile(r"^lexvoz-[0-9a-f]{32}$")  # 128 random bits


def verify(token: str) -> api.access_token.Claims:
    return api.TokenVerifier(API_KEY, API_SECRET).verify(token)


async def test_session_token_grants_one_room_microphone_and_dispatches_agent(make_client: ClientFactory) -> None:
    client = await make_client()
    resp = await client.post("/api/session")
    assert resp.status == 200
    assert resp.headers["Cache-Control"] == "no-store"
    body = await resp.json()
    assert set(body) == {"url", "token", "room", "identity", "resume", "resume_ttl_s"}
    assert body["url"] == "ws://127.0.0.1:7880"
    assert ROOM_PATTERN.fullmatch(body["room"])
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


async def test_the_caller_never_chooses_the_room(make_client: ClientFactory) -> None:
    """Asking for a room by name, even a live one, is refused: that is how a stranger joined a conversation."""
    client = await make_client()
    live = await (await client.post("/api/session")).json()
    for room in ("sala-de-prueba-1", live["room"], None):
        resp = await client.post("/api/session", json={"room": room})
        assert resp.status == 400, room
        assert "sala" in (await resp.json())["error"]


async def test_empty_object_and_null_resume_get_a_fresh_room(make_client: ClientFactory) -> None:
    client = await make_client()
    for payload in ({}, {"resume": None}):
        body = await (await client.post("/api/session", json=payload)).json()
        assert ROOM_PATTERN.fullmatch(body["room"])


async def test_resume_token_rejoins_the_same_room_and_identity_once(make_client: ClientFactory) -> None:
    client = await make_client()
    first = await (await client.post("/api/session")).json()
    resp = await client.post("/api/session", json={"resume": first["resume"]})
    assert resp.status == 200
    again = await resp.json()
    assert (again["room"], again["identity"]) == (first["room"], first["identity"])
    claims = verify(again["token"])
    assert claims.identity == first["identity"] and claims.video is not None and claims.video.room == first["room"]
    assert again["resume"] != first["resume"]

    # spent: the same resume token does not work twice (a copy is worthless once the page used it)
    resp = await client.post("/api/session", json={"resume": first["resume"]})
    assert resp.status == 401 and "error" in await resp.json()
    # the new one does, once
    assert (await client.post("/api/session", json={"resume": again["resume"]})).status == 200


@pytest.mark.parametrize("kind", ["garbage", "livekit-token", "forged-room", "wrong-key", "too-long", "number"])
async def test_forged_or_foreign_resume_tokens_are_refused(make_client: ClientFactory, kind: str) -> None:
    client = await make_client()
    first = await (await client.post("/api/session")).json()
    claims = jwt.decode(first["resume"], options={"verify_signature": False})
    forged: Any = {
        "garbage": "abc.def.ghi",
        # a valid LiveKit join token is not a resume token (different key and audience)
        "livekit-token": first["token"],
        # re-signed for another room with a key the attacker might guess: the LiveKit secret itself
        "forged-room": jwt.encode({**claims, "room": "lexvoz-" + "0" * 32}, API_SECRET, algorithm="HS256"),
        "wrong-key": jwt.encode(claims, "not-the-key-0123456789-0123456789", algorithm="HS256"),
        "too-long": "a" * 1500,
        "number": 12,
    }[kind]
    resp = await client.post("/api/session", json={"resume": forged})
    assert resp.status in (401, 413), kind
    assert "error" in await resp.json()


async def test_resume_tokens_expire() -> None:
    now = [1_000_000.0]
    tokens = ResumeTokens(make_settings(LEXVOZ_RESUME_TTL_S=60), clock=lambda: now[0])
    token = tokens.issue(room="lexvoz-" + "a" * 32, identity="usuario-" + "b" * 16)
    now[0] += 61
    with pytest.raises(ResumeError, match="caducó"):
        await tokens.spend(token)


async def test_requests_from_another_origin_are_refused(make_client: ClientFactory) -> None:
    client = await make_client()
    host = f"127.0.0.1:{client.port}"
    assert (await client.post("/api/session", headers={"Origin": f"http://{host}"})).status == 200
    for headers in (
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Origin": f"http://{host}.evil.example"},
        {"Sec-Fetch-Site": "cross-site"},
    ):
        resp = await client.post("/api/session", headers=headers)
        assert resp.status == 403, headers
        assert "origen" in (await resp.json())["error"]


async def test_allowed_origins_are_configurable(make_client: ClientFactory) -> None:
    client = await make_client(make_settings(LEXVOZ_ALLOWED_ORIGINS="https://lexvoz.example, https://b.example:8443"))
    assert (await client.post("/api/session", headers={"Origin": "https://lexvoz.example"})).status == 200
    assert (await client.post("/api/session", headers={"Origin": "https://b.example:8443"})).status == 200
    assert (await client.post("/api/session", headers={"Origin": f"http://127.0.0.1:{client.port}"})).status == 403


async def test_public_url_is_preferred(make_client: ClientFactory) -> None:
    settings = make_settings(LEXVOZ_PUBLIC_LIVEKIT_URL="wss://livekit.example.test")
    client = await make_client(settings)
    body = await (await client.post("/api/session")).json()
    assert body["url"] == "wss://livekit.example.test"


@pytest.mark.parametrize(
    "room",
    ["", "ab", "Sala", "-sala", "sala_1", "sala 1", "sala/../x", "a" * 64, "ñandú", "sala\n", 12, ["sala"], True],
)
async def test_any_room_field_is_refused(make_client: ClientFactory, room: Any) -> None:
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
        (b'{"resume": "' + b"a" * 3000 + b'"}', "application/json", 413),
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


async def test_logs_never_carry_token_or_secret(make_client: ClientFactory, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client = await make_client()
    body = await (await client.post("/api/session")).json()
    await client.post("/api/session", json={"resume": body["resume"]})
    await client.post("/api/session", data=b"{bad", headers={"Content-Type": "application/json"})
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert body["room"] in logged  # the service does log sessions...
    for credential in (body["token"], body["resume"]):  # ...but never a bearer token
        assert credential not in logged
        assert credential.split(".")[2] not in logged
    assert API_SECRET not in logged


async def test_error_messages_are_utf8_json(make_client: ClientFactory) -> None:
    client = await make_client()
    resp = await client.post("/api/session", json={"resume": "X"})
    raw = await resp.read()
    assert "reanudación no válido".encode() in raw


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


async def test_refused_requests_warn_at_most_once_a_period(
    make_client: ClientFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="lexvoz.web")
    client = await make_client(make_settings(LEXVOZ_TOKEN_REQUESTS_PER_MINUTE=1))
    statuses = [(await client.post("/api/session")).status for _ in range(40)]
    assert statuses.count(429) == 39
    for _ in range(20):
        await client.post("/api/session", headers={"Origin": "https://evil.example"})
    # The page service's own warnings: asyncio may log, at any moment, a task an earlier test left to the
    # garbage collector ("Task was destroyed but it is pending"), which says nothing of this service.
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("lexvoz.web")]
    assert len(warnings) <= 2, [r.getMessage() for r in warnings]  # one per kind, not one per request


def test_log_throttle_reports_what_it_held_back(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    throttle = LogThrottle(logging.getLogger("lexvoz.test.throttle"), period_s=60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="lexvoz.test.throttle"):
        for _ in range(10):
            throttle.warning("k", "refused %s", "x")
        now[0] = 61
        throttle.warning("k", "refused %s", "y")
    assert [r.getMessage() for r in caplog.records] == ["refused x", "refused y (9 more like this in the last 60 s)"]


def test_fresh_rooms_are_unguessable() -> None:
    from agent.web.tokens import new_room_name

    rooms = {new_room_name() for _ in range(1000)}
    assert len(rooms) == 1000 and all(ROOM_PATTERN.fullmatch(r) for r in rooms)
