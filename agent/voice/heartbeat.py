"""The agent's sign of life in the room: a participant attribute it refreshes every few seconds.

Why: when a worker process dies (SIGKILL, an OOM kill, a lost node) its agents stay in their rooms as
participants until livekit-server's fixed 15 s ping timeout drops them (20 s measured), still showing their
last state ("hablando"), and nothing can replace them meanwhile. livekit-server itself says nothing sooner, so
the agent says it is alive: `lexvoz.heartbeat` holds the worker's Unix time in milliseconds, rewritten every
`HEARTBEAT_PERIOD_S`. The page judges an agent lost when no new value has ARRIVED for `HEARTBEAT_LOST_S` (its
own clock, never the value) and asks the page service for another; the page service, which may remove a
participant, judges by the value against its own clock (both are servers) before removing one.

`set_attributes` merges: the Python SDK sends only the keys it is given, and livekit-server's
`ParticipantImpl.SetAttributes` overwrites those keys and keeps the others (an empty value deletes one). So this
write never clobbers `lexvoz.end_reason`, and no other write clobbers it.

Each refresh also carries what the room must show of the agent now (`start(carry=...)`: its state, its mode, its
voice model's link), read at the moment of the write. A write made while the agent's connection to livekit-server
is being restored is lost: livekit-agents skips its `lk.agent.state` write altogether while the room is not
connected, and an attribute write in flight then times out. A state change in that window (an answer ending as
the agent's livekit-server node restarted) left the page showing "hablando" over a listening agent until the
next change, which may never come: the person waits for the agent to finish. Carried by the next refresh, the
room shows the truth within a period. Carrying is safe: a carried value is read and its write issued in one step
of the event loop, so a later change by its owner is written after it, and livekit-server tells the page only the
keys whose values changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Final, Protocol

logger = logging.getLogger("lexvoz.heartbeat")

HEARTBEAT_ATTRIBUTE: Final = "lexvoz.heartbeat"
# Each refresh costs one small signal message per conversation (and livekit-server's participant update to the
# person in the room): about one message a second for the room at this period, nothing beside the audio. Shorter
# would notice a dead worker sooner for more chatter; longer would leave it in the room nearly as long as
# livekit-server's own 15 s timeout does.
HEARTBEAT_PERIOD_S: Final = 3.0
# No refresh for this long means the agent is lost: three periods and a second, so two refreshes late or lost
# in a busy worker or a slow link are not a death. livekit-server sends a publisher's attribute change at once
# (a participant that publishes nothing yet waits up to 3 s for its room's batch: within the limit too).
HEARTBEAT_LOST_S: Final = 10.0


class _Participant(Protocol):
    async def set_attributes(self, attributes: dict[str, str]) -> None: ...


def heartbeat_value(now_s: float) -> str:
    """The attribute's value: Unix time in whole milliseconds, as decimal digits."""
    return str(int(now_s * 1000))


class Heartbeat:
    """Refreshes `lexvoz.heartbeat` on one agent participant from `start()` until `stop()`.

    The first value goes out with the agent's other attributes at the start (`attributes()`), so a page sees
    the sign of life as soon as it sees the agent; `start()` then refreshes it every period. A failed write is
    logged once and retried at the next period: a late refresh is what the 3-period limit is for.
    """

    def __init__(
        self,
        participant: _Participant,
        *,
        period_s: float = HEARTBEAT_PERIOD_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._participant = participant
        self._period_s = period_s
        self._clock = clock
        self._task: asyncio.Task[None] | None = None
        self._warned = False
        self._carry: Callable[[], Mapping[str, str]] | None = None

    def attributes(self) -> dict[str, str]:
        return {HEARTBEAT_ATTRIBUTE: heartbeat_value(self._clock())}

    @property
    def running(self) -> bool:
        """Started, and neither stopped nor dead."""
        return self._task is not None and not self._task.done() and not self._task.cancelling()

    def start(self, carry: Callable[[], Mapping[str, str]] | None = None) -> None:
        """Refresh every period from now on; `carry()` gives the other attributes each refresh writes again."""
        self._carry = carry
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._beat(), name="lexvoz-heartbeat")

    def stop(self) -> None:
        """No more refreshes: the conversation is over and the agent is leaving the room."""
        if self._task is not None:
            self._task.cancel()

    async def aclose(self) -> None:
        self.stop()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _refresh(self) -> dict[str, str]:
        """The sign of life, with what it carries; a carry that fails never holds the sign of life back."""
        carried: dict[str, str] = {}
        if self._carry is not None:
            try:
                carried = dict(self._carry())
            except Exception as exc:
                logger.warning("could not read the attributes to refresh: %s", type(exc).__name__)
        return {**carried, **self.attributes()}

    async def _beat(self) -> None:
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            due += self._period_s  # on a fixed schedule: a slow write does not push every later refresh back
            await asyncio.sleep(max(0.0, due - loop.time()))
            due = max(due, loop.time())  # after a stall: one refresh now, the next a period later (no burst)
            try:
                # Bounded: a write that never completes must not hold back the ones after it. (`asyncio.timeout`,
                # not `wait_for`, whose 3.11 version can swallow the stop's cancellation when a write just ended.)
                async with asyncio.timeout(self._period_s):
                    await self._participant.set_attributes(self._refresh())
            except Exception as exc:  # the room may be going away; the next period tries again
                if not self._warned:
                    logger.warning("could not refresh the heartbeat attribute: %s", type(exc).__name__)
                    self._warned = True
            else:
                self._warned = False
