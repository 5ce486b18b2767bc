"""When the stand-in "model" heard the end of a turn and when it answered: the times a latency benchmark subtracts.

A voice-to-voice latency measured through the stand-in includes the stand-in's own time (its "model" time),
which says nothing about the client under test. So the stand-in notes, per connection, the moments a client's
share can be told apart from its own:

- ``speech_stopped``: ``input_audio_buffer.speech_stopped`` was written to the socket (the turn is over; a
  response the server creates itself starts here);
- ``response_create``: a client ``response.create`` was read off the socket and started a response
  (``response_id``);
- ``function_call``: the ``response.output_item.done`` of a function call was written (clients act on it);
- ``first_audio``: the first ``response.output_audio.delta`` of a response was written;
- ``response_created``: a response's ``response.created`` was written, with ``item_id``: the user item it answers
  (the last user item written on that connection before it; absent before any, as for a greeting). This is what
  lets a reader tie every response of a turn (the server's own after ``speech_stopped``, a client's after a tool
  call) to that turn's ``speech_stopped`` by id rather than by when it happened.

Times are ``time.monotonic()``: CLOCK_MONOTONIC on Linux, one clock for every process of the host, so a
benchmark on the same host can set them against its own readings. Entries carry event kinds and ids only,
never text or audio. The record is bounded: a closed connection's entries go once enough newer connections have
closed (:mod:`.endpoint`), and the oldest entries go past ``MAX_ENTRIES``; positions are absolute, so a reader
asking ``since=N`` keeps its place.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .event_record import EventRecord
from .protocol import JsonDict

MAX_ENTRIES = 50_000


class TurnTimings:
    """The timing record of one stand-in, over all its connections."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, max_entries: int = MAX_ENTRIES) -> None:
        self._clock = clock
        self._entries = EventRecord(max_entries)
        self._audio_started: dict[int, set[str]] = {}
        self._last_user_item: dict[int, str] = {}

    @property
    def total(self) -> int:
        """Entries recorded so far, including any already dropped from the bounded record."""
        return len(self._entries)

    def now(self) -> float:
        return self._clock()

    def _add(self, connection: int, kind: str, at: float, **ids: str) -> None:
        self._entries.append({"connection": connection, "kind": kind, "at": at, **ids}, connection)

    def written(self, connection: int, event: JsonDict) -> None:
        """A server event has just been written to connection `connection`'s socket."""
        kind = event.get("type")
        if kind == "input_audio_buffer.speech_stopped":
            self._add(connection, "speech_stopped", self._clock(), item_id=str(event.get("item_id")))
        elif kind == "response.output_item.done" and (event.get("item") or {}).get("type") == "function_call":
            self._add(connection, "function_call", self._clock(), response_id=str(event.get("response_id")))
        elif kind == "conversation.item.added" and (event.get("item") or {}).get("role") == "user":
            self._last_user_item[connection] = str(event["item"].get("id"))
        elif kind == "response.created":
            response_id = str((event.get("response") or {}).get("id"))
            answers = self._last_user_item.get(connection)
            ids = {"response_id": response_id} | ({"item_id": answers} if answers is not None else {})
            self._add(connection, "response_created", self._clock(), **ids)
        elif kind == "response.output_audio.delta":
            response_id = str(event.get("response_id"))
            started = self._audio_started.setdefault(connection, set())
            if response_id not in started:
                started.add(response_id)
                self._add(connection, "first_audio", self._clock(), response_id=response_id)

    def response_requested(self, connection: int, response_id: str, received_at: float) -> None:
        """A client `response.create`, read at `received_at`, started response `response_id`."""
        self._add(connection, "response_create", received_at, response_id=response_id)

    def forget(self, connection: int) -> None:
        """The connection closed: its per-response bookkeeping is no longer needed (its entries stay)."""
        self._audio_started.pop(connection, None)
        self._last_user_item.pop(connection, None)

    def forget_entries(self, connection: int) -> None:
        """The connection closed a while ago (see :mod:`.endpoint`): drop its entries too."""
        self._entries.forget(connection)

    def since(self, position: int) -> list[JsonDict]:
        """Entries at absolute positions >= `position` that are still kept."""
        return [dict(e) for _, e in self._entries.since(position)]
