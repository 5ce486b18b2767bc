"""The stale-turn guard: a search belongs to the turn it started in, and dies with it.

Realtime models keep a function call open until it is answered, and livekit-agents does not cancel a
running tool when the user barges in. So the guard does both jobs itself: it cancels the search the
moment a new user turn starts, and it remembers answered call ids so that a repeated id never runs a
second search.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")
A = TypeVar("A")


class StaleTurn(Exception):
    """The user started a new turn while the work ran; its result must not be used."""

    def __init__(self, started_turn: int, current_turn: int) -> None:
        super().__init__(f"turn {started_turn} superseded by turn {current_turn}")
        self.started_turn = started_turn
        self.current_turn = current_turn


class TurnCounter:
    """Advances on every new user turn (speech start or typed input); wakes whoever waits on it."""

    def __init__(self) -> None:
        self._turn = 0
        self._closed = False
        self._changed = asyncio.Event()

    @property
    def current(self) -> int:
        return self._turn

    def advance(self) -> int:
        self._turn += 1
        self._wake()
        return self._turn

    def close(self) -> None:
        """The conversation is over: no turn will be answered any more, so work running in any turn is cancelled.

        Not a turn: `current` stays what the person's turns made it."""
        self._closed = True
        self._wake()

    def superseded(self, turn: int) -> bool:
        """True once work started in `turn` can no longer be used: the person moved on, or the conversation ended."""
        return self._closed or self._turn > turn

    async def wait_beyond(self, turn: int) -> int:
        while not self.superseded(turn):
            await self._changed.wait()
        return self._turn

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def run_in_turn(self, turn: int, work: Awaitable[T]) -> T:
        """Run `work` unless (or until) `turn` is superseded; then cancel it and raise StaleTurn."""
        if self.superseded(turn):
            if asyncio.iscoroutine(work):
                work.close()
            raise StaleTurn(turn, self._turn)
        task = asyncio.ensure_future(work)
        watcher = asyncio.ensure_future(self.wait_beyond(turn))
        try:
            await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            watcher.cancel()
        if task.done():
            return task.result()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise StaleTurn(turn, self._turn)


@dataclass
class _Entry(Generic[A]):
    future: asyncio.Future[A]


class CallLedger(Generic[A]):
    """Bounded memory of call ids: the first call runs, every repeat gets the first call's answer."""

    def __init__(self, max_entries: int = 256) -> None:
        self._max = max_entries
        self._entries: OrderedDict[str, _Entry[A]] = OrderedDict()

    def claim(self, call_id: str) -> asyncio.Future[A] | None:
        """None when this call id is new (the caller must `resolve` it); else the first call's answer."""
        entry = self._entries.get(call_id)
        if entry is not None:
            self._entries.move_to_end(call_id)
            return entry.future
        self._entries[call_id] = _Entry(asyncio.get_running_loop().create_future())
        while len(self._entries) > self._max:
            _, old = self._entries.popitem(last=False)
            if not old.future.done():
                old.future.cancel()
        return None

    def resolve(self, call_id: str, answer: A) -> None:
        entry = self._entries.get(call_id)
        if entry is not None and not entry.future.done():
            entry.future.set_result(answer)

    def unanswered(self) -> list[asyncio.Future[A]]:
        """The answers still to come: calls running now."""
        return [e.future for e in self._entries.values() if not e.future.done()]

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, call_id: object) -> bool:
        return call_id in self._entries
