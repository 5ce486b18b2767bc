"""Rooms left waiting while no worker was registered get their offer again as soon as one registers.

Why: livekit-server (1.13.5) offers a room's job once, and an offer made while no worker is registered goes
nowhere ("not dispatching agent job since no worker is available"); it never offers it again when a worker
registers. That happens on every livekit-server restart: the pages reconnect and open rooms within a second,
while the workers come back on livekit-agents' reconnect backoff (0, 2, 4 ... s). The page service replaces a
dispatch no worker took only once it is sure no job of it is on its way (`agent/web/dispatch.py`,
`OFFER_ANSWER_S`, 8 s), so those people waited 8.5 s plus a job start for an agent (recovery up to 17.6 s in
an hour's soak). The worker knows the moment it registers; no other part does. So on each registration it
offers those rooms again itself.

Which rooms: a room with a person in it and no agent of ours, whose every dispatch of our agent has no job and
was made more than `MARGIN_S` before this registration, so its offer ran while this worker was not yet known
(a dispatch's offer asks for workers when the dispatch is made, and livekit-server answers that it has none
only 5 s later). And only when no agent of ours is in any room: then no worker has served anything since
livekit-server started, so an offer made before this registration had no worker to go to. Where some agent
is in a room, other workers were registered all along; an offer of theirs may be accepted and not yet listed
(livekit-server lists a job only once it has heard from every agent server), and deleting it would end that
job, so those rooms are left to the page service's rule.

How: the same replacement the page service makes, deleting the dead dispatch first and then making a new one.
Deleting is also the claim: when several workers register at once (they share one backoff), the one whose
delete succeeds makes the new dispatch, and the others, told the dispatch is gone, leave that room alone.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

import aiohttp
from livekit import api

from agent.settings import Settings

log = logging.getLogger("lexvoz.worker")

# A dispatch made this close before the registration may have asked for workers after livekit-server had
# registered this one (the worker hears of its registration a moment later, and the clocks of two hosts
# differ by milliseconds under NTP); such a dispatch is left to the page service.
MARGIN_S: Final = 1.0
# Rooms looked at per registration; past this the rest wait for the page service (each costs one or two calls).
MAX_ROOMS: Final = 200
LIVEKIT_TIMEOUT_S: Final = 5.0
AGENT_NAME_ATTRIBUTE: Final = "lk.agent_name"  # livekit-server sets it on every agent it admits


class LiveKitAPI(Protocol):
    """The parts of livekit-api's `LiveKitAPI` this uses (tests pass a double)."""

    @property
    def room(self) -> api.room_service.RoomService: ...

    @property
    def agent_dispatch(self) -> api.agent_dispatch_service.AgentDispatchService: ...


@dataclass(frozen=True, slots=True)
class Offered:
    """What one pass did: rooms offered again, and why it stopped short (None when it looked at every room)."""

    rooms: tuple[str, ...] = ()
    skipped: str | None = None


def is_ours(participant: api.ParticipantInfo, agent_name: str) -> bool:
    return (
        participant.kind == api.ParticipantInfo.Kind.AGENT
        and participant.attributes.get(AGENT_NAME_ATTRIBUTE) == agent_name
    )


def left_waiting(dispatches: list[api.AgentDispatch], agent_name: str, registered_at: float) -> list[str]:
    """The ids of a room's dispatches of `agent_name` when every one is dead for sure by `registered_at` (Unix
    seconds): no job, made more than MARGIN_S before it. Empty when any may still bring an agent, or none."""
    ours = [d for d in dispatches if d.agent_name == agent_name]
    if not ours:
        return []
    for d in ours:
        if d.state.jobs or d.state.created_at / 1e9 >= registered_at - MARGIN_S:
            return []
    return [d.id for d in ours]


class WaitingRooms:
    """One pass over livekit-server's rooms after a registration of this worker (`offer_again`)."""

    def __init__(
        self,
        settings: Settings,
        *,
        connect: Callable[[], LiveKitAPI] | None = None,
        max_rooms: int = MAX_ROOMS,
    ) -> None:
        self._settings = settings
        self._connect = connect
        self._max_rooms = max_rooms

    def _client(self) -> api.LiveKitAPI:
        s = self._settings
        return api.LiveKitAPI(
            s.livekit_http_url,
            s.livekit_api_key,
            s.livekit_api_secret.get_secret_value(),
            timeout=aiohttp.ClientTimeout(total=LIVEKIT_TIMEOUT_S),
        )

    async def offer_again(self, registered_at: float | None = None) -> Offered:
        """Look for rooms left waiting and offer each again. Never raises for livekit-server's answers: a pass
        that fails is logged and leaves the rooms to the page service, as before this existed."""
        registered_at = time.time() if registered_at is None else registered_at
        if self._connect is not None:
            return await self._pass(self._connect(), registered_at)
        lk = self._client()
        try:
            return await self._pass(lk, registered_at)
        finally:
            await lk.aclose()

    async def _pass(self, lk: LiveKitAPI, registered_at: float) -> Offered:
        name = self._settings.agent_name
        try:
            waiting: list[tuple[str, list[str]]] = []
            listed = await lk.room.list_rooms(api.ListRoomsRequest())
            # Every room, not only those listed with participants: livekit-server updates a room's count a few
            # seconds after people join, and the rooms this is for were made seconds ago.
            rooms = [r.name for r in listed.rooms]
            for room in rooms[: self._max_rooms]:
                people = (await lk.room.list_participants(api.ListParticipantsRequest(room=room))).participants
                if any(is_ours(p, name) for p in people):
                    return Offered(skipped="an agent of ours is in a room: workers were registered all along")
                if not any(p.kind != api.ParticipantInfo.Kind.AGENT for p in people):
                    continue
                dead = left_waiting(list(await lk.agent_dispatch.list_dispatch(room)), name, registered_at)
                if dead:
                    waiting.append((room, dead))
            offered = [room for room, dead in waiting if await self._replace(lk, room, dead)]
        except (api.TwirpError, aiohttp.ClientError, TimeoutError) as exc:
            log.warning("rooms left waiting not checked: LiveKit did not answer (%s)", type(exc).__name__)
            return Offered(skipped="livekit-server did not answer")
        for room in offered:
            log.info("room left waiting while no worker was registered: offered again room=%s", room)
        skipped = f"{len(rooms) - self._max_rooms} rooms not looked at" if len(rooms) > self._max_rooms else None
        if skipped:
            log.warning("rooms left waiting: %s (the page service offers them again)", skipped)
        return Offered(rooms=tuple(offered), skipped=skipped)

    async def _replace(self, lk: LiveKitAPI, room: str, dead: list[str]) -> bool:
        """Delete the dead dispatches, then make one new; False when another worker deleted one first."""
        for dispatch_id in dead:
            try:
                await lk.agent_dispatch.delete_dispatch(dispatch_id, room)
            except api.TwirpError as exc:
                if exc.code == api.TwirpErrorCode.NOT_FOUND:
                    return False  # another worker (or the page service) replaced it already
                raise
        name = self._settings.agent_name
        await lk.agent_dispatch.create_dispatch(api.CreateAgentDispatchRequest(agent_name=name, room=room))
        return True
