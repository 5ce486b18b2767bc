"""Honest stand-ins for LiveKit objects the tests do not need a server for."""

from __future__ import annotations

import json
from typing import Any


class RecordingParticipant:
    """Stands in for rtc.LocalParticipant: records what would reach the room."""

    def __init__(self) -> None:
        self.packets: list[tuple[dict[str, Any], str, bool]] = []
        self.streams: list[tuple[dict[str, Any], str]] = []

    async def publish_data(self, payload: bytes | str, *, reliable: bool = True, topic: str = "") -> None:
        self.packets.append((json.loads(payload), topic, reliable))

    async def send_text(self, text: str, *, topic: str = "") -> None:
        self.streams.append((json.loads(text), topic))

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [m for m, _, _ in self.packets] + [m for m, _ in self.streams]
