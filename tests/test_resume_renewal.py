"""`POST /api/session/renew`: a person still in their room trades their resume token for the next one, so a
conversation longer than `LEXVOZ_RESUME_TTL_S` can still come back to its room (livekit-server restarted, the tab
reloaded); nobody else can keep a token alive.

The real aiohttp app on loopback, the real resume tokens and spent-token store; only livekit-server's list of
who is in a room comes from a double. The page's side (renewing at half the token's life) is in
`web/src/resumeRenewal.test.ts`.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import jwt
import pytest
from aiohttp.test_utils import TestClient, TestServer

from agent.web.app import create_app
from agent.web.dispatch import RoomView
from agent.web.renew import RETRY_AFTER_S
from tests.web_app import FakeCensus, make_settings

TTL_S = 120
SETTINGS = make_settings(LEXVOZ_RESUME_TTL_S=TTL_S)


class PresentRooms:
    """livekit-server's participant lists as the renewal reads them: who is in which room, or a failure."""

    def __init__(self) -> None:
        self.inside: set[tuple[str, str]] = set()
        self.fail: Exception | None = None

    async def view(self, room: str, identity: str, agent_name: str, gone: str | None = None) -> RoomView | None:
        if self.fail is not None:
            raise self.fail
        return RoomView(caller_present=(room, identity) in self.inside, agent_present=True)


@pytest.fixture
def rooms() -> PresentRooms:
    return PresentRooms()


@pytest.fixture
async def client(
    rooms: PresentRooms, dist: Path, request: pytest.FixtureRequest
) -> AsyncIterator[TestClient[Any, Any]]:
    """The page service with `SETTINGS`, or with the settings a test names (`@pytest.mark.parametrize("client",
    [settings], indirect=True)`)."""
    settings = getattr(request, "param", SETTINGS)
    app = create_app(settings, static_dir=dist, rooms=rooms, census=FakeCensus())  # type: ignore[arg-type]
    test_client: TestClient[Any, Any] = TestClient(TestServer(app, host="127.0.0.1"))
    await test_client.start_server()
    yield test_client
    await test_client.close()


async def joined(client: TestClient[Any, Any], rooms: PresentRooms) -> dict[str, Any]:
    """A new session whose person has joined its room."""
    body: dict[str, Any] = await (await client.post("/api/session")).json()
    rooms.inside.add((body["room"], body["identity"]))
    return body


def claims(token: str) -> dict[str, Any]:
    decoded: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    return decoded


async def renew(client: TestClient[Any, Any], token: Any) -> aiohttp.ClientResponse:
    response: aiohttp.ClientResponse = await client.post("/api/session/renew", json={"resume": token})
    return response


async def test_a_session_says_how_long_its_resume_token_lives(client: TestClient[Any, Any]) -> None:
    body = await (await client.post("/api/session")).json()
    assert body["resume_ttl_s"] == TTL_S
    token = claims(body["resume"])
    assert token["exp"] - token["iat"] == TTL_S


async def test_a_person_in_the_room_gets_the_next_token_for_the_same_room_and_identity(
    client: TestClient[Any, Any], rooms: PresentRooms
) -> None:
    first = await joined(client, rooms)
    before = time.time()
    response = await renew(client, first["resume"])
    assert response.status == 200
    body = await response.json()
    assert body["resume_ttl_s"] == TTL_S
    renewed = claims(body["resume"])
    assert (renewed["room"], renewed["sub"]) == (first["room"], first["identity"])
    assert renewed["iat"] >= int(before) and renewed["exp"] - renewed["iat"] == TTL_S
    assert response.headers["Cache-Control"] == "no-store"

    # The renewed token brings the page back to its room; the one it replaced is spent, on either endpoint.
    again = await (await client.post("/api/session", json={"resume": body["resume"]})).json()
    assert (again["room"], again["identity"]) == (first["room"], first["identity"])
    assert (await client.post("/api/session", json={"resume": first["resume"]})).status == 401
    assert (await renew(client, first["resume"])).status == 401


async def test_renewing_can_go_on_for_as_long_as_the_conversation(
    client: TestClient[Any, Any], rooms: PresentRooms
) -> None:
    """Each renewal spends the token it was given: a chain of them, each one usable once."""
    token = (await joined(client, rooms))["resume"]
    seen = {token}
    for _ in range(5):
        response = await renew(client, token)
        assert response.status == 200
        token = (await response.json())["resume"]
        assert token not in seen
        seen.add(token)


async def test_someone_not_in_the_room_cannot_keep_its_token_alive_and_spends_nothing(
    client: TestClient[Any, Any], rooms: PresentRooms
) -> None:
    first = await joined(client, rooms)
    rooms.inside.clear()  # the tab left (or the token was copied elsewhere)
    response = await renew(client, first["resume"])
    assert response.status == 404
    assert "error" in await response.json()
    # Not spent: the page can still come back with it while it is fresh.
    assert (await client.post("/api/session", json={"resume": first["resume"]})).status == 200


async def test_when_livekit_does_not_answer_the_page_is_told_to_try_later_and_keeps_its_token(
    client: TestClient[Any, Any], rooms: PresentRooms
) -> None:
    first = await joined(client, rooms)
    rooms.fail = aiohttp.ClientConnectionError("livekit-server is restarting")
    response = await renew(client, first["resume"])
    assert response.status == 503
    assert response.headers["Retry-After"] == str(RETRY_AFTER_S)
    rooms.fail = None
    assert (await renew(client, first["resume"])).status == 200


@pytest.mark.parametrize("token", ["abc.def.ghi", "", 12, None])
async def test_a_token_that_is_not_ours_is_refused(
    client: TestClient[Any, Any], rooms: PresentRooms, token: Any
) -> None:
    await joined(client, rooms)
    response = await renew(client, token)
    assert response.status in (400, 401)
    assert "error" in await response.json()


async def test_a_join_token_is_not_a_resume_token(client: TestClient[Any, Any], rooms: PresentRooms) -> None:
    first = await joined(client, rooms)
    assert (await renew(client, first["token"])).status == 401


@pytest.mark.parametrize("body", [{}, {"resume": "x", "room": "lexvoz-" + "0" * 32}, ["x"]])
async def test_only_a_resume_field_is_taken(client: TestClient[Any, Any], body: Any) -> None:
    response = await client.post("/api/session/renew", json=body)
    assert response.status == 400
    assert "error" in await response.json()


async def test_a_request_from_another_origin_is_refused(client: TestClient[Any, Any], rooms: PresentRooms) -> None:
    first = await joined(client, rooms)
    response = await client.post(
        "/api/session/renew", json={"resume": first["resume"]}, headers={"Origin": "https://elsewhere.example"}
    )
    assert response.status == 403
    assert (await renew(client, first["resume"])).status == 200  # not spent by the refused request


@pytest.mark.parametrize("client", [make_settings(LEXVOZ_TOKEN_REQUESTS_PER_MINUTE=2)], indirect=True)
async def test_renewals_do_not_use_up_the_clients_new_sessions(
    client: TestClient[Any, Any], rooms: PresentRooms
) -> None:
    """The new-session bucket here holds 2 a minute; a page that renews must still be able to start over."""
    first = await joined(client, rooms)
    token = first["resume"]
    for _ in range(3):
        token = (await (await renew(client, token)).json())["resume"]
    assert (await client.post("/api/session")).status == 200
