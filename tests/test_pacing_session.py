"""Transcript pacing through the real framework: `build_conversation` (the worker's wiring), a real `AgentSession`
with livekit-agents' room outputs on an autospec'd room (its audio output plays through a real `rtc.AudioSource`,
in real time), and the Realtime stand-in speaking a known text.

The stand-in streams an answer as 100 ms steps, each a piece of the transcript and then that step's audio, here
ten times faster than real time, as the real model also sends its answer faster than it is played. It spreads the
words evenly over the steps and sends each word with the last step of its share, so a word sounds from the end of
the previous word's step on. The room's transcription stream is recorded with the time each piece reached it.

With `LEXVOZ_TRANSCRIPT_PACING=off` (livekit-agents' `sync_transcription=False`, no pacer) both tests fail: the
words reach the room about ten times too early, and after a barge-in the chat history holds the whole answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from livekit.agents import ChatMessage, ConversationItemAddedEvent
from livekit.agents.voice.io import PlaybackStartedEvent

from agent.mcp.gateway import GatewayOptions, McpGateway
from agent.settings import Settings
from agent.voice.conversation import Conversation, build_conversation
from realtime_standin import RealtimeStandIn
from realtime_standin.policy import PolicyContext, SpeakPlan
from tests.job_double import fake_job, mocked_room
from tests.mcp_fixture import FakeMcpServer

STEP_S = 0.1  # the stand-in's audio step
MS_PER_CHAR = 60
SPEED = 10.0
WORDS = 20
ANSWER = " ".join(["casa"] * WORDS)  # words alike: any sensible weighing agrees with the stand-in's timing
TOLERANCE_S = 0.05  # scheduling jitter


class OneAnswer:
    """A stand-in policy that says the same thing every time (the greeting included)."""

    def decide(self, ctx: PolicyContext) -> SpeakPlan:
        return SpeakPlan(ANSWER)


@dataclass
class Page:
    """What reached the room's `lk.transcription` stream from the agent, with when."""

    writes: list[tuple[float, str]] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def text(self) -> str:
        return "".join(t for _, t in self.writes)

    def record(self, room: Any) -> None:
        page = self

        class Writer:
            async def write(self, text: str) -> None:
                page.writes.append((time.time(), text))

            async def aclose(self, **_: Any) -> None:
                page.closed.set()

        class Ignored:
            async def write(self, text: str) -> None:
                pass

            async def aclose(self, **_: Any) -> None:
                pass

        async def stream_text(*, topic: str, sender_identity: str | None = None, **_: Any) -> object:
            agent = sender_identity in (None, room.local_participant.identity)
            return Writer() if topic == "lk.transcription" and agent else Ignored()

        room.local_participant.stream_text.side_effect = stream_text


def step_of_each_word(standin: RealtimeStandIn) -> list[int]:
    """For every word of the first answer, the audio step that carried it (steps without a word send no text)."""
    steps: list[int] = []
    audio_steps = 0
    response_id = standin.server_events("response.created")[0]["response"]["id"]
    for event in standin.sent:
        if event.get("response_id") != response_id:
            continue
        if event["type"] == "response.output_audio_transcript.delta":
            steps.extend([audio_steps] * len(event["delta"].split()))
        elif event["type"] == "response.output_audio.delta":
            audio_steps += 1
    return steps


@pytest.fixture
async def standin() -> AsyncIterator[RealtimeStandIn]:
    async with RealtimeStandIn(speed=SPEED, ms_per_char=MS_PER_CHAR, policy=OneAnswer()) as s:
        yield s


@dataclass
class Rig:
    conversation: Conversation
    page: Page
    started: asyncio.Future[float]
    said: asyncio.Queue[ChatMessage]


@pytest.fixture
async def rig(
    request: pytest.FixtureRequest, standin: RealtimeStandIn, http: aiohttp.ClientSession, server: FakeMcpServer
) -> AsyncIterator[Rig]:
    room = mocked_room()
    page = Page()
    page.record(room)
    settings = Settings(OPENAI_API_KEY="test", OPENAI_BASE_URL=standin.base_url, LEXVOZ_TRANSCRIPT_PACING=request.param)
    gateway = McpGateway(GatewayOptions(url=server.url, call_timeout_s=8, connect_timeout_s=2, retry_delay_s=0.01))
    conversation = build_conversation(room, settings, gateway=gateway, greet=True, http_session=http)
    started: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    said: asyncio.Queue[ChatMessage] = asyncio.Queue()

    def _added(ev: ConversationItemAddedEvent) -> None:
        if isinstance(ev.item, ChatMessage) and ev.item.role == "assistant":
            said.put_nowait(ev.item)

    conversation.session.on("conversation_item_added", _added)
    with fake_job(room):
        await conversation.start()
        audio = conversation.session.output.audio
        assert audio is not None

        def _started(ev: PlaybackStartedEvent) -> None:
            if not started.done():
                started.set_result(ev.created_at)

        audio.on("playback_started", _started)
        try:
            yield Rig(conversation, page, started, said)
        finally:
            await conversation.session.aclose()
            await gateway.aclose()


# livekit-agents' synchronizer ("framework") shows words up to ~0.1 s before this ground truth; bench/pacing.py
# measures both.
@pytest.mark.parametrize("rig", ["played"], indirect=True)
async def test_words_reach_the_room_no_earlier_than_their_audio_plays(rig: Rig, standin: RealtimeStandIn) -> None:
    item = await asyncio.wait_for(rig.said.get(), 20)  # the greeting, played to its end
    await asyncio.wait_for(rig.page.closed.wait(), 5)
    assert not item.interrupted
    started = rig.started.result()
    steps = step_of_each_word(standin)
    assert len(steps) == WORDS
    shown = 0
    for at, piece in rig.page.writes:
        shown += len(piece.split())
        sounds_from = (steps[shown - 2] + 1) * STEP_S if shown > 1 else 0.0  # the last word shown begins here
        assert at - started >= sounds_from - TOLERANCE_S, (at - started, shown, piece)
    assert rig.page.text.split() == ANSWER.split()
    assert item.text_content == ANSWER


# Ours only: livekit-agents' synchronizer was seen here to put one word more on the page than it hands the history.
@pytest.mark.parametrize("rig", ["played"], indirect=True)
async def test_after_a_barge_in_the_chat_history_holds_only_what_was_played(rig: Rig, standin: RealtimeStandIn) -> None:
    started = await asyncio.wait_for(rig.started, 10)
    await asyncio.sleep(max(0.0, started + 2.0 - time.time()))
    await standin.inject_speech_started()  # the person talks over the greeting two seconds in
    item = await asyncio.wait_for(rig.said.get(), 10)
    await asyncio.wait_for(rig.page.closed.wait(), 5)
    assert item.interrupted
    steps = step_of_each_word(standin)
    truncate = await standin.wait_for_client_event("conversation.item.truncate", timeout=5)
    played_s = truncate["audio_end_ms"] / 1000
    # Never more than the two seconds that passed; less when a busy host delivered the audio late (1.65 s in one CI
    # run on two busy cores). What is pinned is that history and page hold what was played, whatever that was.
    assert 0.5 <= played_s <= 2.6, played_s
    heard = 1 + sum(1 for s in steps[:-1] if (s + 1) * STEP_S < played_s)  # words whose sound had begun
    kept = item.text_content.split() if item.text_content else []
    assert abs(len(kept) - heard) <= 2, (kept, heard)
    assert len(kept) < WORDS
    # the page shows the same words the model's memory holds
    assert rig.page.text.split() == kept
    history = [i for i in rig.conversation.session.history.items if isinstance(i, ChatMessage)]
    assert [i.text_content for i in history if i.role == "assistant"] == [item.text_content]
