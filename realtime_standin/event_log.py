# ruff: noqa: ASYNC109  (the waiters take a plain timeout= on purpose: it reads best in tests)
"""The stand-in's record of the wire: every client and server event, and waiters on them.

Tests assert on what crossed the socket, so the stand-in keeps both directions in order and lets
a test wait for an event instead of sleeping. Audio payloads are elided from the record (client
appends unless asked to keep them, server audio deltas always) so it stays small and text-free.
Both directions are :class:`~realtime_standin.event_record.EventRecord` s: positions (``after=``,
``mark()``) are absolute, and a closed connection's events are forgotten once enough newer
connections have closed (see :mod:`.endpoint`), so a stand-in running for hours stays bounded.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable

from .event_record import EventRecord
from .protocol import JsonDict

EventPredicate = Callable[[JsonDict], bool]

logger = logging.getLogger("realtime_standin")


class EventLog:
    """Recording and waiting, for :class:`~realtime_standin.server.RealtimeStandIn`.

    The stand-in sets the attributes below; ``_signal`` is replaced on every change so that each
    waiter wakes up once per new event (or connection change) and then re-checks.
    """

    keep_audio_payloads: bool
    received: EventRecord
    sent: EventRecord
    _signal: asyncio.Event

    @property
    def response_create_count(self) -> int:
        """The ``response.create`` events still kept: all of them until old connections are forgotten."""
        return sum(1 for e in self.received if e.get("type") == "response.create")

    def client_events(self, event_type: str | None = None) -> list[JsonDict]:
        return [e for e in self.received if event_type is None or e.get("type") == event_type]

    def server_events(self, event_type: str | None = None) -> list[JsonDict]:
        return [e for e in self.sent if event_type is None or e.get("type") == event_type]

    def mark(self) -> tuple[int, int]:
        """Positions in (received, sent) to pass as ``after=`` to only see later events."""
        return len(self.received), len(self.sent)

    async def wait_for_client_event(
        self, event_type: str, predicate: EventPredicate | None = None, *, timeout: float = 5.0, after: int = 0
    ) -> JsonDict:
        """First client event of ``event_type`` (at index >= ``after``) matching ``predicate``."""
        return await self._wait(self.received, event_type, predicate, timeout, after)

    async def wait_for_server_event(
        self, event_type: str, predicate: EventPredicate | None = None, *, timeout: float = 5.0, after: int = 0
    ) -> JsonDict:
        return await self._wait(self.sent, event_type, predicate, timeout, after)

    async def _wait(
        self, log: EventRecord, event_type: str, predicate: EventPredicate | None, timeout: float, after: int
    ) -> JsonDict:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        index = after
        while True:
            signal = self._signal
            for position, event in log.since(index):
                index = position + 1
                if event.get("type") == event_type and (predicate is None or predicate(event)):
                    return event
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"no {event_type} event within {timeout}s")
            try:
                await asyncio.wait_for(signal.wait(), remaining)
            except TimeoutError:
                continue

    def _notify(self) -> None:
        self._signal.set()
        self._signal = asyncio.Event()

    def _record_received(self, event: JsonDict, connection: int) -> None:
        if event.get("type") == "input_audio_buffer.append" and not self.keep_audio_payloads:
            audio = event.get("audio")
            event = {**event, "audio": "", "audio_b64_len": len(audio) if isinstance(audio, str) else 0}
        self.received.append(event, connection)
        logger.debug("client event %s", event.get("type"))
        self._notify()

    def _record_sent(self, event: JsonDict, connection: int) -> None:
        if event.get("type") == "response.output_audio.delta":
            event = {**event, "delta": ""}
        else:
            event = copy.deepcopy(event)
        self.sent.append(event, connection)
        self._notify()
