"""People who keep coming: each opens the page, asks typed and spoken questions, barges in now and then, leaves.

Why it is written like the page and not like a test: what the soak must prove is that a person is never left
waiting without being told. So each visit does what the page does (`POST /api/session`, join, ask the page
service again for an agent while none is there, join the same room again when livekit-server shut down, start
over after the page said the session ended) and notes, with times, every moment it waited and what ended the
wait: the thing it waited for, or a Spanish message the page would show (a `failed` research message, a failed
voice model, the room gone, that it is reconnecting). A wait of more than `stuck_after_s` that neither ended is
a stuck page. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from livekit import rtc

from bench.load import TYPED_QUESTIONS
from tests.person import AGENT_STATE_ATTRIBUTE, CHAT_TOPIC, TERMINAL, Person, first_agent_request_after_s

FAILURE_ATTRIBUTE = "lexvoz.failure"
MAX_ASKED_AGAIN = 2  # per visit: a person repeats a question the agent did not take, but not forever
# What the page does when livekit-server shuts down under it (web/src/App.tsx: REJOIN_WITHIN_MS, REJOIN_PAUSE_MS):
# it joins the same room again with its resume token, once a second, for up to a minute.
REJOIN_WITHIN_S = 60.0
REJOIN_PAUSE_S = 1.0


@dataclass
class Question:
    """One question and what the page showed for it (monotonic times)."""

    kind: str  # typed | spoken | barge_in
    asked_at: float
    call_id: str | None = None
    started_at: float | None = None
    outcome: str | None = None  # completed | failed | discarded
    reason: str | None = None
    ended_at: float | None = None
    told: str | None = None  # the page's message when the question ended without an outcome


@dataclass
class Wait:
    """A moment the page waited for something; `ended_by` is what ended it (None: it never ended: stuck)."""

    what: str
    since: float
    until: float
    ended_by: str | None
    seen: str = ""  # for a wait that never ended: what the page had of the agent then


@dataclass
class Visit:
    """One person's conversation, from opening the page to leaving (or the page saying it is over)."""

    index: int
    opened_at: float
    room: str | None = None
    left_at: float | None = None
    questions: list[Question] = field(default_factory=list)
    waits: list[Wait] = field(default_factory=list)
    told: list[tuple[float, str]] = field(default_factory=list)  # the page's Spanish messages, by kind
    agents: list[str] = field(default_factory=list)
    agent_left_at: list[float] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # started, never ended, while its agent and room stayed
    cut: list[str] = field(default_factory=list)  # started, then its agent or the room went away
    seen: dict[str, str] = field(default_factory=dict)  # call_id -> terminal type, as the page saw them
    asked_again: int = 0  # questions repeated because the agent replied without looking anything up
    error: str | None = None

    def stuck(self, after_s: float) -> list[Wait]:
        return [w for w in self.waits if w.ended_by is None and w.until - w.since > after_s]


def replied_without_research(person: Person, asked_at: float) -> bool:
    """Since the question, the agent began a line and finished it (it listens again), and no research started:
    what a person hears when the agent did not get the question (with the stand-in, which follows no
    instructions, its follow-up line stands for the agent's request to repeat)."""
    return person.spoke_since(asked_at) and person.agent_states[-1][1] == "listening"


@dataclass
class PeopleOptions:
    web_url: str
    conversations: int = 4
    stuck_after_s: float = 30.0
    questions_per_visit: tuple[int, int] = (2, 5)
    barge_in_share: float = 0.2
    seed: int = 7


class Page:
    """One visit driven the way the page behaves; `run()` returns what it saw."""

    def __init__(self, index: int, opts: PeopleOptions, http: aiohttp.ClientSession, rng: random.Random) -> None:
        self.opts = opts
        self.http = http
        self.rng = rng
        self.visit = Visit(index=index, opened_at=time.monotonic())
        self.person: Person | None = None
        self.disconnected = False
        self.server_shut_down = False  # livekit-server said it is shutting down: the page joins its room again
        self.stop_at = float("inf")  # when the soak ends (set by `run`)
        self._silent_noted: set[str] = set()  # agents the page judged lost by their silence

    # -- what the page would say ----------------------------------------------------------------

    def message(self) -> str | None:
        """The Spanish message the page shows now that ends any wait, or None."""
        person = self.person
        if self.disconnected:
            return "session_ended"  # «La sesión terminó. Pulse «Empezar» para iniciar otra.»
        if person is not None and person.agent_identity is not None and not person.agent_left:
            agent = person.room.remote_participants.get(person.agent_identity)
            if agent is not None and agent.attributes.get("lexvoz.model") == "failed":
                return f"model_failed:{agent.attributes.get(FAILURE_ATTRIBUTE, '')}"
        return None

    def snapshot(self) -> str:
        """What the page had of the agent (no conversation text): which condition a stuck wait lacked."""
        person = self.person
        if person is None:
            return "no room"
        agent = person.room.remote_participants.get(person.agent_identity or "")
        attrs = agent.attributes if agent is not None else {}
        return (
            f"agent={'present' if agent else 'absent'} left={person.agent_left} mic={person.mic_subscribed} "
            f"greeted={person.greeted} state={attrs.get(AGENT_STATE_ATTRIBUTE)} model={attrs.get('lexvoz.model')} "
            f"room={person.room.connection_state} messages={[m.type for m in person.messages][-4:]} "
            f"question={self.visit.questions[-1].kind if self.visit.questions else None} "
            f"agent_states={[state for _, state in person.agent_states][-6:]}"
        )

    def _note_message(self) -> str | None:
        said = self.message()
        if said is not None and not any(kind == said for _, kind in self.visit.told):
            self.visit.told.append((time.monotonic(), said))
        return said

    async def wait(self, what: str, check: Callable[[], Any], within: float | None = None) -> str:
        """Wait for `check()`; returns "ok", or the page's message that ended the wait. Raises TimeoutError
        (after recording a stuck wait) when neither came within `within` (default: `stuck_after_s`)."""
        assert self.person is not None
        bound = self.opts.stuck_after_s if within is None else within
        since = time.monotonic()
        result: dict[str, str] = {}

        def done() -> bool:
            if check():
                result["by"] = "ok"
                return True
            if self.server_shut_down:
                result["by"] = "rejoin"
                return True
            said = self._note_message()
            if said is not None:
                result["by"] = said
                return True
            if self._agent_lost():  # the page starts waiting for an agent again (`agent_ready`)
                result["by"] = "agent_left"
                return True
            return False

        try:
            await self.person.wait_for(done, what, bound)
        except TimeoutError:
            self.visit.waits.append(Wait(what, since, time.monotonic(), None, self.snapshot()))
            raise
        self.visit.waits.append(Wait(what, since, time.monotonic(), result["by"]))
        return result["by"]

    # -- the visit ------------------------------------------------------------------------------

    async def open(self, stop_at: float) -> bool:
        """`POST /api/session` and join, as the page does after Start; a refusal is shown and Start pressed
        again a little later. False when the soak ended first."""
        while time.monotonic() < stop_at:
            try:
                await self._join()
                return True
            except (RuntimeError, aiohttp.ClientError, TimeoutError, rtc.ConnectError) as exc:
                # the page shows the service's Spanish error, or «No se pudo conectar con el servidor de voz»
                self.visit.told.append((time.monotonic(), f"open_refused:{type(exc).__name__}"))
                if self.person is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(self.person.aclose(), 10)
                    self.person = None
                await asyncio.sleep(1)  # the person reads the message and presses Start again
        return False

    async def _join(
        self, resume: str | None = None, *, greeted_room: str | None = None, heard: frozenset[str] = frozenset()
    ) -> None:
        """`POST /api/session` (with `resume`, this tab's room again) and join it, watching the room as the page
        does. `greeted_room`: the room an agent already spoke to this person in (the page's hello says so there);
        `heard`: the agents that spoke to them there (`Person.known_agents`)."""
        person = await Person.from_page_service(self.opts.web_url, self.http, resume=resume)
        person.spoken_to = person.name == greeted_room
        person.known_agents = heard if person.spoken_to else frozenset()
        person.room.on("disconnected", self._on_disconnected)
        person.room.on("participant_disconnected", self._on_left)
        self.person = person
        self.visit.room = person.name
        await asyncio.wait_for(person.connect(), 20)

    def _on_disconnected(self, reason: object = None) -> None:
        if reason == rtc.DisconnectReason.SERVER_SHUTDOWN:
            self.server_shut_down = True  # the page says it is reconnecting and joins again (`rejoin`)
        else:
            self.disconnected = True
        if self.person is not None:
            self.person._poke()

    async def rejoin(self, stop_at: float) -> bool:
        """What the page does when livekit-server shuts down under it: say it is reconnecting, and join the same
        room again with its resume token, once a second while livekit-server is not back (the page service answers
        503 meanwhile), for up to REJOIN_WITHIN_S. The old room's searches that never ended went with it. False
        when the page gave up (it then says the session ended) or the soak ended first."""
        old = self.person
        assert old is not None
        self.visit.told.append((time.monotonic(), "rejoining"))  # «Se perdió la conexión… Reconectando…»
        self._account(old, room_gone=True)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(old.aclose(), 10)
        self.person, self.server_shut_down = None, False
        resume = old.session.get("resume")
        # the page keeps it per room: the new agent hears it in the hello (a fresh room starts afresh)
        greeted_room = old.name if old.spoken_to else None
        heard = frozenset(identity for identity, _line in old.heard)
        until = min(stop_at, time.monotonic() + REJOIN_WITHIN_S)
        while time.monotonic() < until:
            await asyncio.sleep(REJOIN_PAUSE_S)
            try:
                await self._join(resume, greeted_room=greeted_room, heard=heard)
                return True
            except (RuntimeError, aiohttp.ClientError, TimeoutError, rtc.ConnectError):
                if self.person is not None:
                    resume = self.person.session.get("resume")  # single use: the page keeps each answer's new one
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(self.person.aclose(), 10)
                self.person = None
        self.disconnected = True  # the page gives up and says the session ended
        self.visit.told.append((time.monotonic(), "session_ended"))
        return False

    def _on_left(self, participant: rtc.RemoteParticipant) -> None:
        person = self.person
        if (
            person is not None
            and participant.identity == person.agent_identity
            and participant.identity not in self._silent_noted
        ):
            # the microphone stays marked subscribed: livekit reports only a track's first subscription, and the
            # page, like a person, goes by the new agent's state ("listening"), not by who subscribed
            self.visit.agent_left_at.append(time.monotonic())

    def _agent_lost(self) -> bool:
        """The page's rule: the agent left, or no new sign of life arrived for 10 s (its worker died, and
        livekit-server lists it until its ping timeout). A silent agent counts as gone from the moment it is
        judged so, as on the page."""
        person = self.person
        if person is None or not person.agent_identity:
            return False
        if person.agent_silent and person.agent_identity not in self._silent_noted:
            self._silent_noted.add(person.agent_identity)
            if not person.agent_left:
                self.visit.agent_left_at.append(time.monotonic())
        return person.agent_lost

    async def agent_ready(self) -> str:
        """Until an agent hears us and listens: the page asks again for one while none is in the room, and joins
        its room again when livekit-server shut down under it."""
        if self.server_shut_down:
            return await self.agent_ready() if await self.rejoin(self.stop_at) else "session_ended"
        person = self.person
        assert person is not None
        if not person.agent_identity or self._agent_lost():
            started = time.monotonic()
            try:
                await self.wait_for_agent(self.opts.stuck_after_s)
            except (TimeoutError, RuntimeError):
                said = self._note_message()
                self.visit.waits.append(Wait("agent", started, time.monotonic(), said))
                if said is None:
                    raise
                return said
            if self.server_shut_down:
                self.visit.waits.append(Wait("agent", started, time.monotonic(), "rejoin"))
                return await self.agent_ready()
            self.visit.waits.append(Wait("agent", started, time.monotonic(), "ok"))
        if person.agent_identity and person.agent_identity not in self.visit.agents:
            self.visit.agents.append(person.agent_identity)
        by = await self.wait("agent listening", person.listening)
        return await self.agent_ready() if by in ("agent_left", "rejoin") else by

    async def wait_for_agent(self, within: float) -> None:
        """What the page does while no agent is in the room (docs/protocol.md, waiting for a free agent): after
        AGENT_REQUEST_AFTER_S (AGENT_LOST_REQUEST_AFTER_S once it lost one), `POST /api/agent` at the pace the
        service names, naming the agent it saw leave or fall silent, if any."""
        person = self.person
        assert person is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        pause = first_agent_request_after_s(person.agent_identity is not None)
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"room {person.name}: no agent within {within:.0f} s")
            with contextlib.suppress(TimeoutError):
                await person.wait_for(
                    lambda: (person.agent_identity and not self._agent_lost()) or self.server_shut_down,
                    "agent",
                    min(pause, remaining),
                )
                return  # an agent came, or livekit-server shut down and the page joins the room again
            if self.message() is not None:
                raise RuntimeError("the page said the session is over")
            headers = {"Authorization": f"Bearer {person.session['token']}"}
            left = person.agent_identity if self._agent_lost() else None
            url = f"{self.opts.web_url.rstrip('/')}/api/agent"
            try:
                async with self.http.post(
                    url, headers=headers, json={"left": left} if left else None, timeout=aiohttp.ClientTimeout(total=15)
                ) as resp:
                    if resp.status in (401, 403, 404):
                        raise RuntimeError(f"POST /api/agent answered {resp.status}")
                    pause = min(30.0, max(2.0, float(resp.headers.get("Retry-After", "5"))))
            except (aiohttp.ClientError, TimeoutError):
                continue  # as the page does: a failed request is asked again at the same pace

    async def ask(self, kind: str, seen: set[str]) -> Question:
        person = self.person
        assert person is not None
        question = Question(kind=kind, asked_at=time.monotonic())
        self.visit.questions.append(question)
        if kind == "typed":
            text = TYPED_QUESTIONS[self.rng.randrange(len(TYPED_QUESTIONS))]
            await person.room.local_participant.send_text(text, topic=CHAT_TOPIC)
        else:
            await person.mic.speak()
        question.asked_at = time.monotonic()
        by = await self.wait(
            "research started",
            lambda: person.first("started", exclude=seen) or replied_without_research(person, question.asked_at),
        )
        if by != "ok":
            question.told = by
            return question
        started = person.first("started", exclude=seen)
        if started is None:  # the agent said a whole line and looked nothing up: heard as "please say it again"
            question.told = "replied_without_research"
            return question
        seen.add(started.call_id)
        question.call_id, question.started_at = started.call_id, started.at
        by = await self.wait("research outcome", lambda: person.outcome_of(started.call_id))
        outcome = person.outcome_of(started.call_id)
        if outcome is None:
            question.told = by
            return question
        question.outcome, question.ended_at = outcome.type, outcome.at
        question.reason = outcome.body.get("reason")
        return question

    async def run(self, stop_at: float) -> Visit:
        self.stop_at = stop_at
        try:
            if not await self.open(stop_at):
                return self.visit
            seen: set[str] = set()
            count = self.rng.randint(*self.opts.questions_per_visit)
            asked = 0
            while asked < count and time.monotonic() < stop_at:
                if await self.agent_ready() != "ok":
                    break  # the page said the conversation is over: this person leaves
                barge = asked > 0 and self.rng.random() < self.opts.barge_in_share
                if barge:
                    await self._until_speaking()
                kind = "barge_in" if barge else ("typed" if asked % 2 == 0 else "spoken")
                question = await self.ask(kind, seen)
                if question.told == "replied_without_research" and self.visit.asked_again < MAX_ASKED_AGAIN:
                    # What the agent says when the model's link cut the person's question mid-sentence: it apologises
                    # and asks for the question again. A person repeats it; the count is reported, so an agent that
                    # talks past questions shows as many repeats, and past MAX_ASKED_AGAIN the question counts.
                    self.visit.asked_again += 1
                    continue
                if question.told in ("agent_left", "rejoin"):
                    # The agent was lost before it answered (its worker died, or livekit-server shut down and the
                    # page joined the room again): the page gets another, and the person asks the new agent again.
                    # Counting this question would let the last one of a visit end the visit here, at the loss,
                    # leaving the page's recovery unseen and the visit judged neither told nor recovered.
                    continue
                asked += 1
                if question.told is not None:
                    break  # the page said the conversation is over: this person leaves
                if question.outcome == "completed" and self.rng.random() < self.opts.barge_in_share:
                    continue  # the next question barges in over this answer
        except TimeoutError:
            pass  # recorded as a stuck wait; the person gives up and leaves
        except Exception as exc:
            self.visit.error = f"{type(exc).__name__}: {exc}"
        finally:
            await self.leave()
        return self.visit

    async def _until_speaking(self) -> None:
        person = self.person
        assert person is not None

        def speaking() -> bool:
            agent = person.room.remote_participants.get(person.agent_identity or "")
            return agent is not None and agent.attributes.get(AGENT_STATE_ATTRIBUTE) == "speaking"

        with contextlib.suppress(TimeoutError):
            await person.wait_for(speaking, "agent speaking", 10)

    async def leave(self) -> None:
        self.visit.left_at = time.monotonic()
        person = self.person
        if person is None:
            return
        self._account(person, room_gone=self.disconnected)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(person.aclose(), 10)

    def _account(self, person: Person, *, room_gone: bool) -> None:
        """What the page saw of one room's searches: each ended one, and each that never ended, as cut when its
        agent or the room went away first and as lost otherwise."""
        cut = set(self.visit_gone_calls(person, room_gone=room_gone))
        for message in person.messages:
            if message.type in TERMINAL:
                self.visit.seen[message.call_id] = message.type
        for call_id in person.lost_evidence():
            (self.visit.cut if call_id in cut else self.visit.lost).append(call_id)

    def visit_gone_calls(self, person: Person, *, room_gone: bool) -> list[str]:
        """Calls started before their agent left or the room went away: nobody is left to end them."""
        if room_gone:
            return [m.call_id for m in person.messages if m.type == "started"]
        if not self.visit.agent_left_at:
            return []
        last_left = max(self.visit.agent_left_at)
        return [m.call_id for m in person.messages if m.type == "started" and m.at <= last_left]


async def keep_people_coming(opts: PeopleOptions, stop_at: float) -> list[Visit]:
    """`opts.conversations` people at once until `stop_at`; whoever leaves is followed by someone new."""
    rng = random.Random(opts.seed)
    visits: list[Visit] = []
    counter = iter(range(1_000_000))
    async with aiohttp.ClientSession() as http:

        async def slot(offset: float) -> None:
            await asyncio.sleep(offset)  # stagger the first arrivals, as people do
            while time.monotonic() < stop_at:
                page = Page(next(counter), opts, http, random.Random(rng.random()))
                visits.append(await page.run(stop_at))
                await asyncio.sleep(1.0)  # the next person opens the page

        await asyncio.gather(*(slot(i * 2.0) for i in range(opts.conversations)))
    return visits
