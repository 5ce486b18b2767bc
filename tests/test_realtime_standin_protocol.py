"""The local OpenAI Realtime stand-in against the wire schema, with a raw WebSocket client.

Raw clients drive it and every server event it sends is validated with the ``openai`` package's
own pydantic models of the GA protocol: handshake, session config, item ordering, errors naming
their client event, VAD turns, text replies, cancellation and scripted function calls.

Offline; output pacing is sped up so the module stays well under a minute.
"""

from __future__ import annotations

import base64
import json
import time

import aiohttp
import pytest

from realtime_standin import RealtimeStandIn
from tests.standin_helpers import (  # noqa: F401 - fixtures
    SOURCES,
    RawClient,
    assert_valid_server_events,
    pcm_silence,
    pcm_tone,
    standin_fixture,
)


async def raw_connect(http: aiohttp.ClientSession, standin: RealtimeStandIn) -> RawClient:
    url = standin.base_url.replace("http", "ws", 1) + "/realtime?model=gpt-realtime"
    ws = await http.ws_connect(url, headers={"Authorization": "Bearer test"})
    client = RawClient(ws)
    created = await client.next("session.created")
    assert created["session"]["model"] == "gpt-realtime"
    return client


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
