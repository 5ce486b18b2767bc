"""`POST /api/agent`: ask again for an agent in the caller's own room while none has joined it.

Why: livekit-server offers a room's job once. When every worker is at its job limit, or none is running,
the offer fails and the room never gets an agent, however long the person waits: a slot that frees a
minute later helps nobody. The page calls this while it waits. The service checks that the caller is in
the room its token names and that no agent is there or on its way, then creates a new dispatch of our
agent; livekit-server offers the job again, and the first worker with a free slot takes it. A busy host
therefore serves people in turn instead of leaving some of them in an empty room.

Who may ask: a participant of the room, proven by the LiveKit join token this service minted for it
(signed with the API secret) and by its identity being in the room right now. The token is not used to
join anything here, and that presence check is what guards the room, so an expired token is still read
as proof for the length of a conversation: an agent lost mid-conversation can be replaced without the
page asking for a new token. Each room gets at most one new dispatch per `LEXVOZ_AGENT_RETRY_S`, so a
page (or a script) cannot keep livekit-server hunting for workers. Each client (`clients.py`) has its own
per-minute bucket of these requests, apart from its token requests, and a new dispatch counts against the
whole service's dispatches per minute (`capacity.py`: 503 with Retry-After when spent, which the page
waits out like any 503).

A dead worker's agent stays listed in its room until livekit-server's fixed 15 s ping timeout drops it. The
agent refreshes a sign of life (`lexvoz.heartbeat`, its worker's Unix time in ms); when the caller names an
agent it saw leave and that agent's sign of life is older than `HEARTBEAT_LOST_S` by this service's clock,
the service removes that participant and goes on as if no agent were there. Both clocks are servers' (kept
by NTP): a worker clock behind this one by more than the limit less a period would make a live agent look
dead, one ahead only delays the removal. A fresh agent, any participant that is not an agent, and an agent
that never sent a sign of life (an older worker) are never removed.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, Literal, Protocol

import aiohttp
from aiohttp import web
from livekit import api
from livekit.protocol import agent as agent_proto

from agent.settings import Settings
from agent.web.capacity import DispatchBudget, Refusal
from agent.web.limits import PeerRateLimiter
from agent.web.metrics import refused
from agent.web.session import (
    NO_STORE,
    SETTINGS_KEY,
    THROTTLE_KEY,
    RequestError,
    foreign_origin_refusal,
    full_response,
    json_response,
    peer_address,
    rate_limited,
    read_json_object,
)
from agent.web.tokens import IDENTITY_PREFIX, ROOM_PREFIX

log = logging.getLogger("lexvoz.web")

# Rooms whose last dispatch time is remembered; past this the oldest is forgotten (it could then ask early once).
MAX_TRACKED_ROOMS: Final = 10_000
# A job livekit-server says is pending or running, with no agent in the room yet: it is on its way for this long.
# livekit-server never marks a job whose worker died before its agent joined (it keeps the job as assigned), so
# past this the job is taken for lost and the room is offered again. A job process that is not ready in 10 s is
# killed by livekit-agents (`initialize_process_timeout`), and a ready one joins in a few seconds (at most 3.7 s
# over 323 jobs in an hour's soak on a saturated host). Too short costs one spare job, not a second agent: the
# worker whose agent finds another one in the room ends its job at once. Too long leaves the person waiting.
JOB_START_GRACE_S: Final = 15.0
# A dispatch listed with no job may still have one for this long. A registered worker answers an offer at once
# (its admission is a count in memory), but livekit-server (1.13.5) records the job in the room's dispatch only
# once it has asked every agent server whether it serves that agent, which takes up to its CheckEnabledTimeout
# (5 s) after each worker registration; a job accepted in those seconds is running but not listed. Past this the
# likely case is that no worker was registered (right after livekit-server restarts, before the workers are back,
# every offer goes nowhere), and such a dispatch is replaced, not waited out. Shorter, a request in those seconds
# deleted the dispatch and so ended the job its worker had just accepted (`tests/e2e/test_waiting_e2e.py`).
# The worker that registers offers such rooms again itself (`agent/waiting_rooms.py`) when it can tell that no
# other worker took them; this covers the rest.
OFFER_ANSWER_S: Final = 8.0
LIVEKIT_TIMEOUT_S: Final = 5.0
# The worker's sign of life and how old it may be (copies of agent/voice/heartbeat.py's, which this separate
# program does not import; tests/test_heartbeat.py pins them equal).
HEARTBEAT_ATTRIBUTE: Final = "lexvoz.heartbeat"
HEARTBEAT_LOST_S: Final = 10.0

_COMING: Final = frozenset({agent_proto.JobStatus.JS_PENDING, agent_proto.JobStatus.JS_RUNNING})

Answer = Literal["present", "joining", "offered", "requested"]


@dataclass(frozen=True, slots=True)
class RoomView:
    """What livekit-server says about one room, as far as asking for an agent goes."""

    caller_present: bool
    agent_present: bool
    agent_joining: bool = False  # a worker accepted the room and its agent has not joined yet
    offer_pending: bool = False  # an offer may still be waiting for a worker's answer
    unanswered: tuple[str, ...] = ()  # our dispatches that no worker took within OFFER_ANSWER_S (ids)
    silent_agent: str | None = None  # the agent the caller saw leave, still listed with a stale sign of life


class Rooms(Protocol):
    """The LiveKit calls this needs; `LiveKitRooms` is the real one, tests pass a double."""

    async def view(self, room: str, identity: str, agent_name: str, gone: str | None = None) -> RoomView | None:
        """None when the room does not exist. `gone`: an agent's identity the caller saw leave the room."""
        ...

    async def dispatch(self, room: str, agent_name: str, replacing: tuple[str, ...] = ()) -> None:
        """A new dispatch of `agent_name`, after deleting the dispatches `replacing` (ids) that no worker took."""
        ...

    async def remove(self, room: str, identity: str) -> None:
        """Remove a participant from the room (a silent agent: `RoomView.silent_agent`)."""
        ...


class LiveKitRooms:
    """`Rooms` over livekit-server's API (participants and agent dispatches of one room)."""

    def __init__(self, settings: Settings, *, clock: Callable[[], float] = time.time) -> None:
        self._settings = settings
        self._clock = clock
        self._api: api.LiveKitAPI | None = None

    def _lk(self) -> api.LiveKitAPI:
        if self._api is None:  # created on first use: it needs the running event loop
            s = self._settings
            self._api = api.LiveKitAPI(
                s.livekit_http_url,
                s.livekit_api_key,
                s.livekit_api_secret.get_secret_value(),
                timeout=aiohttp.ClientTimeout(total=LIVEKIT_TIMEOUT_S),
            )
        return self._api

    async def aclose(self) -> None:
        if self._api is not None:
            await self._api.aclose()
            self._api = None

    async def view(self, room: str, identity: str, agent_name: str, gone: str | None = None) -> RoomView | None:
        lk = self._lk()
        try:
            listed = await lk.room.list_participants(api.ListParticipantsRequest(room=room))
        except api.TwirpError as exc:
            if exc.code == api.TwirpErrorCode.NOT_FOUND:
                return None
            raise
        people = list(listed.participants)
        now = self._clock()
        silent = silent_agent(people, gone, now)
        agent_present = any(p.kind == api.ParticipantInfo.Kind.AGENT and p.identity != silent for p in people)
        joining = pending = False
        unanswered: list[str] = []
        if not agent_present:
            for dispatch in await lk.agent_dispatch.list_dispatch(room):
                if dispatch.agent_name == agent_name:
                    joining = joining or agent_joining(dispatch, now, gone)
                    pending = pending or offer_pending(dispatch, now)
                    if offer_unanswered(dispatch, now):
                        unanswered.append(dispatch.id)
        return RoomView(
            caller_present=any(p.identity == identity for p in people),
            agent_present=agent_present,
            agent_joining=joining,
            offer_pending=pending,
            unanswered=tuple(unanswered),
            silent_agent=silent,
        )

    async def our_rooms(self) -> dict[str, int]:
        """`capacity.RoomCensus`: our rooms (by prefix) and how many are in each, from one `ListRooms` call."""
        listed = await self._lk().room.list_rooms(api.ListRoomsRequest())
        return {r.name: r.num_participants for r in listed.rooms if r.name.startswith(ROOM_PREFIX)}

    async def dispatch(self, room: str, agent_name: str, replacing: tuple[str, ...] = ()) -> None:
        """Deleting first keeps the room to one agent: livekit-server waits for a deleted dispatch's offers still
        out and ends any job they produce, so a worker that answers the old offer late does not add a second."""
        lk = self._lk()
        for dispatch_id in replacing:
            try:
                await lk.agent_dispatch.delete_dispatch(dispatch_id, room)
            except api.TwirpError as exc:
                if exc.code != api.TwirpErrorCode.NOT_FOUND:  # already gone: nothing to replace
                    raise
        await lk.agent_dispatch.create_dispatch(api.CreateAgentDispatchRequest(agent_name=agent_name, room=room))

    async def remove(self, room: str, identity: str) -> None:
        try:
            await self._lk().room.remove_participant(api.RoomParticipantIdentity(room=room, identity=identity))
        except api.TwirpError as exc:
            if exc.code != api.TwirpErrorCode.NOT_FOUND:  # already gone (livekit-server timed it out): done
                raise


def heartbeat_age_s(participant: api.ParticipantInfo, now: float) -> float | None:
    """How old the participant's sign of life is by `now` (Unix seconds); None when it sent none readable.
    A value from the future (a worker clock ahead of this one) counts as fresh: age 0."""
    value = participant.attributes.get(HEARTBEAT_ATTRIBUTE, "")
    if not value.isascii() or not value.isdigit() or len(value) > 16:
        return None
    return max(0.0, now - int(value) / 1000)


def silent_agent(people: list[api.ParticipantInfo], gone: str | None, now: float) -> str | None:
    """`gone` when the caller named it and it is an agent of the room whose sign of life is older than
    HEARTBEAT_LOST_S: its worker died, and it holds the room until livekit-server times it out. Never a person,
    never an agent whose sign of life is fresh, never one that sent none (a worker from before the heartbeat)."""
    if not gone:
        return None
    for p in people:
        if p.identity == gone and p.kind == api.ParticipantInfo.Kind.AGENT:
            age = heartbeat_age_s(p, now)
            return gone if age is not None and age >= HEARTBEAT_LOST_S else None
    return None


def agent_joining(dispatch: api.AgentDispatch, now: float, gone: str | None = None) -> bool:
    """A worker accepted this dispatch's job and its agent may still be starting.

    livekit-server stamps times in Unix nanoseconds, and the room keeps a job as it was assigned, not always
    its later status (a worker that died between accepting the job and joining leaves it "running" for good),
    so a job counts only within its grace. Nor does the room's record change when the agent leaves: a job whose
    agent the caller saw leave (`gone`, the identity livekit-server gave it on assignment) is not coming, so a
    worker that died seconds into a conversation does not hold the room for the rest of the grace. A caller can
    only speed up its own room's next offer this way, at the usual pace."""
    return any(
        j.state.status in _COMING
        and now - j.state.started_at / 1e9 < JOB_START_GRACE_S
        and not (gone and j.state.participant_identity == gone)
        for j in dispatch.state.jobs
    )


def offer_pending(dispatch: api.AgentDispatch, now: float) -> bool:
    """No worker has taken this dispatch yet, and one may still answer (within OFFER_ANSWER_S of the offer)."""
    return not dispatch.state.jobs and now - dispatch.state.created_at / 1e9 < OFFER_ANSWER_S


def offer_unanswered(dispatch: api.AgentDispatch, now: float) -> bool:
    """No worker took this dispatch within OFFER_ANSWER_S: none was registered, or every one refused. It will
    never bring an agent (livekit-server offers a dispatch once), so the next dispatch replaces it."""
    return not dispatch.state.jobs and not offer_pending(dispatch, now)


class AgentRequests:
    """Decides, for one caller's request, whether its room needs a new dispatch, and makes it."""

    def __init__(
        self,
        settings: Settings,
        rooms: Rooms,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_rooms: int = MAX_TRACKED_ROOMS,
        budget: DispatchBudget | None = None,
    ) -> None:
        self._settings = settings
        self._rooms = rooms
        # The service's dispatches per minute, shared with new sessions (`Capacity.dispatches`).
        self._budget = budget or DispatchBudget(settings.max_dispatches_per_minute)
        self._clock = clock
        self._max_rooms = max_rooms
        self._verifier = api.TokenVerifier(
            settings.livekit_api_key,
            settings.livekit_api_secret.get_secret_value(),
            leeway=timedelta(seconds=settings.max_conversation_s),
        )
        self._last: OrderedDict[str, float] = OrderedDict()  # room -> when it last got a dispatch, oldest first

    @property
    def retry_after_s(self) -> float:
        return self._settings.agent_retry_s

    def caller(self, authorization: str | None) -> tuple[str, str]:
        """(room, identity) from `Authorization: Bearer <join token>`; RequestError(401) otherwise."""
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip() or len(token) > 4096:
            raise RequestError(401, "falta el token de la sesión", reason="token")
        try:
            claims = self._verifier.verify(token.strip())
        except Exception:  # the verifier raises whatever PyJWT raises: any failure is the same answer
            raise RequestError(401, "sesión no válida; empiece una nueva", reason="token") from None
        room = claims.video.room if claims.video else None
        identity = claims.identity
        if not room or not room.startswith(ROOM_PREFIX) or not identity.startswith(IDENTITY_PREFIX):
            raise RequestError(401, "sesión no válida; empiece una nueva", reason="token")
        return room, identity

    async def present(self, room: str, identity: str) -> bool:
        """Whether `identity` is in `room` right now, by livekit-server's participant list (False when the room
        does not exist); livekit's errors propagate."""
        view = await self._rooms.view(room, identity, self._settings.agent_name)
        return view is not None and view.caller_present

    async def request(self, room: str, identity: str, gone: str | None = None) -> Answer:
        """'present' (an agent is in the room), 'joining' (a worker took the room), 'offered' (an offer is still
        out: no new one yet) or 'requested' (a new offer was made now). `gone`: the identity of an agent the
        caller saw leave this room (or fall silent), whose job is then not counted as joining, and which is
        removed first if it is still listed with a stale sign of life."""
        name = self._settings.agent_name
        view = await self._rooms.view(room, identity, name, gone)
        if view is None or not view.caller_present:
            raise RequestError(
                404, "la sala ya no existe o usted no está en ella; empiece una nueva sesión", reason="room"
            )
        if view.silent_agent is not None:
            # Before any new dispatch: the new agent's worker ends a job for a room that already lists an agent.
            await self._rooms.remove(room, view.silent_agent)
            log.info("silent agent removed room=%s", room)
        if view.agent_present:
            return "present"
        if view.agent_joining:
            return "joining"
        if view.offer_pending:
            return "offered"
        now = self._clock()
        last = self._last.get(room)
        if last is not None and now - last < self.retry_after_s:
            raise RequestError(429, "espere un momento antes de volver a pedir un agente", reason="room")
        self._budget.take()  # Refusal when the service's dispatches this minute are spent
        self._remember(room, now)  # before the await: a concurrent request for this room waits its turn
        await self._rooms.dispatch(room, name, view.unanswered)
        return "requested"

    def _remember(self, room: str, now: float) -> None:
        self._last[room] = now
        self._last.move_to_end(room)
        while len(self._last) > self._max_rooms:
            self._last.popitem(last=False)


AGENTS_KEY: Final = web.AppKey("agent_requests", AgentRequests)
AGENT_LIMITER_KEY: Final = web.AppKey("agent_limiter", PeerRateLimiter)


def _agent_gone(body: dict[str, Any]) -> str | None:
    """The optional `{"left": "<agent identity>"}`: the agent the page saw leave (its worker died)."""
    left = body.get("left")
    if set(body) - {"left"} or (left is not None and (not isinstance(left, str) or not 0 < len(left) <= 256)):
        raise RequestError(400, "solicitud no válida: solo se admite el campo left (la identidad del agente)")
    return left


async def in_conversation_refusal(request: web.Request, what: str, kind: str) -> web.Response | None:
    """403 for another origin, 429 past the client's bucket of requests made during a conversation (asking for an
    agent, renewing a resume token: not its new sessions); None when the request may go on. `kind` names the
    throttled warning."""
    if (refusal := foreign_origin_refusal(request, what)) is not None:
        return refusal
    limiter = request.app[AGENT_LIMITER_KEY]
    return await rate_limited(request, limiter, peer_address(request), kind, what)


async def request_agent(request: web.Request) -> web.Response:
    """`POST /api/agent` with `Authorization: Bearer <join token>`: `{"agent": ..., "retry_after_s": N}`.
    An optional JSON body `{"left": "<identity>"}` names an agent the page saw leave the room.

    200 when an agent is in the room; 202 when one was requested now or is on its way (ask again after N
    seconds if none has joined); 401, 404 and 429 (too soon for this room, or this client's per-minute limit)
    as `{"error": ...}`; 503 when LiveKit does not answer or the service's dispatches this minute are spent.
    """
    if (refusal := await in_conversation_refusal(request, "agent request", "agent-rate")) is not None:
        return refusal
    throttle = request.app[THROTTLE_KEY]
    peer = peer_address(request)
    agents = request.app[AGENTS_KEY]
    retry = {"Retry-After": str(math.ceil(agents.retry_after_s)), **NO_STORE}
    try:
        room, identity = agents.caller(request.headers.get("Authorization"))
        gone = _agent_gone(await read_json_object(request, request.app[SETTINGS_KEY].web_body_timeout_s))
        answer = await agents.request(room, identity, gone)
    except RequestError as exc:
        refused(request, exc.reason)
        if exc.status == 401:
            throttle.warning("agent-token", "agent request refused: bad session token (peer %s)", peer)
        headers = retry if exc.status == 429 else NO_STORE
        return json_response({"error": exc.message}, status=exc.status, headers=headers)
    except Refusal as full:
        return full_response(request, full)
    except (api.TwirpError, aiohttp.ClientError, TimeoutError) as exc:
        refused(request, "livekit")
        throttle.warning("livekit", "agent request: LiveKit did not answer (%s)", type(exc).__name__)
        return json_response({"error": "no se pudo contactar con el servidor de salas"}, status=503, headers=retry)
    if answer == "requested":
        log.info("agent requested again room=%s peer=%s", room, peer)
    body = {"agent": answer, "retry_after_s": agents.retry_after_s}
    return json_response(body, status=200 if answer == "present" else 202, headers=retry)
