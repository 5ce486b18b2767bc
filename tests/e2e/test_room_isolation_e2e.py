"""Against a real livekit-server: a second browser cannot get into a live conversation's room.

The token service runs in-process (its real app); livekit-server is the real binary. Alice starts a session
and joins her room; Mallory, with the same page service at hand, tries every way in that the service offers:
naming Alice's room, a forged resume token, and Alice's own resume token after Alice has used it. Whatever
Mallory does, livekit-server's own participant list for Alice's room only ever shows Alice.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from aiohttp.test_utils import TestClient, TestServer
from livekit import api, rtc

from agent.devstack import livekit_server
from agent.settings import Settings
from agent.web.app import create_app
from tests.e2e.conftest import livekit_port

pytestmark = pytest.mark.e2e

API_KEY = "isolation-key"
API_SECRET = "isolation-secret-0123456789-0123456789-abcdef"


@pytest.fixture(scope="module")
def livekit_url() -> Iterator[str]:
    try:
        livekit_server.find_or_build(build=False, log=False)
    except livekit_server.LiveKitServerMissing as exc:
        pytest.skip(f"livekit-server not available (run `make livekit-server`): {exc}")
    port = livekit_port()
    with tempfile.TemporaryDirectory(prefix="lexvoz-isolation-") as tmp:
        proc = livekit_server.start(
            api_key=API_KEY, api_secret=API_SECRET, port=port, log_path=Path(tmp) / "livekit-server.log"
        )
        try:
            yield f"ws://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except Exception:
                proc.kill()
                proc.wait(5)


@pytest.fixture
async def page(livekit_url: str, tmp_path: Path) -> AsyncIterator[TestClient[Any, Any]]:
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        LIVEKIT_URL=livekit_url,
        LIVEKIT_API_KEY=API_KEY,
        LIVEKIT_API_SECRET=API_SECRET,
        LEXVOZ_AGENT_NAME="lexvoz-isolation-test",  # no worker registers it: nobody else joins
        LEXVOZ_TOKEN_REQUESTS_PER_MINUTE=100,
    )
    client: TestClient[Any, Any] = TestClient(TestServer(create_app(settings, static_dir=tmp_path), host="127.0.0.1"))
    await client.start_server()
    yield client
    await client.close()


async def _identities(livekit_url: str, room: str) -> set[str]:
    """Who livekit-server says is in `room` right now."""
    http_url = livekit_url.replace("ws://", "http://")
    async with api.LiveKitAPI(http_url, API_KEY, API_SECRET) as lk:
        res = await lk.room.list_participants(api.ListParticipantsRequest(room=room))
    return {p.identity for p in res.participants}


async def test_a_second_participant_cannot_obtain_a_token_for_a_live_room(
    page: TestClient[Any, Any], livekit_url: str
) -> None:
    alice_session = await (await page.post("/api/session")).json()
    alice = rtc.Room()
    mallory = rtc.Room()
    try:
        await alice.connect(alice_session["url"], alice_session["token"])
        room = alice_session["room"]
        assert await _identities(livekit_url, room) == {alice_session["identity"]}

        # 1. Naming the live room is refused outright.
        resp = await page.post("/api/session", json={"room": room})
        assert resp.status == 400

        # 2. A session of her own is a different, fresh room; her token cannot open Alice's.
        own = await (await page.post("/api/session")).json()
        assert own["room"] != room
        await mallory.connect(own["url"], own["token"])
        assert mallory.name == own["room"]
        assert await _identities(livekit_url, room) == {alice_session["identity"]}

        # 3. A resume token forged for Alice's room, signed with what an attacker might try, is refused.
        claims = jwt.decode(own["resume"], options={"verify_signature": False})
        for key in ("guess-0123456789-0123456789-0123456789", API_SECRET):
            forged = jwt.encode({**claims, "room": room}, key, algorithm="HS256")
            assert (await page.post("/api/session", json={"resume": forged})).status == 401

        # 4. Alice reloads her page: her resume token brings her back to her room as herself.
        resp = await page.post("/api/session", json={"resume": alice_session["resume"]})
        assert resp.status == 200
        rejoin = await resp.json()
        assert (rejoin["room"], rejoin["identity"]) == (room, alice_session["identity"])
        await alice.disconnect()
        alice = rtc.Room()
        await alice.connect(rejoin["url"], rejoin["token"])

        # 5. Alice's spent resume token, copied by Mallory, is worthless.
        assert (await page.post("/api/session", json={"resume": alice_session["resume"]})).status == 401

        assert await _identities(livekit_url, room) == {alice_session["identity"]}
    finally:
        await mallory.disconnect()
        await alice.disconnect()
