"""The local OpenAI Realtime stand-in against the real client.

livekit-agents' OpenAI Realtime plugin and an ``AgentSession`` run unmodified against it through
``base_url``: typed turn → tool call → templated sources, greeting, barge-in.

Offline; output pacing is sped up so the module stays well under a minute.
"""

from __future__ import annotations

import asyncio
import json
import time

import aiohttp
import pytest
from livekit import rtc
from livekit.agents import Agent, AgentSession, RunContext, function_tool, io
from livekit.plugins import openai
from openai.types.realtime import AudioTranscription
from openai.types.realtime.realtime_audio_input_turn_detection import SemanticVad

from realtime_standin import GREETING, RealtimeStandIn
from realtime_standin.policy import render_sources
from tests.standin_helpers import (  # noqa: F401 - fixtures
    SAMPLE_RATE,
    SOURCES,
    assert_valid_server_events,
    standin_fixture,
)


class FakeSpeaker(io.AudioOutput):
    """An audio sink that 'plays' in real time, so interruptions report a playback position."""

    def __init__(self) -> None:
        super().__init__(
            label="fake-speaker", capabilities=io.AudioOutputCapabilities(pause=False), sample_rate=SAMPLE_RATE
        )
        self._pushed = 0.0
        self._started_at: float | None = None
        self._interrupted = asyncio.Event()
        self._playout: asyncio.Task[None] | None = None

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        if self._started_at is None:
            self._started_at = time.monotonic()
            self._interrupted.clear()
            self.on_playback_started(created_at=time.time())
        self._pushed += frame.duration

    def flush(self) -> None:
        super().flush()
        if self._started_at is not None:
            self._playout = asyncio.create_task(self._play_out())

    def clear_buffer(self) -> None:
        self._interrupted.set()

    async def _play_out(self) -> None:
        assert self._started_at is not None
        remaining = self._pushed - (time.monotonic() - self._started_at)
        try:
            await asyncio.wait_for(self._interrupted.wait(), max(0.0, remaining))
            interrupted = True
        except TimeoutError:
            interrupted = False
        played = min(self._pushed, time.monotonic() - self._started_at) if interrupted else self._pushed
        self._pushed, self._started_at = 0.0, None
        self.on_playback_finished(playback_position=played, interrupted=interrupted)


class LexvozLikeAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Eres Lexvoz, asistente de investigación jurídica panameña.")
        self.queries: list[str] = []

    @function_tool
    async def search_panama_law(self, context: RunContext, query: str) -> str:
        """Busca fuentes en la Constitución de Panamá."""
        self.queries.append(query)
        return json.dumps({"status": "ok", "sources": SOURCES}, ensure_ascii=False)


def realtime_model(standin: RealtimeStandIn, http: aiohttp.ClientSession) -> openai.realtime.RealtimeModel:
    return openai.realtime.RealtimeModel(
        base_url=standin.base_url,
        api_key="test",
        model="gpt-realtime",
        voice="marin",
        turn_detection=SemanticVad(type="semantic_vad", eagerness="low", interrupt_response=True, create_response=True),
        input_audio_transcription=AudioTranscription(model="gpt-4o-mini-transcribe"),
        http_session=http,
    )


async def test_typed_turn_researches_then_reads_back_sources(
    standin: RealtimeStandIn, http: aiohttp.ClientSession
) -> None:
    agent = LexvozLikeAgent()
    async with AgentSession(llm=realtime_model(standin, http)) as session:
        await session.start(agent)
        updates = [await standin.wait_for_client_event("session.update", after=i) for i in range(3)]
        assert len({u["event_id"] for u in updates}) == 3
        assert any(t.get("name") == "search_panama_law" for t in standin.connection.session["tools"])

        question = "¿Qué dice la Constitución sobre la libertad de culto?"
        result = await session.run(user_input=question)
        result.expect.next_event().is_function_call(name="search_panama_law", arguments={"query": question})
        result.expect.next_event().is_function_call_output()
        message = result.expect.next_event().is_message(role="assistant").event().item
        assert message.text_content == render_sources(json.dumps({"sources": SOURCES}))
        assert agent.queries == [question]

    # on the wire: the call's output came back as an item, then a fresh response.create followed
    events = standin.received
    output_index, output = next(
        (i, e)
        for i, e in enumerate(events)
        if e["type"] == "conversation.item.create" and e["item"]["type"] == "function_call_output"
    )
    call = standin.server_events("response.output_item.done")[0]["item"]
    assert output["item"]["call_id"] == call["call_id"]
    assert json.loads(output["item"]["output"])["sources"] == SOURCES
    assert any(e["type"] == "response.create" for e in events[output_index + 1 :])
    assert standin.response_create_count == 2
    assert [d["response"]["status"] for d in standin.server_events("response.done")] == ["completed", "completed"]
    assert_valid_server_events(standin.sent)


async def test_greeting_via_generate_reply(standin: RealtimeStandIn, http: aiohttp.ClientSession) -> None:
    async with AgentSession(llm=realtime_model(standin, http)) as session:
        await session.start(LexvozLikeAgent())
        handle = session.generate_reply(instructions="Saluda al usuario.")
        await asyncio.wait_for(handle.wait_for_playout(), 10)
        assert not handle.interrupted
        created = standin.server_events("response.created")[0]["response"]
        request = standin.client_events("response.create")[0]
        assert created["metadata"]["client_event_id"] == request["event_id"]
        assert standin.server_events("response.output_audio_transcript.done")[0]["transcript"] == GREETING
        assert [m.text_content for m in handle.chat_items if m.type == "message"] == [GREETING]


@pytest.mark.parametrize(
    ("server_interrupts", "reason"),
    [(None, "turn_detected"), (False, "client_cancelled")],
    ids=["server-cancels-like-openai", "client-cancel-does-it"],
)
async def test_barge_in_cancels_the_reply_and_truncates(
    http: aiohttp.ClientSession, server_interrupts: bool | None, reason: str
) -> None:
    # real-time pacing, so the greeting is still streaming when the user barges in
    async with RealtimeStandIn(speed=1.0, server_interrupts=server_interrupts) as standin:
        async with AgentSession(llm=realtime_model(standin, http)) as session:
            session.output.audio = FakeSpeaker()
            await session.start(LexvozLikeAgent())
            handle = session.generate_reply(instructions="Saluda al usuario.")
            await standin.wait_for_server_event("response.output_audio.delta")
            await asyncio.sleep(0.5)  # let some audio "play"
            await standin.inject_speech_started()

            await standin.wait_for_client_event("response.cancel")
            truncate = await standin.wait_for_client_event("conversation.item.truncate")
            done = await standin.wait_for_server_event("response.done")
            assert done["response"]["status"] == "cancelled"
            assert done["response"]["status_details"] == {"type": "cancelled", "reason": reason}
            assert truncate["item_id"] == done["response"]["output"][0]["id"]
            assert 0 < truncate["audio_end_ms"] < 2000
            await standin.wait_for_server_event("conversation.item.truncated")
            await asyncio.wait_for(handle.wait_for_playout(), 5)
            assert handle.interrupted
            # the plugin sends response.cancel (without event_id) from two places on a barge-in; every
            # cancel that finds no active response is refused like on the real API, and the plugin
            # ignores that error. With the server cancelling first, all of them are refused.
            cancels = standin.client_events("response.cancel")
            refused = len(cancels) if server_interrupts is None else len(cancels) - 1
            assert [e["error"]["code"] for e in standin.server_events("error")] == [
                "response_cancel_not_active"
            ] * refused

            # the user finishes the turn: the next response researches what they said
            standin.options.speed, standin.options.ms_per_char = 50.0, 5  # short replies from here on
            await standin.inject_user_turn("¿Y el artículo 41?")
            call = await standin.wait_for_server_event(
                "response.output_item.done", lambda e: e["item"]["type"] == "function_call"
            )
            assert json.loads(call["item"]["arguments"]) == {"query": "¿Y el artículo 41?"}
        assert_valid_server_events(standin.sent)
