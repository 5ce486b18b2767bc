"""Shared pieces of the stand-in tests: synthetic audio, a raw WebSocket client, the schema check, fixtures.

The fixtures are defined under the names the tests use (``standin``, ``http``); a test module pulls
them in by importing ``standin_fixture`` (``http`` comes from ``conftest.py``).
"""

from __future__ import annotations

import asyncio
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


def pcm_tone(ms: int, amplitude: float = 0.2, freq: float = 440.0) -> bytes:
    n = SAMPLE_RATE * ms // 1000
    level = amplitude * 32767
    return array("h", (int(level * math.sin(2 * math.pi * freq * i / SAMPLE_RATE)) for i in range(n))).tobytes()


def pcm_silence(ms: int) -> bytes:
    return bytes(SAMPLE_RATE * ms // 1000 * 2)


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


@pytest.fixture(name="standin")
async def standin_fixture() -> AsyncIterator[RealtimeStandIn]:
    async with RealtimeStandIn(speed=40.0, transcripts=["¿Qué dice la Constitución sobre el habeas corpus?"]) as s:
        yield s
