"""A simulated person for load and cluster tests: a token from the page service, a microphone, questions.

The end-to-end room tests keep their own richer participant; this one is lean because dozens of them
run in one process. It gets its room from `POST /api/session` like the page does, publishes a microphone
that sends silence with bursts of tone where a person would speak (the Realtime stand-in's energy VAD
turns a burst into a user turn), types questions on `lk.chat`, and records with timestamps what the
agent publishes on `lexvoz.research` and whether the agent is still in the room. Every wait is bounded
and wakes on room events, never on a fixed sleep.

It also talks to an agent that is not Lexvoz (the benchmarks' bare livekit-agents baseline): with
`lexvoz=False` it knows the agent hears it without Lexvoz's model attribute, and `ask_aloud` asks a question
and waits for the spoken answer without expecting evidence. `AgentAudioWatch` notes every onset of the agent's
voice, for the voice-to-voice latency benchmark.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import numpy as np
from livekit import rtc

from agent.voice import page_hello
from agent.voice.heartbeat import HEARTBEAT_ATTRIBUTE, HEARTBEAT_LOST_S

T = TypeVar("T")

RESEARCH_TOPIC = "lexvoz.research"
CHAT_TOPIC = "lk.chat"
TRANSCRIPTION_TOPIC = "lk.transcription"
AGENT_STATE_ATTRIBUTE = "lk.agent.state"
MODEL_ATTRIBUTE = "lexvoz.model"
# The agent's voice is "heard" from the first frame with a sample at least this loud (int16): the stand-in's
# quietest voice peaks near 1,000, and the agent's track carries digital silence (0) between its lines.
AGENT_AUDIO_THRESHOLD = 100
# Silence (seconds of audio) before a loud frame for it to start a new burst of the agent's voice: see AgentAudioWatch.
ONSET_GAP_S = 0.25
WATCH_FRAME_MS = 50  # the frames AgentAudioWatch reads the agent's voice in: see there
SAMPLE_RATE = 48_000
FRAME_MS = 100
SAMPLES_PER_FRAME = SAMPLE_RATE * FRAME_MS // 1000
TERMINAL = frozenset({"completed", "failed", "discarded"})
# What the page does while no agent is in the room (web/src/agentRequest.ts, AGENT_REQUEST_AFTER_MS): its first
# `POST /api/agent` comes this long after the waiting began, or AGENT_LOST_REQUEST_AFTER_S after it lost an agent.
AGENT_REQUEST_AFTER_S = 8.5
AGENT_LOST_REQUEST_AFTER_S = 3.5


def first_agent_request_after_s(lost_one: bool) -> float:
    """When the page first asks for an agent: sooner once it lost one (its job is long listed)."""
    return AGENT_LOST_REQUEST_AFTER_S if lost_one else AGENT_REQUEST_AFTER_S


def tone_frames(seconds: float = 1.0, level: float = 0.3) -> list[rtc.AudioFrame]:
    """Three voice-band tones, loud enough for the stand-in's VAD after resampling and Opus."""
    n = int(SAMPLE_RATE * seconds)
    t = np.arange(n) / SAMPLE_RATE
    wave = sum(math.pow(0.6, k) * np.sin(2 * np.pi * f * t) for k, f in enumerate((220.0, 440.0, 660.0)))
    pcm = (wave / np.max(np.abs(wave)) * level * 32767).astype(np.int16)
    return [
        rtc.AudioFrame(pcm[i : i + SAMPLES_PER_FRAME].tobytes(), SAMPLE_RATE, 1, SAMPLES_PER_FRAME)
        for i in range(0, n - SAMPLES_PER_FRAME + 1, SAMPLES_PER_FRAME)
    ]


_TONE: list[rtc.AudioFrame] = []


class Microphone:
    """Continuous frames (the stand-in ends a turn after 500 ms of silence in the audio itself).

    100 ms per frame: the native side still sends 20 ms Opus packets, so the room hears the same audio, but
    each frame is a round trip across the native boundary, and at 20 ms dozens of simulated people cost the
    load generator about a third more CPU (measured side by side, bench/load.py)."""

    def __init__(self) -> None:
        self.source = rtc.AudioSource(SAMPLE_RATE, 1, queue_size_ms=2 * FRAME_MS)
        if not _TONE:
            _TONE.extend(tone_frames())
        self._silence = rtc.AudioFrame(bytes(SAMPLES_PER_FRAME * 2), SAMPLE_RATE, 1, SAMPLES_PER_FRAME)
        self._burst_left = 0
        self._burst_done: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None

    async def publish(self, room: rtc.Room) -> None:
        track = rtc.LocalAudioTrack.create_audio_track("microfono", self.source)
        options = rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE)
        await room.local_participant.publish_track(track, options)
        self._task = asyncio.create_task(self._run(), name="fake-microphone")

    async def speak(self, seconds: float = 1.0) -> None:
        """Queue `seconds` of tone; returns when the burst has been handed to the source."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._burst_done = done
        self._burst_left = round(seconds * 1000 / FRAME_MS)
        await done

    async def _run(self) -> None:
        i = 0
        while True:  # ends when aclose() cancels it
            if self._burst_left > 0:
                frame = _TONE[i % len(_TONE)]
                i += 1
                self._burst_left -= 1
                if self._burst_left == 0 and self._burst_done is not None and not self._burst_done.done():
                    self._burst_done.set_result(None)
            else:
                frame = self._silence
            await self.source.capture_frame(frame)  # blocks while the queue is full: real-time pacing

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.source.aclose()


@dataclass
class Message:
    """One `lexvoz.research` message and when it arrived (monotonic seconds)."""

    body: dict[str, Any]
    sender: str
    at: float

    @property
    def type(self) -> str:
        return str(self.body.get("type"))

    @property
    def call_id(self) -> str:
        return str(self.body.get("call_id"))


@dataclass
class Person:
    """One person in one room; `session` is the page service's answer (url, token, room, identity)."""

    session: dict[str, str]
    room: rtc.Room = field(default_factory=rtc.Room)
    mic: Microphone = field(default_factory=Microphone)
    messages: list[Message] = field(default_factory=list)
    agent_identity: str | None = None
    agent_left: bool = False
    greeted: bool = False
    spoken_to: bool = False  # an agent has spoken to this person in this room (the page's hello says so)
    heard: list[tuple[str, str]] = field(default_factory=list)  # (agent identity, line) of every finished agent line
    # Agents this person heard speak in this room before its connection was replaced (the page rejoined after
    # livekit-server shut down). Such an agent may come back itself (its own connection reconnects to the room),
    # with its conversation and nothing new to say; the person, who sees it listening under the transcript so far,
    # does not wait for it to speak again.
    known_agents: frozenset[str] = frozenset()
    agent_joined_at: float = 0.0  # when the current agent joined (monotonic)
    mic_subscribed: bool = False
    lexvoz: bool = True  # False: the agent is the bare baseline (no Lexvoz attributes, no evidence)
    agent_states: list[tuple[float, str]] = field(default_factory=list)  # (monotonic, lk.agent.state) as changed
    heartbeat_at: float | None = None  # when the agent's latest new sign of life arrived (monotonic); None: none yet
    # When each step of joining first happened (monotonic), for the load benchmark's breakdown of a join: "in_room"
    # (our connection is up), "agent_joined", "mic_subscribed", "agent_started" (its state is past initializing),
    # "model_connected" (Lexvoz's voice model attribute).
    first_at: dict[str, float] = field(default_factory=dict)
    _silence_timer: asyncio.TimerHandle | None = None
    _signal: asyncio.Event = field(default_factory=asyncio.Event)
    _readers: set[asyncio.Task[None]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.room.on("data_received", self._on_data)
        self.room.on("participant_connected", self._on_joined)
        self.room.on("participant_disconnected", self._on_left)
        self.room.on("participant_attributes_changed", self._on_attributes)
        self.room.on("local_track_subscribed", self._on_mic_subscribed)
        self.room.register_text_stream_handler(RESEARCH_TOPIC, self._on_research_stream)
        self.room.register_text_stream_handler(TRANSCRIPTION_TOPIC, self._on_transcription)

    @classmethod
    async def from_page_service(
        cls, web_url: str, http: aiohttp.ClientSession, *, lexvoz: bool = True, resume: str | None = None
    ) -> Person:
        """What the page does: `POST /api/session` for a fresh room and a token that dispatches the agent; with
        `resume` (the service's resume token from the last answer), the same room again, as after a reload or
        when livekit-server shut down under the page (web/src/App.tsx)."""
        url = f"{web_url.rstrip('/')}/api/session"
        body_out = {"resume": resume} if resume else {}
        async with http.post(url, json=body_out, timeout=aiohttp.ClientTimeout(total=15)) as resp:
            if resume and resp.status in (400, 401):  # as the page does: a refused resume token gets a fresh room
                return await cls.from_page_service(web_url, http, lexvoz=lexvoz)
            if resp.status != 200:
                raise RuntimeError(f"POST /api/session answered {resp.status}: {await resp.text()}")
            body = await resp.json()
        session = {k: str(body[k]) for k in ("url", "token", "room", "identity")}
        if body.get("resume"):
            session["resume"] = str(body["resume"])
        return cls(session, lexvoz=lexvoz)

    @property
    def name(self) -> str:
        return self.session["room"]

    @property
    def agent_silent(self) -> bool:
        """The page's rule (web/src/heartbeat.ts): the agent sent a sign of life, and no new one has arrived for
        HEARTBEAT_LOST_S (its worker died; livekit-server still lists it until its ping timeout)."""
        return self.heartbeat_at is not None and time.monotonic() - self.heartbeat_at >= HEARTBEAT_LOST_S

    @property
    def agent_lost(self) -> bool:
        """The agent left the room, or fell silent: either way the page asks for another."""
        return self.agent_left or self.agent_silent

    async def wait_for_agent(self, web_url: str, http: aiohttp.ClientSession, within: float) -> int:
        """What the page does while no agent has joined: after AGENT_REQUEST_AFTER_S, ask the page service for
        one (`POST /api/agent`, proven by this room's token) every time it says to, until one joins (sooner,
        AGENT_LOST_REQUEST_AFTER_S, when it lost one). Returns how many times it asked."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        pause = first_agent_request_after_s(self.agent_identity is not None)
        asked = 0
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"room {self.name}: no agent within {within:.0f} s")
            with contextlib.suppress(TimeoutError):
                await self.wait_for(lambda: self.agent_identity and not self.agent_lost, "agent", min(pause, remaining))
                return asked
            headers = {"Authorization": f"Bearer {self.session['token']}"}
            url = f"{web_url.rstrip('/')}/api/agent"
            asked += 1
            try:
                async with http.post(url, headers=headers, timeout=aiohttp.ClientTimeout(total=15)) as resp:
                    if resp.status in (401, 403, 404):
                        raise RuntimeError(f"POST /api/agent answered {resp.status}: {await resp.text()}")
                    pause = min(30.0, max(2.0, float(resp.headers.get("Retry-After", "5"))))
            except (aiohttp.ClientError, TimeoutError):
                continue  # as the page does: a failed request is asked again at the same pace

    async def connect(self) -> None:
        await self.room.connect(self.session["url"], self.session["token"])
        self._mark("in_room")
        for participant in self.room.remote_participants.values():
            self._on_joined(participant)
        await self.mic.publish(self.room)

    async def aclose(self) -> None:
        await self.mic.aclose()
        await self.room.disconnect()
        for task in list(self._readers):
            task.cancel()
        if self._silence_timer is not None:
            self._silence_timer.cancel()

    # -- what arrives ---------------------------------------------------------------------------

    def _mark(self, step: str) -> None:
        self.first_at.setdefault(step, time.monotonic())

    def _poke(self) -> None:
        self._signal.set()
        self._signal = asyncio.Event()

    def _on_joined(self, participant: rtc.RemoteParticipant) -> None:
        if participant.kind == rtc.ParticipantKind.PARTICIPANT_KIND_AGENT:
            if participant.identity != self.agent_identity:
                # A new agent (its worker replaced a lost one) greets again, and until its audio input is up what
                # is said is not heard: words spoken within a second of its joining never reach the model. The
                # page's person waits for this agent's greeting as for the first one.
                self.greeted = participant.identity in self.known_agents
                self.heartbeat_at = None
                self.agent_joined_at = time.monotonic()
                self._mark("agent_joined")
                self._track(asyncio.create_task(self._say_hello(participant.identity)))
            self.agent_identity = participant.identity
            self.agent_left = False
            if participant.attributes.get(AGENT_STATE_ATTRIBUTE, "initializing") != "initializing":
                self._mark("agent_started")
            if participant.attributes.get(MODEL_ATTRIBUTE) == "connected":
                self._mark("model_connected")
            if HEARTBEAT_ATTRIBUTE in participant.attributes and self.heartbeat_at is None:
                self._heartbeat_arrived()
        self._poke()

    async def _say_hello(self, identity: str) -> None:
        """What the page does when an agent joins (web/src/pageHello.ts): tell it whether an agent has already
        spoken to this person in this room, so a replacement does not greet them again."""
        hello = page_hello.Hello(resumed=self.spoken_to).model_dump_json().encode()
        with contextlib.suppress(Exception):  # as on the page: without a hello the agent greets in full
            await self.room.local_participant.publish_data(
                hello, reliable=True, topic=page_hello.TOPIC, destination_identities=[identity]
            )

    def _heartbeat_arrived(self) -> None:
        """A new sign of life: the agent counts as lost HEARTBEAT_LOST_S from now unless another arrives. The
        timer wakes every wait then, as the page's timer re-renders it (a silent agent sends no event)."""
        self.heartbeat_at = time.monotonic()
        if self._silence_timer is not None:
            self._silence_timer.cancel()
        self._silence_timer = asyncio.get_running_loop().call_later(HEARTBEAT_LOST_S + 0.05, self._poke)

    def _on_attributes(self, changed: dict[str, str], participant: rtc.Participant) -> None:
        state = changed.get(AGENT_STATE_ATTRIBUTE)
        if state is not None and participant.identity == self.agent_identity:
            self.agent_states.append((time.monotonic(), state))
            if state != "initializing":
                self._mark("agent_started")
        if changed.get(MODEL_ATTRIBUTE) == "connected" and participant.identity == self.agent_identity:
            self._mark("model_connected")
        if HEARTBEAT_ATTRIBUTE in changed and participant.identity == self.agent_identity:
            self._heartbeat_arrived()
        self._poke()

    def _on_left(self, participant: rtc.RemoteParticipant) -> None:
        if participant.identity == self.agent_identity:
            self.agent_left = True
        self._poke()

    def _on_mic_subscribed(self, _track: rtc.Track) -> None:
        self.mic_subscribed = True  # only the agent subscribes to our microphone
        self._mark("mic_subscribed")
        self._poke()

    def _on_data(self, packet: rtc.DataPacket) -> None:
        if packet.topic == RESEARCH_TOPIC:
            sender = packet.participant.identity if packet.participant else ""
            self._record(packet.data.decode("utf-8"), sender)

    def _on_research_stream(self, reader: rtc.TextStreamReader, identity: str) -> None:
        async def read() -> None:
            with contextlib.suppress(rtc.data_stream.StreamError):  # the room closed mid-stream
                self._record(await reader.read_all(), identity)

        self._track(asyncio.create_task(read()))

    def _on_transcription(self, reader: rtc.TextStreamReader, identity: str) -> None:
        async def read() -> None:
            try:
                text = await reader.read_all()
            except rtc.data_stream.StreamError:  # the room closed mid-stream
                return
            if identity == self.agent_identity and text:
                self.greeted = self.spoken_to = True
                self.heard.append((identity, text))
            self._poke()

        self._track(asyncio.create_task(read()))

    def _track(self, task: asyncio.Task[None]) -> None:
        self._readers.add(task)
        task.add_done_callback(self._readers.discard)

    def _record(self, text: str, sender: str) -> None:
        self.messages.append(Message(json.loads(text), sender, time.monotonic()))
        self._poke()

    # -- waiting --------------------------------------------------------------------------------

    async def wait_for(self, check: Callable[[], T | None], what: str, within: float) -> T:
        """Wait until `check()` is truthy; every room event re-checks. TimeoutError names what was missing."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            signal = self._signal
            value = check()
            if value:
                return value
            remaining = deadline - loop.time()
            if remaining <= 0:
                seen = [(m.type, m.call_id) for m in self.messages]
                raise TimeoutError(f"room {self.name}: no {what} within {within:.0f} s; messages so far: {seen}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(signal.wait(), remaining)

    def listening(self) -> bool:
        """The agent has joined, greeted to the end, subscribed to our microphone, and listens.

        The greeting is over once its words arrived, or once the agent has spoken and listens again: a person
        whose connection livekit-server replaced while the agent greeted (their node restarted) never receives
        those words, but sees the agent speak and then listen, and asks."""
        if self.agent_identity is None or self.agent_lost or not self.mic_subscribed:
            return False
        if not (self.greeted or self.spoke_since(self.agent_joined_at)):
            return False
        agent = self.room.remote_participants.get(self.agent_identity)
        return agent is not None and agent.attributes.get(AGENT_STATE_ATTRIBUTE) == "listening"

    def hears(self) -> bool:
        """The agent is in the room, subscribed to our microphone, and its voice model is connected.

        From here on what the person says is heard, during the greeting too (speaking over it interrupts).
        """
        if self.agent_identity is None or self.agent_lost or not self.mic_subscribed:
            return False
        agent = self.room.remote_participants.get(self.agent_identity)
        if agent is None:
            return False
        if not self.lexvoz:  # no model attribute: the agent's session has started (it is past initializing)
            return agent.attributes.get(AGENT_STATE_ATTRIBUTE, "initializing") != "initializing"
        return agent.attributes.get(MODEL_ATTRIBUTE) == "connected"

    async def wait_until_heard(self, within: float) -> None:
        await self.wait_for(self.hears, "agent that hears us", within)

    async def wait_until_listening(self, within: float) -> None:
        await self.wait_for(self.listening, "greeting from an agent that then listens", within)

    def first(self, kind: str, *, exclude: set[str] | frozenset[str] = frozenset()) -> Message | None:
        return next((m for m in self.messages if m.type == kind and m.call_id not in exclude), None)

    def outcome_of(self, call_id: str) -> Message | None:
        return next((m for m in self.messages if m.call_id == call_id and m.type in TERMINAL), None)

    async def ask(self, *, typed: str | None, within: float, exclude: set[str]) -> tuple[Message, Message]:
        """One question, typed (`typed`) or spoken (None); returns its `started` and terminal message."""
        if typed is not None:
            await self.room.local_participant.send_text(typed, topic=CHAT_TOPIC)
        else:
            await self.mic.speak()
        started = await self.wait_for(lambda: self.first("started", exclude=exclude), "started message", within)
        outcome = await self.wait_for(lambda: self.outcome_of(started.call_id), "evidence outcome", within)
        return started, outcome

    def spoke_since(self, mark: float) -> bool:
        """The agent has been speaking at some moment after `mark` (monotonic)."""
        return any(at >= mark and state == "speaking" for at, state in self.agent_states)

    async def ask_aloud(self, *, typed: str | None, within: float) -> float:
        """One question, typed or spoken (None), to any agent: returns once the agent has spoken after it and
        listens again (the answer is over). No evidence is expected: this is how the benchmarks talk to the bare
        baseline agent, so its conversations last as long as Lexvoz's. Returns when the answer began (monotonic)."""
        mark = time.monotonic()
        if typed is not None:
            await self.room.local_participant.send_text(typed, topic=CHAT_TOPIC)
        else:
            await self.mic.speak()
        await self.wait_for(lambda: self.spoke_since(mark), "spoken answer", within)
        began = next(at for at, state in self.agent_states if at >= mark and state == "speaking")
        await self.wait_until_listening(within)
        return began

    def agent_audio_track(self) -> rtc.RemoteAudioTrack | None:
        """The agent's voice, once we are subscribed to it."""
        agent = self.room.remote_participants.get(self.agent_identity or "")
        if agent is None:
            return None
        for publication in agent.track_publications.values():
            if isinstance(publication.track, rtc.RemoteAudioTrack):
                return publication.track
        return None

    def lost_evidence(self) -> list[str]:
        """Call ids that were `started` but never completed, failed or were discarded."""
        return [m.call_id for m in self.messages if m.type == "started" and self.outcome_of(m.call_id) is None]


class AgentAudioWatch:
    """Notes every onset of the agent's voice while it runs: the first loud frame after a gap of silence.

    One time per question is not enough: when the host is saturated, the previous line's last audio can still be on
    its way through the room (its tail) after the person has asked the next question, and the first loud frame
    heard after the question is then that tail, not the answer. So the watch keeps every onset with its time, and
    the benchmark picks the first one at or after the stand-in wrote the answer's first audio.

    An onset needs `ONSET_GAP_S` of silence before it, counted in the audio itself (samples, not wall time, so that
    frames delivered in a burst count for what they hold): longer than a stutter inside one line (a lost packet, a
    playout that ran dry for a few frames on a busy host), far shorter than the gap between two lines, which is at
    least the person's question and the stand-in's 500 ms of end-of-turn silence. A watch that starts while the
    agent is already speaking has seen no gap, so that line is not an onset.

    Reading the agent's audio costs the load generator a frame event per frame for as long as the watch runs (one
    per person, for the whole of its questions): frames of `WATCH_FRAME_MS`, not the stream's default 10 ms (ten
    people watched throughout at 10 ms are a thousand Python events a second, on a host the 10 conversations
    already saturate). An onset's time is then placed at its first loud sample within the frame: the frame's last
    sample arrived when the frame was delivered, and the room delivers audio in real time, so the first loud
    sample arrived the rest of the frame earlier."""

    def __init__(self, track: rtc.RemoteAudioTrack, threshold: int = AGENT_AUDIO_THRESHOLD) -> None:
        self.track = track
        self.threshold = threshold
        self.onsets: list[tuple[float, int]] = []  # (monotonic: when its first loud sample reached us, frame's peak)
        self._silent_s = 0.0  # silence heard since the last loud frame (or since the start)
        self._onset = asyncio.Event()
        self._stream: rtc.AudioStream | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._stream = rtc.AudioStream(
            self.track, sample_rate=SAMPLE_RATE, num_channels=1, frame_size_ms=WATCH_FRAME_MS
        )
        self._task = asyncio.create_task(self._listen(self._stream), name="agent-audio-watch")

    async def _listen(self, stream: rtc.AudioStream) -> None:
        async for event in stream:
            frame = event.frame
            self.observe(np.frombuffer(frame.data, dtype=np.int16), frame.sample_rate, time.monotonic())

    def observe(self, samples: np.ndarray, sample_rate: int, at: float) -> None:
        """One frame of mono int16 `samples` whose last sample reached this process at `at` (monotonic)."""
        levels = np.abs(samples.astype(np.int32))
        loud = np.flatnonzero(levels >= self.threshold)
        if loud.size == 0:
            self._silent_s += samples.size / sample_rate
            return
        first, last = int(loud[0]), int(loud[-1])
        if self._silent_s + first / sample_rate >= ONSET_GAP_S:
            self.onsets.append((at - (samples.size - 1 - first) / sample_rate, int(levels.max())))
            self._onset.set()
            self._onset = asyncio.Event()
        self._silent_s = (samples.size - 1 - last) / sample_rate

    async def wait_for_onsets(self, count: int, since: float, within: float) -> bool:
        """Wait until `count` onsets were heard at or after `since` (monotonic); False after `within` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while sum(1 for at, _ in self.onsets if at >= since) < count:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._onset.wait(), remaining)
        return True

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._stream is not None:
            await self._stream.aclose()
