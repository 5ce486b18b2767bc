"""The whole service's caps, whoever asks: live conversations at once, and new agent dispatches per minute.

Why: the per-client rate limit bounds one client, not a crowd. Two hundred token requests from twenty
addresses got two hundred tokens, and every token that joins gets a paid Realtime conversation of up to
`LEXVOZ_MAX_CONVERSATION_S`. These caps bound what the service can be made to spend, whoever asks.

**Live conversations** (`LEXVOZ_MAX_CONVERSATIONS`) must hold however many replicas of this service run,
so the count is livekit-server's, not ours: the rooms with our prefix that have participants (`RoomCensus`,
one `ListRooms` call), plus the sessions this replica issued within a join token's lifetime whose room has
not shown up yet (the person is still opening the microphone; a token unused after its TTL can no longer
join, so it stops counting). The census is cached for `CENSUS_TTL_S` and fetched by one request at a time,
so a flood of requests is at most one API call every few seconds. What it cannot see is the other
replicas' sessions not yet joined: with R replicas the service can overshoot by what the others issued in
the last few seconds, each within its own cap, and the next census corrects it.

**If livekit-server does not answer, the service fails closed** (503, and the failure is cached like an
answer, so an outage is not hammered): without the census nothing bounds paid conversations across
replicas, and a demanding operator would rather refuse new people for the length of an outage than issue
unbounded conversations. It costs little: a browser could not join a livekit-server the service cannot
reach anyway, and conversations already running are not touched. A rejoin of a room that is live (it
is already counted) is admitted whatever the count.

**Sessions nobody has joined** count for a token's lifetime, so tokens asked for and never used could hold
the service full: at the default 10 a minute per client, 5 addresses fill 50 places for 10 minutes. A client
may therefore hold at most `LEXVOZ_MAX_PENDING_SESSIONS_PER_CLIENT` of them (429 past that, for that client
alone), and a room stops being pending as soon as livekit-server lists it, occupied or not: it is created on
the first join, so a person who joined and left between two counts has used their token.

**New dispatches** (`LEXVOZ_MAX_DISPATCHES_PER_MINUTE`, per replica): a new session is one (its join token
carries the agent dispatch), and so is a re-dispatch by `POST /api/agent`. Each is a job offer to every
worker, and a flood of them keeps livekit-server and the workers busy even when no one joins.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Final, Protocol

from agent.settings import Settings
from agent.web.tokens import MAX_TOKEN_TTL_S

CENSUS_TTL_S: Final = 3.0
DISPATCH_PERIOD_S: Final = 60.0
# How long a person turned away because the service is full is asked to wait: "a few minutes".
FULL_RETRY_S: Final = 120

FULL_MESSAGE: Final = (
    "Lexvoz está atendiendo a todas las personas que puede en este momento. Vuelva a intentarlo en unos minutos."
)
UNAVAILABLE_MESSAGE: Final = "El servicio no está disponible en este momento. Vuelva a intentarlo en unos minutos."


PENDING_MESSAGE: Final = "Ya tiene varias sesiones abiertas que nadie ha usado. Use una de ellas o espere unos minutos."
# A client over its pending sessions is asked to wait about as long as a person takes to join one.
PENDING_RETRY_S: Final = 60


class RoomCensus(Protocol):
    """Our rooms (by prefix) that exist in livekit-server now, each with its participant count; `LiveKitRooms`
    is the real one."""

    async def our_rooms(self) -> dict[str, int]: ...


class Refusal(Exception):
    """The service cannot take this now: `status` (503, or 429 for one client's excess) with Retry-After and a
    Spanish message; `reason` for metrics."""

    def __init__(self, reason: str, message: str, retry_after_s: int, *, status: int = 503) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.retry_after_s = retry_after_s
        self.status = status


class DispatchBudget:
    """At most `per_minute` new dispatches in any 60 s (a sliding window; bounded by `per_minute` entries)."""

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._per_minute = per_minute
        self._clock = clock
        self._times: deque[float] = deque()

    def take(self) -> None:
        """Count one dispatch now, or raise Refusal("dispatch") when the minute's budget is spent."""
        now = self._clock()
        while self._times and now - self._times[0] >= DISPATCH_PERIOD_S:
            self._times.popleft()
        if len(self._times) >= self._per_minute:
            wait = math.ceil(DISPATCH_PERIOD_S - (now - self._times[0]))
            raise Refusal("dispatch", FULL_MESSAGE, max(1, wait))
        self._times.append(now)


class Capacity:
    """Admits a new conversation if the live count (see the module docstring) is under the cap."""

    def __init__(
        self,
        settings: Settings,
        census: RoomCensus,
        *,
        clock: Callable[[], float] = time.monotonic,
        census_ttl_s: float = CENSUS_TTL_S,
    ) -> None:
        self._max = settings.max_conversations
        self._census = census
        self._clock = clock
        self._census_ttl_s = census_ttl_s
        self._join_window_s = float(min(settings.token_ttl_s, MAX_TOKEN_TTL_S))
        self.dispatches = DispatchBudget(settings.max_dispatches_per_minute, clock=clock)
        self._max_pending_per_client = settings.max_pending_sessions_per_client
        # room -> (when its token was issued, the client it was issued to), oldest first
        self._issued: OrderedDict[str, tuple[float, str | None]] = OrderedDict()
        self._existing: frozenset[str] = frozenset()  # our rooms in the last census, occupied or not
        self._lock = asyncio.Lock()
        self._fetched_at: float | None = None
        self._live: frozenset[str] | None = None  # None: livekit-server did not answer the last census
        self.failure = ""  # why the last census failed (an exception's type name), for the operator's warning

    async def live_rooms(self) -> frozenset[str]:
        """The cached census, fetched again when older than its TTL; Refusal("livekit") when unavailable."""
        async with self._lock:
            now = self._clock()
            if self._fetched_at is None or now - self._fetched_at >= self._census_ttl_s:
                try:
                    rooms = await self._census.our_rooms()
                except Exception as exc:  # any failure to count is the same answer: closed (module docstring)
                    self._live, self.failure = None, type(exc).__name__
                else:
                    self._live = frozenset(name for name, people in rooms.items() if people > 0)
                    self._existing = frozenset(rooms)
                self._fetched_at = self._clock()
            live = self._live
        if live is None:
            raise Refusal("livekit", UNAVAILABLE_MESSAGE, math.ceil(self._census_ttl_s))
        return live

    def pending(self, live: frozenset[str]) -> int:
        """Sessions issued here within a token's lifetime whose room has not shown up in livekit-server."""
        now = self._clock()
        while self._issued:
            room, (issued_at, _client) = next(iter(self._issued.items()))
            if now - issued_at < self._join_window_s:
                break
            del self._issued[room]
        # A room that exists was joined (livekit-server creates it on the first join): occupied now, it is in
        # `live`; joined and left between two counts, it is still listed for a while, and no longer pending.
        for room in (live | self._existing).intersection(self._issued):
            del self._issued[room]
        return len(self._issued)

    def admit(self, live: frozenset[str], room: str, *, resumed: bool = False, client: str | None = None) -> None:
        """Take `room` as a new conversation (and a dispatch), or raise Refusal. A resumed room that is live
        already counts and dispatches nothing (its agent's dispatch was when the room was created). `client`
        (the per-client limits' key) may hold at most LEXVOZ_MAX_PENDING_SESSIONS_PER_CLIENT sessions nobody
        has joined yet: past that, 429 for that client alone, so a few addresses cannot hold the service full."""
        if resumed and room in live:
            return
        pending = self.pending(live)
        if client is not None:
            held = sum(1 for _issued_at, owner in self._issued.values() if owner == client)
            if held >= self._max_pending_per_client:
                raise Refusal("pending", PENDING_MESSAGE, PENDING_RETRY_S, status=429)
        if len(live) + pending >= self._max:
            raise Refusal("full", FULL_MESSAGE, FULL_RETRY_S)
        self.dispatches.take()
        self._issued[room] = (self._clock(), client)
        self._issued.move_to_end(room)
