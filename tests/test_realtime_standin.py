"""The local OpenAI Realtime stand-in, checked two ways.

1. Against the wire schema: raw WebSocket clients drive it and every server event it sends is
   validated with the ``openai`` package's own pydantic models of the GA protocol.
2. Against the real client: livekit-agents' OpenAI Realtime plugin and an ``AgentSession`` run
   unmodified against it through ``base_url`` (typed turn → tool call → templated sources,
   greeting, barge-in).

Offline; output pacing is sped up so the module stays well under a minute.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
import os
import sys
import time
from array import array
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from livekit import rtc
from livekit.agents import Agent, AgentSession, RunContext, function_tool, io
from livekit.plugins import openai
from openai.types.realtime import AudioTranscription
from openai.types.realtime.realtime_audio_input_turn_detection import SemanticVad
from openai.types.realtime.realtime_server_event import RealtimeServerEvent
from pydantic import TypeAdapter

REPO_ROOT = Path(__file__).resolve().parents[1]
try:
    import realtime_standin  # noqa: F401
except ModuleNotFoundError:  # the editable install maps only the product packages; the stand-in sits at the root
    sys.path.insert(0, str(REPO_ROOT))

from realtime_standin import GREETING, EnergyVad, RealtimeStandIn  # noqa: E402
from realtime_standin.policy import FAILED_REPLY, NO_SOURCES_REPLY, render_sources  # noqa: E402

SERVER_EVENT = TypeAdapter(RealtimeServerEvent)
SAMPLE_RATE = 24_000
SOURCES = [{"citation": "Constitución Política de Panamá, art. 37"}, {"citation": "Constitución, art. 41"}]


# ---------------------------------------------------------------------------------------------
# helpers


def pcm_tone(ms: int, amplitude: float = 0.2, freq: float = 440.0) -> bytes:
    n = SAMPLE_RATE * ms // 1000
    level = amplitude * 32767
    return array("h", (int(level * math.sin(2 * math.pi * freq * i / SAMPLE_RATE)) for i in range(n))).tobytes()


def pcm_silence(ms: int) -> bytes:
    return bytes(SAMPLE_RATE * ms // 1000 * 2)


def assert_valid_server_events(events: list[dict[str, Any]]) -> None:
    """Every event the stand-in sent parses as a GA server event of the type it claims."""
    for event in events:
        model = SERVER_EVENT.validate_python(event)
        assert model.type == event["type"]


class RawClient:
    """A bare WebSocket client, to test the protocol without livekit in between."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []

    async def send(self, event: dict[str, Any]) -> None:
        await self.ws.send_str(json.dumps(event))

    async def next(self, event_type: str) -> dict[str, Any]:
        async with asyncio.timeout(5.0):
            while True:
                msg = await self.ws.receive()
                assert msg.type == aiohttp.WSMsgType.TEXT, msg
                event = json.loads(msg.data)
                self.events.append(event)
                if event["type"] == event_type:
                    return event


@pytest.fixture
async def standin() -> AsyncIterator[RealtimeStandIn]:
    async with RealtimeStandIn(speed=40.0, transcripts=["¿Qué dice la Constitución sobre el habeas corpus?"]) as s:
        yield s


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def raw_connect(http: aiohttp.ClientSession, standin: RealtimeStandIn) -> RawClient:
    url = standin.base_url.replace("http", "ws", 1) + "/realtime?model=gpt-realtime"
    ws = await http.ws_connect(url, headers={"Authorization": "Bearer test"})
    client = RawClient(ws)
    created = await client.next("session.created")
    assert created["session"]["model"] == "gpt-realtime"
    return client


# ---------------------------------------------------------------------------------------------
# unit: VAD and the read-back template


def test_vad_ignores_silence_and_short_clicks() -> None:
    vad = EnergyVad()
    assert vad.process(pcm_silence(2000)) == []
    assert vad.process(pcm_tone(40) + pcm_silence(1000)) == []  # 40 ms < 60 ms to start
    assert not vad.speaking


def test_vad_finds_a_tone_turn_in_uneven_chunks() -> None:
    vad = EnergyVad(start_ms=60, stop_ms=500)
    audio = pcm_silence(200) + pcm_tone(700) + pcm_silence(800)
    events = []
    for offset in range(0, len(audio), 1234):  # odd chunk sizes, split mid-sample
        events += vad.process(audio[offset : offset + 1234])
    assert [e.kind for e in events] == ["start", "stop"]
    assert events[0].at_ms == 200
    assert events[1].at_ms == 900


def test_sources_template() -> None:
    text = render_sources(json.dumps({"status": "ok", "sources": SOURCES}))
    assert text == (
        "Modo de ensayo. Encontré 2 fuentes: Constitución Política de Panamá, art. 37; Constitución, art. 41."
    )
    assert render_sources(json.dumps({"sources": []})) == NO_SOURCES_REPLY
    assert render_sources(json.dumps({"status": "failed"})) == FAILED_REPLY
    assert "descartó" in render_sources(json.dumps({"status": "discarded", "sources": SOURCES}))
    assert render_sources("An internal error occurred") == FAILED_REPLY  # failures come back as plain text
    # Lexvoz's own shape
    lexvoz = {"estado": "ok", "aviso": "datos citados", "fuentes": [{"citation": "Constitución, art. 7"}]}
    assert render_sources(json.dumps(lexvoz)) == "Modo de ensayo. Encontré 1 fuente: Constitución, art. 7."
    assert "descartó" in render_sources(json.dumps({"estado": "descartada", "motivo": "otra pregunta"}))
    assert render_sources(json.dumps({"estado": "sin_fuentes", "fuentes": []})) == NO_SOURCES_REPLY


# ---------------------------------------------------------------------------------------------
# protocol, with a raw client


async def test_handshake_requires_bearer_token(standin: RealtimeStandIn, http: aiohttp.ClientSession) -> None:
    url = standin.base_url.replace("http", "ws", 1) + "/realtime?model=gpt-realtime"
    with pytest.raises(aiohttp.WSServerHandshakeError) as excinfo:
        await http.ws_connect(url)
    assert excinfo.value.status == 401
    with pytest.raises(aiohttp.WSServerHandshakeError):
        await http.ws_connect(url, headers={"Authorization": "Bearer "})
    client = await raw_connect(http, standin)
    await client.ws.close()


async def test_session_items_and_errors_follow_the_protocol(
    standin: RealtimeStandIn, http: aiohttp.ClientSession
) -> None:
    client = await raw_connect(http, standin)
    await client.send(
        {
            "type": "session.update",
            "event_id": "ev_1",
            "session": {
                "type": "realtime",
                "instructions": "Eres Lexvoz.",
                "audio": {"input": {"turn_detection": {"type": "semantic_vad", "eagerness": "low"}}},
                "tools": [{"type": "function", "name": "search_panama_law", "parameters": {"type": "object"}}],
            },
        }
    )
    updated = (await client.next("session.updated"))["session"]
    assert updated["instructions"] == "Eres Lexvoz."
    assert updated["audio"]["input"]["turn_detection"] == {
        "type": "semantic_vad",
        "eagerness": "low",
        "create_response": True,
        "interrupt_response": True,
    }
    assert updated["audio"]["output"]["format"] == {"type": "audio/pcm", "rate": 24000}  # merged, not replaced
    assert [t["name"] for t in updated["tools"]] == ["search_panama_law"]

    # item ordering: previous_item_id "root" puts an item first
    first = {"id": "msg_b", "type": "message", "role": "user", "content": [{"type": "input_text", "text": "b"}]}
    await client.send({"type": "conversation.item.create", "item": first})
    added = await client.next("conversation.item.added")
    assert added["item"]["id"] == "msg_b" and added["previous_item_id"] is None
    await client.next("conversation.item.done")
    root = {**first, "id": "msg_a"}
    await client.send({"type": "conversation.item.create", "previous_item_id": "root", "item": root})
    assert (await client.next("conversation.item.added"))["previous_item_id"] is None
    assert [i["id"] for i in standin.connection.conversation.items] == ["msg_a", "msg_b"]

    # errors name the client event they answer
    await client.send({"type": "conversation.item.create", "event_id": "ev_dup", "item": first})
    error = (await client.next("error"))["error"]
    assert error["code"] == "item_create_duplicate_item_id" and error["event_id"] == "ev_dup"
    await client.send({"type": "response.cancel", "event_id": "ev_cancel"})
    error = (await client.next("error"))["error"]
    assert error["message"].startswith("Cancellation failed") and error["event_id"] == "ev_cancel"
    await client.send({"type": "input_audio_buffer.commit", "event_id": "ev_commit"})
    assert (await client.next("error"))["error"]["code"] == "input_audio_buffer_commit_empty"
    await client.send({"type": "conversation.item.truncate", "item_id": "msg_a", "content_index": 0, "audio_end_ms": 5})
    assert (await client.next("error"))["error"]["code"] == "unsupported_content_type"
    await client.send({"type": "no.such.event", "event_id": "ev_bad"})
    assert (await client.next("error"))["error"]["param"] == "type"
    await client.send({"type": "conversation.item.delete", "item_id": "msg_a"})
    assert (await client.next("conversation.item.deleted"))["item_id"] == "msg_a"

    # a second response.create while one is active is refused
    await client.send({"type": "response.create", "response": {"metadata": {"client_event_id": "rc_1"}}})
    await client.send({"type": "response.create", "response": {}})
    created = await client.next("response.created")
    assert created["response"]["metadata"] == {"client_event_id": "rc_1"}
    assert (await client.next("error"))["error"]["code"] == "conversation_already_has_active_response"
    done = await client.next("response.done")
    assert done["response"]["status"] == "completed"
    call = done["response"]["output"][0]
    assert call["type"] == "function_call" and json.loads(call["arguments"]) == {"query": "b"}
    assert standin.response_create_count == 2
    await client.ws.close()
    assert_valid_server_events(standin.sent)


async def test_audio_turn_via_vad_then_text_reply_and_cancel(
    standin: RealtimeStandIn, http: aiohttp.ClientSession
) -> None:
    client = await raw_connect(http, standin)
    await client.send(
        {
            "type": "session.update",
            "session": {
                "type": "realtime",
                "output_modalities": ["text"],
                "tools": [{"type": "function", "name": "search_panama_law", "parameters": {"type": "object"}}],
                "audio": {
                    "input": {
                        "transcription": {"model": "gpt-4o-mini-transcribe"},
                        "turn_detection": {"type": "server_vad", "create_response": True},
                    }
                },
            },
        }
    )
    await client.next("session.updated")
    audio = pcm_silence(300) + pcm_tone(600) + pcm_silence(700)
    for offset in range(0, len(audio), 4800):  # 100 ms appends, like the plugin
        chunk = base64.b64encode(audio[offset : offset + 4800]).decode()
        await client.send({"type": "input_audio_buffer.append", "audio": chunk})
    started = await client.next("input_audio_buffer.speech_started")
    stopped = await client.next("input_audio_buffer.speech_stopped")
    assert stopped["item_id"] == started["item_id"]
    assert started["audio_start_ms"] == 0  # 300 ms of speech start minus 300 ms prefix padding
    committed = await client.next("input_audio_buffer.committed")
    user_item = await client.next("conversation.item.added")
    assert user_item["item"]["id"] == committed["item_id"] == started["item_id"]
    transcript = await client.next("conversation.item.input_audio_transcription.completed")
    assert transcript["transcript"] == "¿Qué dice la Constitución sobre el habeas corpus?"
    call = (await client.next("response.done"))["response"]["output"][0]
    assert json.loads(call["arguments"]) == {"query": transcript["transcript"]}
    assert standin.received[1]["audio"] == ""  # audio payloads are not kept by default

    # the tool's output comes back; the spoken (here: written) reply follows, and is cancelled mid-way
    standin.options.speed = 2.0
    await client.send(
        {
            "type": "conversation.item.create",
            "item": {
                "type": "function_call_output",
                "call_id": call["call_id"],
                "output": json.dumps({"sources": SOURCES}),
            },
        }
    )
    await client.send({"type": "response.create", "response": {}})
    await client.next("response.output_text.delta")
    await client.send({"type": "response.cancel", "event_id": "ev_c"})
    done = (await client.next("response.done"))["response"]
    assert done["status"] == "cancelled"
    assert done["status_details"] == {"type": "cancelled", "reason": "client_cancelled"}
    assert done["output"][0]["status"] == "incomplete"
    assert done["usage"]["total_tokens"] > 0
    await client.ws.close()
    assert_valid_server_events(standin.sent)


async def test_scripted_function_calls(standin: RealtimeStandIn, http: aiohttp.ClientSession) -> None:
    client = await raw_connect(http, standin)
    await client.send(
        {
            "type": "session.update",
            "session": {"type": "realtime", "tools": [{"type": "function", "name": "search_panama_law"}]},
        }
    )
    await client.next("session.updated")
    standin.script_function_call(arguments={"query": "guion"}, call_id="call_dup", delay=0.2)
    standin.script_function_call(call_id="call_dup")
    for expected_args in ({"query": "guion"}, {"query": "hola"}):
        start = time.monotonic()
        await standin.inject_user_turn("hola")
        done = (await client.next("response.done"))["response"]
        elapsed = time.monotonic() - start
        call = done["output"][0]
        assert call["call_id"] == "call_dup"
        assert json.loads(call["arguments"]) == expected_args
    assert elapsed < 0.2  # only the first call was delayed
    await client.ws.close()


# ---------------------------------------------------------------------------------------------
# the real livekit-agents client


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


# ---------------------------------------------------------------------------------------------
# the subprocess form and its control API


async def test_subprocess_cli_and_control_api(http: aiohttp.ClientSession) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "realtime_standin",
        "--port",
        "0",
        "--speed",
        "50",
        "--transcript",
        "texto secreto",
        cwd=REPO_ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode()
        assert line.startswith("realtime-standin ready http://127.0.0.1:"), line
        base = line.split()[-1].removesuffix("/v1")
        async with http.get(base + "/healthz") as resp:
            assert resp.status == 200 and (await resp.json())["connections"] == 0
        async with http.post(base + "/control/user_turn", json={"transcript": "x"}) as resp:
            assert resp.status == 409  # nobody connected

        ws = await http.ws_connect(
            base.replace("http", "ws", 1) + "/v1/realtime?model=gpt-realtime", headers={"Authorization": "Bearer k"}
        )
        client = RawClient(ws)
        await client.next("session.created")
        await client.send(
            {
                "type": "session.update",
                "session": {
                    "type": "realtime",
                    "tools": [{"type": "function", "name": "search_panama_law"}],
                    "audio": {"input": {"transcription": {"model": "gpt-4o-mini-transcribe"}}},
                },
            }
        )
        await client.next("session.updated")
        await client.send({"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm_silence(100)).decode()})
        async with http.post(base + "/control/speech_started") as resp:
            assert resp.status == 200
        started = await client.next("input_audio_buffer.speech_started")
        async with http.post(base + "/control/user_turn", json={"transcript": "¿Qué es el habeas data?"}) as resp:
            assert (await resp.json())["item_id"] == started["item_id"]
        transcript = await client.next("conversation.item.input_audio_transcription.completed")
        assert transcript["transcript"] == "¿Qué es el habeas data?"
        done = await client.next("response.done")
        call_id = done["response"]["output"][0]["call_id"]
        await client.send(
            {
                "type": "conversation.item.create",
                "item": {"type": "function_call_output", "call_id": call_id, "output": "{}"},
            }
        )
        await client.next("conversation.item.added")
        async with http.get(base + "/control/events") as resp:
            events = await resp.json()
        assert [e["type"] for e in events] == [
            "session.update",
            "input_audio_buffer.append",
            "conversation.item.create",
        ]
        assert events[2]["item_type"] == "function_call_output" and events[2]["call_id"] == call_id
        assert "habeas" not in json.dumps(events)  # no conversation text on the control API
        await ws.close()
    finally:
        proc.terminate()
        _, stderr_bytes = await asyncio.wait_for(proc.communicate(), 10)
    stderr = stderr_bytes.decode()
    assert proc.returncode == 0
    assert "client connected" in stderr
    assert "habeas" not in stderr and "secreto" not in stderr  # logs carry event types only
