"""Shared pieces of the stand-in tests: synthetic audio, a raw WebSocket client, the schema check, fixtures.

The fixtures are defined under the names the tests use (``standin``, ``http``); a test module pulls
them in by importing ``standin_fixture`` (``http`` comes from ``conftest.py``).
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import sys
from array import array
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from openai.types.realtime.realtime_server_event import RealtimeServerEvent
from pydantic import TypeAdapter

REPO_ROOT = Path(__file__).resolve().parents[1]
try:
    import realtime_standin  # noqa: F401
except ModuleNotFoundError:  # the editable install maps only the product packages; the stand-in sits at the root
    sys.path.insert(0, str(REPO_ROOT))

from realtime_standin import RealtimeStandIn  # noqa: E402

SERVER_EVENT = TypeAdapter(RealtimeServerEvent)
SAMPLE_RATE = 24_000
SOURCES = [{"citation": "Constitución Política de Panamá, art. 37"}, {"citation": "Constitución, art. 41"}]
STANDIN_APPENDS = 20
"""Audio appends in each :func:`hold_conversation`."""
_TOOLS = [{"type": "function", "name": "search_panama_law", "parameters": {"type": "object", "properties": {}}}]


def pcm_tone(ms: int, amplitude: float = 0.2, freq: float = 440.0) -> bytes:
    n = SAMPLE_RATE * ms // 1000
    level = amplitude * 32767
    return array("h", (int(level * math.sin(2 * math.pi * freq * i / SAMPLE_RATE)) for i in range(n))).tobytes()


def pcm_silence(ms: int) -> bytes:
    return bytes(SAMPLE_RATE * ms // 1000 * 2)


_SILENCE_100MS = base64.b64encode(pcm_silence(100)).decode()


def assert_valid_server_events(events: list[dict[str, Any]]) -> None:
    """Every event the stand-in sent parses as a GA server event of the type it claims."""
    for event in events:
        model = SERVER_EVENT.validate_python(event)
        assert model.type == event["type"]


class RawClient:
    """A bare WebSocket client, to test the protocol without livekit in between."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []

    async def send(self, event: dict[str, Any]) -> None:
        await self.ws.send_str(json.dumps(event))

    async def next(self, event_type: str) -> dict[str, Any]:
        async with asyncio.timeout(5.0):
            while True:
                msg = await self.ws.receive()
                assert msg.type == aiohttp.WSMsgType.TEXT, msg
                event = json.loads(msg.data)
                self.events.append(event)
                if event["type"] == event_type:
                    return event


async def hold_conversation(http: aiohttp.ClientSession, standin: RealtimeStandIn, n: int) -> None:
    """One conversation as the plugin holds it, then the socket closes: three ``session.update``, 100 ms
    audio appends, a typed question and ``response.create``, the tool's output and ``response.create`` again.
    Event ids carry ``n`` so that each conversation's events differ."""
    url = standin.base_url.replace("http", "ws", 1) + "/realtime?model=gpt-realtime"
    client = RawClient(await http.ws_connect(url, headers={"Authorization": "Bearer test"}))
    await client.next("session.created")
    for i in range(3):
        session = {"type": "realtime", "tools": _TOOLS}
        await client.send({"type": "session.update", "event_id": f"ev_{n}_update_{i}", "session": session})
    for i in range(STANDIN_APPENDS):
        await client.send({"type": "input_audio_buffer.append", "event_id": f"ev_{n}_{i}", "audio": _SILENCE_100MS})
    question = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "¿Art. 17?"}]}
    await client.send({"type": "conversation.item.create", "item": question})
    await client.send({"type": "response.create"})
    call = (await client.next("response.done"))["response"]["output"][0]
    output = {"type": "function_call_output", "call_id": call["call_id"], "output": json.dumps({"sources": SOURCES})}
    await client.send({"type": "conversation.item.create", "item": output})
    await client.send({"type": "response.create"})
    await client.next("response.done")
    await client.ws.close()


async def wait_until_settled(standin: RealtimeStandIn) -> None:
    """Until the stand-in is done with every socket: it finishes with one just after the client closed it
    (and signals once it has, like on every event)."""
    async with asyncio.timeout(10):
        while standin._sockets:
            await standin._signal.wait()


@pytest.fixture(name="standin")
async def standin_fixture() -> AsyncIterator[RealtimeStandIn]:
    async with RealtimeStandIn(speed=40.0, transcripts=["¿Qué dice la Constitución sobre el habeas corpus?"]) as s:
        yield s
